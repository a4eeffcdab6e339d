"""``python -m psnlib.replication.reproduce``: run every notebook with papermill at one profile.

Each notebook ``notebooks/NN_name.ipynb`` is executed with parameters ``profile``, ``figures_dir``
and ``metrics_path``; papermill writes the executed copy to ``runs/<profile>/`` as it runs, and a
notebook that finishes is published with its outputs and figures to
``figures/<profile>/notebooks/`` (the report to browse; the committed notebooks in ``notebooks/``
stay without outputs). Figures and tables go to ``figures/<profile>/``, and the metrics JSON its
last cell writes to ``figures/<profile>/NN_name.json``. A notebook that finished in this
checkout's reproduction at the same profile settings (``runs/<profile>/NN_name.done`` holds
their fingerprint) is skipped unless ``--force``, so an interrupted reproduction resumes where
it stopped, while the figures committed with a fresh checkout are made again, never taken as
done; inside a notebook, finished RL runs and evaluations are loaded from their caches, so a
re-run notebook only computes what is missing.

Before the notebooks, ``--workers`` processes (default: the CPU cores, up to 4; 1 with a GPU)
compute, one torch thread each, every task of the plan that has no usable record in the run ledger
(``psnlib.replication.jobs``, ``psnlib.replication.ledger``: ``results/<profile>/<run key>.json``,
committed): first the starting policies and weak-prefix sets that are neither committed nor
cached, then the tasks, primary comparisons first, each writing its record. Tiny models gain
little from a second thread, so on 2 cores two tasks at once finish about twice as fast as one
after the other. The notebooks read the records, so on a clone whose records are complete nothing
is trained or evaluated; where records are missing, the notebooks wait until they are made (run it
again: it resumes, the caches keep a killed task's finished parts). ``--budget SECONDS`` or
``--until HH:MM`` start no task whose cost, estimated from the records' measured CPU seconds
(``jobs.estimate``), would end after it, so a time-limited job stops with its records written;
``--status`` shows the plan's records (done / missing / stale per arm and seed, CPU time done and
left) and trains nothing. ``--rebuild`` re-runs the SFT of the committed starting policies and
compares fingerprints; ``--commit-start`` copies built ones into ``results/start/``. Wall times
of each stage and notebook are appended to ``runs/<profile>/reproduce_timing.json``, copied to
``figures/<profile>/`` as each notebook finishes. A task that fails is reported and the others go
on; workers die with the process that started them.

A bad command line (an unknown profile, a notebooks directory that does not exist or holds no
notebook, ``--only`` with no word or words that match none, a negative ``--workers``, a budget
that is not a positive number of seconds, an ``--until`` that is not HH:MM, an ``--out`` or data
directory that cannot be written) ends the program with one line naming it, before any work.
``PSNLIB_DATA`` and the ledger's folder are resolved to absolute paths here, once.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import datetime
import hashlib
import html
import math
import os
import platform
import signal
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from functools import partial
from importlib.metadata import version
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import torch

from psnlib.io import (
    WriteFailed,
    atomic_write_json,
    atomic_write_text,
    check_data_dir,
    check_writable,
    data_dir,
    read_json,
)
from psnlib.replication import jobs, ledger, starting_points
from psnlib.replication.arms import BASE
from psnlib.replication.experiments import planned_runs
from psnlib.replication.paths import ROOT
from psnlib.replication.paths import figures_dir as default_figures
from psnlib.replication.prefixes import prefix_train_set
from psnlib.replication.pretrain import build_policy, policy_dir
from psnlib.replication.profiles import PROFILES, PolicySpec, Profile, get_profile

PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "numpy")
VERSIONS_FILE = "versions.json"  # beside each profile's figures: what made them
TIMING_FILE = "reproduce_timing.json"  # this reproduction's log, in runs/ and figures/
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
# The kernel's own log at ERROR: ipykernel 7 warns at every start that its localhost TCP sockets
# are unencrypted (17 identical lines per reproduction); cell output, the notebooks' warnings
# included, is not the kernel's log and still shows.
# And tables whole: pandas' display cuts a long table to "..." rows and columns, the papers'
# numbers among them; a published report shows every cell.
WHOLE_TABLES = (
    "import pandas; pandas.set_option('display.max_rows', None, 'display.max_columns', None, "
    "'display.max_colwidth', None, 'display.width', 250)"
)
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", f"--IPKernelApp.exec_lines={WHOLE_TABLES}"]


def notebook_outputs(profile: str, figures_dir: str | Path | None = None) -> Path:
    """Where a notebook writes figures and tables: ``figures_dir``, by default the checkout's
    ``figures/<profile>/`` (so that changing ``profile`` is all it takes); created if missing."""
    path = Path(figures_dir) if figures_dir else default_figures(profile)
    path.mkdir(parents=True, exist_ok=True)
    return path


def notebook_paths(notebooks_dir: Path, only: list[str] | None = None) -> list[Path]:
    """Notebooks in run order (by name); ``only`` keeps those whose stem contains any given word.
    A directory that does not exist or holds no notebook, or a word of ``only`` that matches
    none, is a ValueError naming it."""
    if not notebooks_dir.is_dir():
        raise ValueError(
            f"--notebooks {str(notebooks_dir)!r} is not a directory; pass the directory of the "
            f"notebooks (default: {ROOT / 'notebooks'})"
        )
    paths = sorted(notebooks_dir.glob("[0-9][0-9]*_*.ipynb"))  # 01_, 01b_, 02_, ...
    if not paths:
        raise ValueError(f"--notebooks {str(notebooks_dir)!r} holds no notebook (NN_name.ipynb)")
    if only:
        unmatched = [word for word in only if not any(word in p.stem for p in paths)]
        if unmatched:
            raise ValueError(
                f"--only {unmatched} matches no notebook in {notebooks_dir}; notebooks: "
                f"{', '.join(p.stem for p in paths)}"
            )
        paths = [p for p in paths if any(word in p.stem for word in only)]
    return paths


def run_notebook(path: Path, profile: str, figures_dir: Path, runs_dir: Path) -> Path:
    """Execute one notebook with papermill into ``runs_dir``; once it has written its metrics,
    publish the executed copy to ``figures_dir/notebooks/``. Returns the metrics JSON path."""
    import papermill as pm

    figures_dir.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = figures_dir / f"{path.stem}.json"
    pm.execute_notebook(
        str(path),
        str(runs_dir / path.name),
        parameters={
            "profile": profile,
            "figures_dir": str(figures_dir),
            "metrics_path": str(metrics_path),
        },
        cwd=str(path.parent),
        progress_bar=False,
        log_output=True,
        extra_arguments=KERNEL_ARGUMENTS,
    )
    if not metrics_path.exists():
        raise RuntimeError(f"{path.name} finished without writing its metrics to {metrics_path}")
    out = [figures_dir.parents[1]] if figures_dir.parent.name == "figures" else []  # --out
    executed = static_report(nbformat.read(runs_dir / path.name, as_version=4), ROOT, *out)
    atomic_write_text(figures_dir / "notebooks" / path.name, nbformat.writes(executed))
    return metrics_path


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def static_report(nb: nbformat.NotebookNode, *roots: Path) -> nbformat.NotebookNode:
    """An executed notebook as a static report: each progress-bar widget replaced by its final
    state as text (``final_bar``; the widget's own text fallback is its first state, "0%"),
    without the widget state (two thirds of the bytes of the executed notebooks at smoke), and
    each absolute path in ``roots`` (the checkout, then a ``--out`` directory) written as ``..``,
    as a default run's checkout reads from ``notebooks/``, where the notebooks run: the report
    names no machine's directories (``figures_dir = "../figures/cpu"`` either way)."""
    state = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).pop(WIDGET_VIEW, None)
            final = final_bar(state, view["model_id"]) if view else None
            if final is not None:
                output["data"]["text/plain"] = final
    if not roots:
        return nb
    text = nbformat.writes(nb)  # paths hold no character that JSON escapes
    for root in roots:
        text = text.replace(f"{root}/", "../")
    return nbformat.reads(text, as_version=4)


