"""``--executor slurm``: the plan's tasks without a usable record, as one Slurm job array.

``prepare`` is the Slurm counterpart of ``pool.prepare``: it checks the settings, builds the
starting points here (the ``build`` it is given: committed at ``cpu``, a few seconds at ``smoke``),
then submits every task of the plan whose record is missing or stale (``status.status``), primary
comparisons first, as one job array through submitit (``pip install -e '.[slurm]'``). Each array
task runs ``run_one(profile, run key)``: it resolves the plan inside the job (profiles and plans
are deterministic, so nothing but two strings is pickled) and calls ``jobs.run_task``, the
function the local executor runs, on as many torch threads as CPUs it asked for (one by default),
writing its record atomically into ``$PSNLIB_RESULTS/<profile>/``. A task that reaches its time
limit or is preempted is requeued by submitit (``Requeued.checkpoint``) and resumes from its
caches and last training checkpoint; re-submitting skips every task whose record is done.

What a task asks for, and the checks before anything is submitted, are in
``psnlib.replication.compute.slurm_settings``; a job array ``sbatch`` refuses is a one-line
ValueError too, with sbatch's reason. The job script exports ``PSNLIB_DATA`` and the ledger
(``$PSNLIB_RESULTS``) quoted for the shell, so no path can run a command on a node.

The submitted array is kept in ``runs/<profile>/slurm.json`` (its id, run keys and log folder
``runs/<profile>/slurm/<array id>/``, submitit's); one that is damaged (``read_state``) is named
with what to do, never guessed at. While any task of it is queued or running, a
second invocation reports its progress and submits nothing. Progress reads ``squeue`` and the
records: done (its record is usable), running, pending, or failed, with the array task's id, its
log file and the last line of its error log; ``wait`` prints a line whenever the counts change,
until no task of the array is left in the queue. Slurm's accounting (``sacct``) is not needed.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from psnlib.cache import load_json
from psnlib.io import atomic_write_json
from psnlib.replication.compute import jobs
from psnlib.replication.compute.slurm_settings import SlurmOptions, check_cluster, check_time, setup
from psnlib.replication.plan import schedule
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.records import status

STATE_FILE = "slurm.json"  # runs/<profile>/: the array last submitted
STATE_KEYS = ("array", "keys", "jobs", "logs", "submitted")  # what its readers take from it
LOGS = "slurm"  # runs/<profile>/slurm/<array id>/: submitit's pickles and logs
QUEUED = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*")
POLL = 10.0  # seconds between two looks at the queue while waiting
RUNNING = ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING")


def run_one(profile: str, key: str) -> str:
    """One array task: the plan's task whose run key is ``key`` at ``profile``, computed by
    ``jobs.run_task`` (its record written atomically) on ``$SLURM_CPUS_PER_TASK`` torch threads
    (one where unset). Returns its name; a key that is not a task of the plan is a ValueError."""
    import torch

    settings = get_profile(profile)
    found = [task for task in schedule.tasks(settings) if task.key(settings) == key]
    if not found:
        raise ValueError(f"run key {key!r} is not a task of profile {profile!r}'s plan")
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    jobs.run_task(settings, found[0])
    return found[0].name()


class Requeued:
    """``run_one`` as submitit runs it: at its time limit or a preemption, submitit calls
    ``checkpoint`` and requeues the same task, which resumes from its caches."""

    def __call__(self, profile: str, key: str) -> str:
        return run_one(profile, key)

    def checkpoint(self, profile: str, key: str) -> Any:
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(Requeued(), profile, key)


def state_path(runs_dir: Path) -> Path:
    """The array last submitted at a profile: ``runs/<profile>/slurm.json``."""
    return runs_dir / STATE_FILE


def _state_problem(state: Any) -> str | None:
    """What is wrong with the content of a state file, or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        return f"no {', '.join(missing)}"
    if not (isinstance(state["array"], str) and state["array"].isdigit()):
        return f"array {state['array']!r} is not a job id"
    lists = [state[key] for key in ("keys", "jobs", "logs")]
    if not all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in lists) or (
        len({len(x) for x in lists}) != 1
    ):
        return "keys, jobs and logs are not lists of names of one length"
    return None


