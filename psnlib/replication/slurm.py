"""``--executor slurm``: the plan's tasks without a usable record, as one Slurm job array.

``prepare`` is the Slurm counterpart of ``pool.prepare``: it checks the settings, builds the
starting points here (the ``build`` it is given: committed at ``cpu``, a few seconds at ``smoke``),
then submits every task of the plan whose record is missing or stale (``jobs.status``), primary
comparisons first, as one job array through submitit (``pip install -e '.[slurm]'``). Each array
task runs ``run_one(profile, run key)``: it resolves the plan inside the job (profiles and plans
are deterministic, so nothing but two strings is pickled) and calls ``jobs.run_task``, the
function the local executor runs, on as many torch threads as CPUs it asked for (one by default),
writing its record atomically into ``$PSNLIB_RESULTS/<profile>/``. A task that reaches its time
limit or is preempted is requeued by submitit (``Requeued.checkpoint``) and resumes from its
caches and last training checkpoint; re-submitting skips every task whose record is done.

What a task asks for (``SlurmOptions``): a partition, a time limit in minutes, CPUs, memory, GPUs
and the array's concurrency cap, from the profile's defaults (``DEFAULTS``; ``paper``'s GPUs are
``configs/accelerate/multi_gpu.yaml``'s processes), then a YAML file (``--slurm-config``, the
same keys), then the command line. Bad input is one line before anything is submitted (a
ValueError): submitit not installed, no ``sbatch`` on PATH, a partition ``sinfo`` does not list, a
time limit shorter than a task's measured cost (``jobs.estimate``), an unknown key in the file.

The submitted array is kept in ``runs/<profile>/slurm.json`` (its id, run keys and log folder
``runs/<profile>/slurm/<array id>/``, submitit's). While any task of it is queued or running, a
second invocation reports its progress and submits nothing. Progress reads ``squeue`` and the
records: done (its record is usable), running, pending, or failed, with the array task's id, its
log file and the last line of its error log; ``wait`` prints a line whenever the counts change,
until no task of the array is left in the queue. Slurm's accounting (``sacct``) is not needed.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from psnlib.io import atomic_write_json, read_json
from psnlib.replication import jobs, ledger
from psnlib.replication.paths import ROOT
from psnlib.replication.profiles import Profile, get_profile

STATE_FILE = "slurm.json"  # runs/<profile>/: the array last submitted
LOGS = "slurm"  # runs/<profile>/slurm/<array id>/: submitit's pickles and logs
ACCELERATE = ROOT / "configs" / "accelerate" / "multi_gpu.yaml"
QUEUED = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*")
POLL = 10.0  # seconds between two looks at the queue while waiting
RUNNING = ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING")


@dataclass(frozen=True)
class SlurmOptions:
    """What each array task asks for: ``partition`` (None: the cluster's default), ``time`` (its
    limit in minutes), ``cpus_per_task``, ``mem_gb``, ``gpus_per_task``, and ``array_parallelism``
    (how many run at once)."""

    partition: str | None = None
    time: int = 60
    cpus_per_task: int = 1
    mem_gb: float = 4.0
    gpus_per_task: int = 0
    array_parallelism: int = 256


def _accelerate_gpus() -> int:
    """The GPUs ``configs/accelerate/multi_gpu.yaml`` trains on (its ``num_processes``)."""
    import yaml

    return int(yaml.safe_load(ACCELERATE.read_text())["num_processes"])


def defaults(profile: Profile) -> SlurmOptions:
    """A profile's defaults: ``smoke`` and ``cpu`` 1 CPU and no GPU per task (tiny models, one
    thread each); ``gpu`` one GPU; ``paper`` the GPUs of its accelerate config, 8 CPUs each."""
    if profile.name == "paper":
        gpus = _accelerate_gpus()
        return SlurmOptions(
            time=48 * 60, cpus_per_task=8 * gpus, mem_gb=64.0 * gpus, gpus_per_task=gpus
        )
    if profile.name == "gpu":
        return SlurmOptions(time=24 * 60, cpus_per_task=8, mem_gb=64.0, gpus_per_task=1)
    if profile.name == "cpu":
        return SlurmOptions(time=6 * 60)
    return SlurmOptions(time=30)


def options(profile: Profile, config: Path | None = None, **given: Any) -> SlurmOptions:
    """The profile's defaults, then ``config`` (YAML with ``SlurmOptions``' keys), then the
    values ``given`` that are not None. A file that cannot be read, an unknown key or a value out
    of range is a ValueError naming it."""
    chosen = defaults(profile)
    names = [f.name for f in fields(SlurmOptions)]
    if config is not None:
        import yaml

        try:
            loaded = yaml.safe_load(Path(config).read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"--slurm-config {str(config)!r} cannot be read: {err}") from err
        if not isinstance(loaded, dict):
            raise ValueError(f"--slurm-config {str(config)!r} must be a mapping of {names}")
        unknown = sorted(set(loaded) - set(names))
        if unknown:
            raise ValueError(
                f"--slurm-config {str(config)!r}: unknown key(s) {unknown}; allowed: {names}"
            )
        chosen = replace(chosen, **loaded)
    chosen = replace(chosen, **{k: v for k, v in given.items() if v is not None})
    for name in ("time", "cpus_per_task", "array_parallelism"):
        value = getattr(chosen, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"slurm {name} must be an integer >= 1, got {value!r}")
    if not isinstance(chosen.gpus_per_task, int) or chosen.gpus_per_task < 0:
        raise ValueError(
            f"slurm gpus_per_task must be an integer >= 0, got {chosen.gpus_per_task!r}"
        )
    if not (isinstance(chosen.mem_gb, int | float) and chosen.mem_gb > 0):
        raise ValueError(f"slurm mem_gb must be a number of GB > 0, got {chosen.mem_gb!r}")
    return chosen


def check_cluster(chosen: SlurmOptions) -> None:
    """submitit importable, ``sbatch`` on PATH, the partition one ``sinfo`` lists; else a
    ValueError of one line."""
    if importlib.util.find_spec("submitit") is None:
        raise ValueError(
            "--executor slurm needs submitit, which is not installed: pip install -e '.[slurm]'"
        )
    for command in ("sbatch", "squeue", "sinfo"):
        if shutil.which(command) is None:
            raise ValueError(f"--executor slurm needs Slurm's {command!r}, not found on PATH")
    if chosen.partition is not None:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True)
        partitions = sorted(set(out.stdout.split()))
        if out.returncode != 0:
            raise ValueError(f"sinfo failed (is Slurm reachable?): {out.stderr.strip()}")
        if chosen.partition not in partitions:
            raise ValueError(
                f"--partition {chosen.partition!r} is not a partition of this cluster; "
                f"sinfo lists {partitions}"
            )


def check_time(chosen: SlurmOptions, table: pd.DataFrame) -> None:
    """A ValueError naming the first task of ``table`` (``jobs.status`` with ``jobs.estimate``'s
    column ``estimate``: CPU seconds on one thread) whose cost exceeds the time limit."""
    for row in table.itertuples():
        cost = row.estimate
        if cost == cost and cost > chosen.time * 60:
            raise ValueError(
                f"--time {chosen.time} min is shorter than the measured cost of {row.policy} seed "
                f"{row.seed} ({row.run}): about {cost / 60:.0f} min; give at least "
                f"{int(cost // 60) + 1}"
            )


def run_one(profile: str, key: str) -> str:
    """One array task: the plan's task whose run key is ``key`` at ``profile``, computed by
    ``jobs.run_task`` (its record written atomically) on ``$SLURM_CPUS_PER_TASK`` torch threads
    (one where unset). Returns its name; a key that is not a task of the plan is a ValueError."""
    import torch

    settings = get_profile(profile)
    found = [task for task in jobs.tasks(settings) if task.key(settings) == key]
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


def submit(profile: Profile, chosen: SlurmOptions, keys: list[str], runs_dir: Path) -> dict:
    """Submit ``keys`` as one job array (``Requeued`` each) and keep it in the state file;
    returns that state: ``array`` (the job id), ``keys``, ``folder`` (the logs), ``submitted``."""
    import submitit

    executor = submitit.SlurmExecutor(folder=runs_dir / LOGS / "%A", max_num_timeout=3)
    environment = {
        name: os.environ[name] for name in ("PSNLIB_DATA", ledger.RESULTS_ENV) if name in os.environ
    }
    executor.update_parameters(
        job_name=f"psnlib-{profile.name}",
        time=chosen.time,
        cpus_per_task=chosen.cpus_per_task,
        mem=f"{int(chosen.mem_gb * 1024)}MB",
        array_parallelism=chosen.array_parallelism,
        signal_delay_s=120,
        setup=[f"export {name}={value!r}" for name, value in environment.items()],
        **({"partition": chosen.partition} if chosen.partition else {}),
        **({"gpus_per_task": chosen.gpus_per_task} if chosen.gpus_per_task else {}),
    )
    submitted = executor.map_array(Requeued(), [profile.name] * len(keys), keys)
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
    plan = [task for task in jobs.tasks(profile) if task.key(profile) in keys]
    usable = {row.run: row.state for row in jobs.status(profile, plan).itertuples()}
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
    """``--status``' lines on the array last submitted at ``profile``; None where none was."""
    state = read_json(state_path(runs_dir), "slurm state")
    if not isinstance(state, dict):
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
    """The state of the array last submitted here if any of its tasks is still queued."""
    state = read_json(state_path(runs_dir), "slurm state")
    if isinstance(state, dict) and _queue(state["array"]):
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
    (``jobs.status``); without, return None once submitted. An array of this profile still in
    the queue is reported (and waited for), not submitted again. Bad input: a ValueError."""
    check_cluster(chosen)
    plan = everything = jobs.tasks(profile)
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
        return jobs.status(profile, plan)
    whole = jobs.status(profile, everything)  # costs are measured on the whole plan's records
    whole["estimate"] = jobs.estimate(whole)
    wanted = {task.key(profile) for task in plan}
    left = whole[(whole["state"] != "done") & whole["run"].isin(wanted)]
    check_time(chosen, left)
    build()
    if left.empty:
        print("[psnlib] slurm: every task has a usable record; nothing to submit", flush=True)
        return jobs.status(profile, plan)
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
    return jobs.status(profile, plan)