def final_bar(state: dict[str, Any], model_id: str, width: int = 10) -> str | None:
    """The text of a tqdm notebook bar (an HBox of HTML, FloatProgress, HTML) in the final state
    the kernel saved, as tqdm prints it: ``"policies: 100%|##########| 3/3 [00:00<00:00]"``
    with block characters; None if the widget is not such a bar or its state was not saved."""
    children = state.get(model_id, {}).get("state", {}).get("children", [])
    models = [state.get(c.removeprefix("IPY_MODEL_"), {}) for c in children]
    if [m.get("model_name") for m in models] != ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    left, bar, right = (m["state"] for m in models)
    done = (bar.get("value") or 0) / bar["max"] if bar.get("max") else 0.0
    filled = round(width * min(max(done, 0.0), 1.0))
    text = (
        f"{left.get('value', '')}|{'█' * filled}{' ' * (width - filled)}|{right.get('value', '')}"
    )
    return html.unescape(text).replace("\u2007", " ")


def _build(spec: PolicySpec) -> str:
    build_policy(spec)
    return f"policy {spec.family}-{spec.size}-{spec.sft_style}"


def _prefixes(profile: Profile, seed: int, truncation: str, source: str) -> str:
    prefix_train_set(profile, seed, truncation=truncation, source=source, progress=False)
    return f"prefixes seed {seed}, {truncation} cut, {source} source"