def read_state(runs_dir: Path) -> dict | None:
    """The array last submitted here (``state_path``), None where none was. A damaged file (not
    JSON, or without the array's id, run keys, jobs, logs or time, ``STATE_KEYS``) is a
    ValueError naming it and what to do: its jobs may still be queued."""
    path = state_path(runs_dir)
    if not os.path.lexists(path):
        return None
    try:
        state = load_json(path)
    except ValueError as err:  # psnlib.cache.Damaged: a directory, or not JSON
        wrong: str | None = str(err)
    else:
        wrong = _state_problem(state)
    if wrong is not None:
        raise ValueError(
            f"the Slurm state {path} is damaged ({wrong}): once squeue shows none of its jobs "
            "(squeue --me), remove it and run again"
        )
    return state


def submit(profile: Profile, chosen: SlurmOptions, keys: list[str], runs_dir: Path) -> dict:
    """Submit ``keys`` as one job array (``Requeued`` each) and keep it in the state file;
    returns that state: ``array`` (the job id), ``keys``, ``folder`` (the logs), ``submitted``."""
    import submitit
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    executor = submitit.SlurmExecutor(folder=runs_dir / LOGS / "%A", max_num_timeout=3)
    executor.update_parameters(
        job_name=f"psnlib-{profile.name}",
        time=chosen.time,
        cpus_per_task=chosen.cpus_per_task,
        mem=chosen.mem,
        array_parallelism=chosen.array_parallelism,
        signal_delay_s=120,
        setup=setup(),
        **({"partition": chosen.partition} if chosen.partition else {}),
        **({"gpus_per_task": chosen.gpus_per_task} if chosen.gpus_per_task else {}),
    )
    try:  # submitit prints sbatch's refusal on stderr too: it is in the one line instead
        with contextlib.redirect_stderr(io.StringIO()):
            submitted = executor.map_array(Requeued(), [profile.name] * len(keys), keys)
    except (FailedJobError, FailedSubmissionError) as err:  # sbatch's word, on one line
        why = " ".join(str(err).split()) or "no reason given"
        raise ValueError(f"sbatch refused the job array of {len(keys)} task(s): {why}") from err
    array = submitted[0].job_id.split("_")[0]
    state = {
        "array": array,
        "profile": profile.name,
        "keys": keys,
        "folder": str(runs_dir / LOGS / array),
        "jobs": [job.job_id for job in submitted],  # <array>_<index>; a lone task is a plain job
        "logs": [str(job.paths.stderr) for job in submitted],
        "options": asdict(chosen),
        "submitted": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    atomic_write_json(state_path(runs_dir), state)
    return state


def _queue(array: str) -> dict[str, str]:
    """Job id (``<array>_<index>``, or ``<array>`` for a lone task) -> Slurm state, of each task
    of ``array`` still in the queue."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-j", array, "-o", "%i %T"], capture_output=True, text=True
    )
    states = {}
    for line in out.stdout.splitlines():
        job, _, state = line.partition(" ")
        if job.partition("_")[0] == array:
            states[job] = state.strip()
    return states


def last_error(path: Path) -> str:
    """The last line of a log that names a Python exception (``ValueError: ...``), else its last
    line that is not srun's, or why there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no log written (the task never started)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if EXCEPTION.match(line)]
    ours = [line for line in lines if not line.startswith(("srun:", "slurmstepd:"))]
    if errors:
        return errors[-1]
    cancelled = [line for line in lines if "CANCELLED" in line or "DUE TO TIME LIMIT" in line]
    return (cancelled or ours or ["empty log (cancelled or killed before any output)"])[-1]


def progress(profile: Profile, state: dict) -> pd.DataFrame:
    """One row per task of the array in ``state``: run, job (``<array>_<index>``), ``state``
    (done, running, pending, failed), log (its error log) and ``error`` (its last error line)."""
    queue, keys = _queue(state["array"]), set(state["keys"])
    plan = [task for task in schedule.tasks(profile) if task.key(profile) in keys]
    usable = {row.run: row.state for row in status.status(profile, plan).itertuples()}
    rows = []
    for key, job, where in zip(state["keys"], state["jobs"], state["logs"], strict=True):
        log = Path(where)
        slurm_state = queue.get(job)
        if slurm_state in RUNNING:
            now, error = "running", ""
        elif slurm_state is not None:
            now, error = "pending", ""
        elif usable.get(key) == "done":
            now, error = "done", ""
        else:
            now, error = "failed", last_error(log)
        rows.append(
            {
                "run": key,
                "job": job,
                "state": now,
                "log": str(log),
                "error": error,
            }
        )
    return pd.DataFrame(rows, columns=["run", "job", "state", "log", "error"])


def summary(table: pd.DataFrame) -> str:
    """``3 done, 0 failed, 1 running, 2 pending``."""
    counts = table["state"].value_counts()
    return ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "failed", "running", "pending"))