def _task(profile: Profile, task: jobs.Task) -> str:
    jobs.run_task(profile, task)
    return task.name()


def _die_with_parent() -> None:
    """In a worker: ask the kernel to kill it when its parent dies (Linux' PR_SET_PDEATHSIG), so
    a ``kill -9`` of ``make reproduce`` leaves no worker behind; elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the request: go now
        os._exit(1)


def _one_thread(task: Callable[..., str], *args: Any) -> tuple[str, float, float]:
    """Run one task on one torch thread: its name, wall seconds and CPU seconds."""
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    name = task(*args)
    return name, time.perf_counter() - start, time.process_time() - cpu


def _pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes that die with this one (``_die_with_parent``)."""
    return ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_die_with_parent
    )


def _run_all(
    stage: str,
    tasks: list[tuple],
    workers: int,
    record: Callable[[dict], None] | None = None,
    fits: Callable[[int], bool] | None = None,
    keep_going: bool = False,
) -> list[str]:
    """Run ``(function, *args)`` tasks, ``workers`` processes at a time, in order; report each,
    and ``record`` its wall and CPU seconds (``_record``). One thread per task, so the CPU seconds
    are its wall time on a quiet machine, unlike wall time not stretched by other jobs or pauses.
    ``fits(i)`` says whether task ``i`` may start now (``--budget``); one that may not is left
    out. A task that fails raises its error, or with ``keep_going`` is reported and the others go
    on. Returns the names of the tasks that failed."""
    print(f"[psnlib] {stage}: {len(tasks)} task(s), {workers} worker(s)", flush=True)
    failed: list[str] = []
    pool = _pool(workers) if workers > 1 else None
    waiting: list[int] = list(range(len(tasks)))
    running: dict[Any, int] = {}
    done = 0
    try:
        while waiting or running:
            while waiting and len(running) < max(workers, 1):
                i = waiting.pop(0)
                if fits is not None and not fits(i):
                    continue
                if pool is None:
                    running[_Now(tasks[i])] = i
                else:
                    running[pool.submit(_one_thread, *tasks[i])] = i
            if not running:
                break
            finished = wait(running, return_when=FIRST_COMPLETED).done if pool else list(running)
            for future in finished:
                i, done = running.pop(future), done + 1
                try:
                    name, seconds, cpu = future.result()
                except Exception as err:
                    if not keep_going:
                        raise
                    failed.append(str(tasks[i][1:]))
                    print(f"[psnlib]   {done}/{len(tasks)} FAILED {tasks[i][1:]}: {err!r}")
                    continue
                print(f"[psnlib]   {done}/{len(tasks)} {name}: {seconds:.0f} s", flush=True)
                if record is not None:
                    entry = {"stage": stage, "task": name, "workers": workers}
                    record({**entry, "seconds": round(seconds), "cpu_seconds": round(cpu)})
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return failed


class _Now:
    """A task run here, now, with ``Future``'s ``result``: the one-worker path of ``_run_all``."""

    def __init__(self, task: tuple) -> None:
        try:
            self._value, self._error = _one_thread(*task), None
        except Exception as err:
            self._value, self._error = None, err

    def result(self) -> tuple[str, float, float]:
        if self._error is not None:
            raise self._error
        return self._value


def prepare(
    profile: Profile,
    workers: int,
    record: Callable[[dict], None] | None = None,
    deadline: float | None = None,
) -> pd.DataFrame:
    """Compute every task of the plan whose record is not done (``psnlib.replication.jobs``),
    ``workers`` at a time, primary comparisons first: first the starting policies and prefix sets
    that are neither committed nor cached, then the tasks. With ``deadline`` (a
    ``time.monotonic()`` value) a task starts only if its estimated CPU seconds
    (``jobs.estimate``; one thread each, so about its wall time) end before it. Returns the
    plan's status after (``jobs.status``)."""
    todo = [s for s in starting_points.policies(profile) if not policy_dir(s).exists()]
    _run_all("policies", [(_build, spec) for spec in todo], workers, record)
    prefix_tasks = [(_prefixes, profile, *key) for key in starting_points.prefix_sets(profile)]
    _run_all("weak prefixes", prefix_tasks, workers, record)
    plan = jobs.tasks(profile)
    table = jobs.status(profile, plan)
    costs = jobs.estimate(table)
    left = [i for i in range(len(plan)) if table["state"].iloc[i] != "done"]

    def fits(i: int) -> bool:
        cost = costs.iloc[left[i]]
        if deadline is None or cost != cost:  # no deadline, or nothing measured to go by
            return deadline is None or time.monotonic() < deadline
        if time.monotonic() + cost <= deadline:
            return True
        print(f"[psnlib]   not started: {plan[left[i]].name()} (about {cost:.0f} s)", flush=True)
        return False

    tasks = [(_task, profile, plan[i]) for i in left]
    failed = _run_all("runs", tasks, workers, record, fits, keep_going=True)
    if failed:
        print(f"[psnlib] {len(failed)} task(s) failed; their records are not written", flush=True)
    return jobs.status(profile, plan)


def measured_compute(profile: Profile) -> pd.DataFrame:
    """What each planned run cost, from its ledger record; nothing is trained or evaluated.

    One row per task of the plan (``psnlib.replication.jobs.tasks``): run, policy, seed,
    ``train_seconds`` (CPU seconds of its training, the trainer's ``step_cpu_time``; 0 for a base
    policy) and ``eval_seconds`` (CPU seconds of its evaluations, premise and probes); NaN where its
    record is not done. One thread each, so about its wall time on a quiet machine.
    """
    rows = []
    for task in jobs.tasks(profile):
        expected = task.expected(profile)
        record = ledger.usable(expected)
        cpu = record["cpu_seconds"] if record is not None else {}
        row = {"run": expected.key, "policy": task.variant.label, "seed": task.seed}
        train = cpu.get("train") if task.kind == "run" else 0.0 if record else None
        evaluate = sum(cpu.values()) - cpu["train"] if record else None
        rows.append(row | {"train_seconds": train, "eval_seconds": evaluate})
    return pd.DataFrame(rows).astype({"train_seconds": float, "eval_seconds": float})


def package_versions() -> dict[str, str]:
    """Python's version and those of the packages whose arithmetic the figures depend on."""
    return {"python": platform.python_version(), **{name: version(name) for name in PACKAGES}}


def record_versions(figures_dir: Path) -> None:
    """Write ``versions.json`` beside a profile's figures; warn if the figures already there
    were made with other versions (a notebook run now may then differ in its last digits)."""
    path = figures_dir / VERSIONS_FILE
    now, before = package_versions(), read_json(path, "versions record")
    if isinstance(before, dict) and before != now:
        changed = {k: f"{before.get(k)} -> {v}" for k, v in now.items() if before.get(k) != v}
        warnings.warn(
            f"{path}: figures there were made with other versions {changed}", stacklevel=2
        )
    atomic_write_json(path, now)