def report(profile: Profile, runs_dir: Path) -> str | None:
    """``--status``' lines on the array last submitted at ``profile``; None where none was, one
    line naming a damaged state file (``read_state``)."""
    try:
        state = read_state(runs_dir)
    except ValueError as err:
        return f"[psnlib] slurm: {err}"
    if state is None:
        return None
    if shutil.which("squeue") is None:
        return f"[psnlib] slurm array {state['array']}: squeue not found here, job states unknown"
    table = progress(profile, state)
    lines = [
        f"[psnlib] slurm array {state['array']} (submitted {state['submitted']}): {summary(table)}"
    ]
    lines += [failure(row) for row in table[table["state"] == "failed"].itertuples()]
    return "\n".join(lines)


def failure(row: Any) -> str:
    """How a failed task is named: run key, job id, log file, last error line."""
    return f"[psnlib]   FAILED {row.run}: job {row.job}, log {row.log}: {row.error}"


def wait(profile: Profile, state: dict, poll: float | None = None) -> pd.DataFrame:
    """Print the array's progress whenever it changes until none of its tasks is queued, then
    each failed task (``failure``); returns the last ``progress``."""
    shown = None
    while True:
        table = progress(profile, state)
        line = summary(table)
        if line != shown:
            print(f"[psnlib] slurm array {state['array']}: {line}", flush=True)
            shown = line
        if not table["state"].isin(["running", "pending"]).any():
            break
        time.sleep(POLL if poll is None else poll)
    for row in table[table["state"] == "failed"].itertuples():
        print(failure(row), flush=True)
    return table


def active(runs_dir: Path) -> dict | None:
    """The state of the array last submitted here if any of its tasks is still queued; a
    damaged state file is a ValueError (``read_state``)."""
    state = read_state(runs_dir)
    if state is not None and _queue(state["array"]):
        return state
    return None


def prepare(
    profile: Profile,
    chosen: SlurmOptions,
    runs_dir: Path,
    build: Callable[[], None],
    keys: list[str] | None = None,
    block: bool = True,
    poll: float | None = None,
) -> pd.DataFrame | None:
    """Check, build the starting points (``build``), submit the tasks without a usable record
    (only those of ``keys`` where given), then with ``block`` wait and return the plan's status
    (``status.status``); without, return None once submitted. An array of this profile still in
    the queue is reported (and waited for), not submitted again. Bad input: a ValueError."""
    check_cluster(chosen)
    plan = everything = schedule.tasks(profile)
    if keys is not None:
        known = {task.key(profile) for task in plan}
        unknown = [key for key in keys if key not in known]
        if unknown:
            raise ValueError(
                f"--runs {unknown}: not run keys of profile {profile.name!r}'s plan "
                "(--status lists them)"
            )
        plan = [task for task in plan if task.key(profile) in set(keys)]
    running = active(runs_dir)
    if running is not None:
        print(
            f"[psnlib] slurm array {running['array']} (submitted {running['submitted']}) is "
            "still queued: not submitting again",
            flush=True,
        )
        if not block:
            print(report(profile, runs_dir), flush=True)
            return None
        wait(profile, running, poll)
        return status.status(profile, plan)
    whole = status.status(profile, everything)  # costs are measured on the whole plan's records
    whole["estimate"] = status.estimate(whole)
    wanted = {task.key(profile) for task in plan}
    left = whole[(whole["state"] != "done") & whole["run"].isin(wanted)]
    check_time(chosen, left)
    build()
    if left.empty:
        print("[psnlib] slurm: every task has a usable record; nothing to submit", flush=True)
        return status.status(profile, plan)
    state = submit(profile, chosen, list(left["run"]), runs_dir)
    print(
        f"[psnlib] slurm: submitted job array {state['array']} ({len(left)} tasks, "
        f"{chosen.cpus_per_task} CPU(s), {chosen.gpus_per_task} GPU(s), {chosen.time} min each; "
        f"logs in {state['folder']})",
        flush=True,
    )
    if not block:
        return None
    wait(profile, state, poll)
    return status.status(profile, plan)