def profile_fingerprint(profile: Profile) -> str:
    """A short hash of every setting of ``profile``: a notebook finished at other settings is
    not done at these."""
    return hashlib.sha256(repr(profile).encode()).hexdigest()[:12]


def _record(path: Path, entry: dict, copy_to: Path | None = None) -> None:
    """Append one timing entry to the JSON list at ``path`` (atomically), and write the whole
    list to ``copy_to`` too."""
    entries = read_json(path, "timing log")  # a damaged log is started afresh
    if not isinstance(entries, list):
        if entries is not None:
            warnings.warn(f"ignoring the timing log {path}: not a JSON list", stacklevel=2)
        entries = []
    for out in (path, copy_to) if copy_to is not None else (path,):
        atomic_write_json(out, [*entries, entry])


def check_arguments(args: argparse.Namespace) -> tuple[Profile, list[Path]]:
    """The profile and the notebooks of a command line, once each value is checked: a
    ValueError names the first bad one, before any work."""
    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {args.workers}")
    if args.only is not None and not args.only:
        raise ValueError("--only needs at least one word (a part of a notebook's name)")
    if args.budget is not None and not (args.budget > 0 and math.isfinite(args.budget)):
        raise ValueError(f"--budget must be a number of seconds > 0, got {args.budget}")
    settings = get_profile(args.profile)
    paths = notebook_paths(args.notebooks, args.only)
    check_writable(args.out, "--out")
    check_data_dir()
    return settings, paths


def until(clock: str, now: datetime.datetime | None = None) -> float:
    """Seconds from ``now`` (default: this moment, local time) to the next ``HH:MM``; a
    ValueError names a ``clock`` that is not one."""
    try:
        hour, minute = (int(x) for x in clock.split(":"))
        now = now or datetime.datetime.now()
        end = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError as err:
        raise ValueError(
            f"--until must be a time of day HH:MM (e.g. 17:45), got {clock!r}"
        ) from err
    if end <= now:
        end += datetime.timedelta(days=1)
    return (end - now).total_seconds()


def status_report(profile: Profile, workers: int) -> str:
    """``--status``: per arm and seed of the plan, done / missing / stale, the CPU time done and
    the time left at the records' measured costs, with ``workers`` processes."""
    table = jobs.status(profile)
    table["estimate"] = jobs.estimate(table)
    grid = table.pivot_table(
        index="policy", columns="seed", values="state", aggfunc="first", sort=False
    ).fillna("")
    letters = grid.map(lambda state: {"done": "+", "missing": "."}.get(state, state[:1] or " "))
    lines = [
        f"[psnlib] the plan at profile {profile.name!r}: {len(table)} tasks, records in "
        f"{ledger.profile_dir(profile.name)}"
    ]
    lines.append("  + done, . missing, s stale, d damaged, u unusable here; seeds across")
    width = max(len(p) for p in grid.index)
    lines.append(f"  {'':{width}}  " + " ".join(f"{s:>2}" for s in grid.columns))
    for policy, row in letters.iterrows():
        lines.append(f"  {policy:{width}}  " + " ".join(f"{x:>2}" for x in row))
    counts = table["state"].value_counts().to_dict()
    done = table["cpu_seconds"][table["state"] == "done"].sum()
    left = table["estimate"][table["state"] != "done"]
    lines.append(f"  states: {counts}; CPU done {done / 3600:.2f} h")
    if len(left):
        unknown = int(left.isna().sum())
        hours = left.sum() / 3600
        text = f"  left: {len(left)} tasks, about {hours:.1f} CPU h"
        text += f" = {hours / max(workers, 1):.1f} h with {workers} worker(s)"
        if unknown:
            text += f" ({unknown} with no measured cost yet, not counted)"
        lines.append(text)
    for row in table[~table["state"].isin(["done", "missing"])].itertuples():
        lines.append(f"  {row.state}: {row.policy} seed {row.seed} ({row.run}): {row.why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Prepare, then run the notebooks (the module's docstring). A bad command line ends the
    program with one line, ``psnlib.replication.reproduce: error: ...``, before any work."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help=f"one of {sorted(PROFILES)}")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    parser.add_argument("--force", action="store_true", help="re-run notebooks already done")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument(
        "--out", type=Path, default=ROOT, help="where figures/, runs/ and results/ go"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1 if torch.cuda.is_available() else min(os.cpu_count() or 1, 4),
        help="processes that train and evaluate the planned runs before the notebooks; 0 skips",
    )
    parser.add_argument("--status", action="store_true", help="show the plan's records and stop")
    parser.add_argument(
        "--budget", type=float, help="seconds: start no task that would not end within them"
    )
    parser.add_argument("--until", help="HH:MM: start no task that would not end by then")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="re-run the SFT of the committed starting policies and compare fingerprints",
    )
    parser.add_argument(
        "--commit-start",
        action="store_true",
        help="copy the profile's built starting policies and prefix sets into results/start/",
    )
    args = parser.parse_args(argv)
    try:
        settings, paths = check_arguments(args)
        seconds_left = until(args.until) if args.until else args.budget
    except ValueError as err:
        sys.exit(f"psnlib.replication.reproduce: error: {err}")
    deadline = time.monotonic() + seconds_left if seconds_left else None
    # Resolved once, here: the notebooks run from notebooks/, where a relative path means another
    # folder, and their kernels and the workers inherit these (restored when main returns).
    paths_of = {"PSNLIB_DATA": data_dir(), ledger.RESULTS_ENV: args.out / "results"}
    before = {name: os.environ.get(name) for name in paths_of}
    os.environ.update({name: str(Path(path).resolve()) for name, path in paths_of.items()})
    try:
        return _main(args, settings, paths, deadline)
    except WriteFailed as err:  # a full disk, a read-only folder: one line, not a traceback
        sys.exit(f"psnlib.replication.reproduce: error: {err}")
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _main(
    args: argparse.Namespace, settings: Profile, paths: list[Path], deadline: float | None
) -> int:
    """``main`` once the command line is checked and the paths resolved."""
    profile, fingerprint = settings.name, profile_fingerprint(settings)
    if args.status:
        print(status_report(settings, args.workers))
        return 0
    if args.rebuild:
        print(starting_points.rebuild(settings).to_string(index=False))
        return 0
    if args.commit_start:
        print(f"[psnlib] starting points in {starting_points.commit(settings)}")
        return 0
    figures_dir = default_figures(profile, args.out).resolve()
    runs_dir = (args.out / "runs" / profile).resolve()
    plan = planned_runs(settings)
    print(
        f"[psnlib] {len(paths)} notebook(s) at profile {profile!r} -> {figures_dir}; they share "
        f"{(plan.arm != BASE.name).sum()} RL runs and {plan.benchmarks.sum()} evaluations"
    )
    log = runs_dir / TIMING_FILE
    record = partial(_record, log)
    figures_dir.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    if args.workers and not args.only:
        start = time.perf_counter()
        table = prepare(settings, args.workers, record, deadline)
        record(
            {
                "stage": "prepare",
                "workers": args.workers,
                "seconds": round(time.perf_counter() - start),
            }
        )
        left = table[table["state"] != "done"]
        if len(left):
            print(
                f"[psnlib] {len(left)} of {len(table)} tasks have no record yet: the notebooks "
                "run once every record is made (run it again to go on; --status shows them)",
                flush=True,
            )
            return 0 if deadline is not None else 1
    record_versions(figures_dir)
    for path in paths:
        done = runs_dir / f"{path.stem}.done"
        if not args.force and read_json(done, "notebook record") == {"profile": fingerprint}:
            print(f"[psnlib] {path.name}: done already ({done}); --force to re-run")
            continue
        start = time.perf_counter()
        print(f"[psnlib] {path.name}: running (log below) ...", flush=True)
        run_notebook(path, profile, figures_dir, runs_dir)
        seconds = round(time.perf_counter() - start)
        _record(log, {"stage": path.stem, "seconds": seconds}, figures_dir / TIMING_FILE)
        atomic_write_json(done, {"profile": fingerprint})
        print(f"[psnlib] {path.name}: finished in {seconds} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
