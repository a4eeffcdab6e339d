"""``python -m psnlib.replication.reproduce``: run every notebook with papermill at one profile.

Each notebook ``notebooks/NN_name.ipynb`` is executed with parameters ``profile``, ``figures_dir``
and ``metrics_path``; papermill writes the executed copy to ``runs/<profile>/`` as it runs, and a
notebook that finishes is published with its outputs and figures to
``figures/<profile>/notebooks/`` (the report to browse; the committed notebooks in ``notebooks/``
stay without outputs). Figures and tables go to ``figures/<profile>/``, and the metrics JSON its
last cell writes to ``figures/<profile>/NN_name.json``. A notebook that finished in this
checkout's reproduction at the same profile settings, from the same notebook source, psnlib code
and records (``runs/<profile>/NN_name.done`` holds their fingerprints) is skipped unless
``--force``, so an interrupted reproduction resumes where it stopped, while the figures committed
with a fresh checkout, or made before a ``git pull`` brought new records or code, are made again,
never taken as done; inside a notebook, finished RL runs and evaluations are loaded from their
caches, so a re-run notebook only computes what is missing.

Before the notebooks, ``--workers`` processes (default: the CPU cores, up to 4; 1 with a GPU)
compute, one torch thread each, every task of the plan that has no usable record in the run ledger
(``psnlib.replication.compute.jobs``, ``psnlib.replication.records.ledger``:
``<ledger>/<profile>/<run key>.json``; the checkout's are committed): first the starting policies
and weak-prefix sets that are neither committed nor cached, then the tasks, primary comparisons
first, each writing its record. Tiny models gain little from a second thread, so on 2 cores two
tasks at once finish about twice as fast as one after the other. The notebooks read the records, so
on a clone whose records are complete nothing is trained or evaluated; where records are missing,
the notebooks wait until they are made (run it again: it resumes, the caches keep a killed task's
finished parts). ``--budget SECONDS`` or ``--until HH:MM`` (both: the earlier of the two) start no
task whose cost, estimated from the records' measured CPU seconds (``status.estimate``), would end
after it, so a time-limited job stops with its records written; ``--status`` shows the plan's
records (done / missing / stale per arm and seed, CPU time done and left) and trains nothing.
``--rebuild`` re-runs the SFT of the committed starting policies and compares fingerprints;
``--commit-start`` copies built ones into ``results/start/``. Wall times of each stage and notebook
are appended to ``runs/<profile>/reproduce_timing.json``, copied to ``figures/<profile>/`` as each
notebook finishes. A task that fails is reported and the others go on; a failure is one line, the
task's run key and the error first; workers die with the process that started them.

The run ledger, for this command and every process it starts (workers, Slurm jobs, notebooks), is
``<--out>/results`` where ``--out`` is given, else ``$PSNLIB_RESULTS`` where that is set, else the
checkout's ``results/`` (``LEDGER``, as ``--help`` says it). Before the first task
(``psnlib.replication.compute.sitting``) it checks that the ledger can take every record (its folder
writable, no directory or link where a record goes), that no stored part or prefix set is a
directory, and, at every command, that the committed starting points (``results/start/``) are
whole: a damaged one is named with the ``git checkout`` that restores it, never trained again.

A bad command line (an unknown profile, a notebooks directory that does not exist or holds no
notebook, ``--only`` with no word or words that match none, a negative ``--workers``, a budget
that is not a positive number of seconds, an ``--until`` that is not HH:MM (an empty one too), an
``--out``, figures, runs or data directory that cannot be written, ``--only`` with
``--executor slurm``) ends the program with one line naming it, before any work.
``PSNLIB_DATA`` and the ledger's folder are resolved to absolute paths here, once.

``--executor slurm`` (``psnlib.replication.compute.slurm``, docs/scale_out.md) builds the starting
points here, then submits the tasks without a usable record as one Slurm job array instead of
running them in local workers, and waits for it (``--no-wait``: returns once submitted); it computes
tasks only, so it takes no ``--only`` (the notebooks run here, afterwards, without it); its flags
(``--partition``, ``--time``, ``--cpus-per-task``, ``--mem-gb``, ``--gpus-per-task``,
``--array-parallelism``, ``--slurm-config``, ``--runs``) are checked before anything is submitted.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import pandas as pd
import torch

from psnlib.cache import read_json
from psnlib.io import WriteFailed, atomic_write_json
from psnlib.paths import check_data_dir, check_writable, data_dir
from psnlib.replication.compute import sitting, slurm, slurm_settings, starting_points
from psnlib.replication.compute.pool import prepare, starting
from psnlib.replication.plan import schedule
from psnlib.replication.plan.arms import BASE
from psnlib.replication.plan.profiles import PROFILES, Profile, get_profile
from psnlib.replication.plan.schedule import planned_runs
from psnlib.replication.records import ledger, status
from psnlib.replication.records.codeversion import PACKAGE
from psnlib.replication.records.paths import ROOT, environment
from psnlib.replication.records.paths import figures_dir as default_figures
from psnlib.replication.report.notebook_runs import notebook_paths, run_notebook

VERSIONS_FILE = "versions.json"  # beside each profile's figures: what made them
TIMING_FILE = "reproduce_timing.json"  # this reproduction's log, in runs/ and figures/
LEDGER = (
    "The run ledger (the records): <--out>/results where --out is given, else $PSNLIB_RESULTS "
    "where that is set, else the checkout's results/."
)


def record_versions(figures_dir: Path) -> None:
    """Write ``versions.json`` beside a profile's figures; warn if the figures already there
    were made with other versions (a notebook run now may then differ in its last digits)."""
    path = figures_dir / VERSIONS_FILE
    now, before = ledger.package_versions(), read_json(path, "versions record")
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


def inputs_fingerprint(profile: str) -> hashlib._Hash:
    """A hash of what every notebook's outputs are made from besides its own source: psnlib's
    code and the run ledger's records at ``profile``, so that a notebook finished before either
    changed (a ``git pull`` of new records, a fixed plot) is not done. ``.copy()`` it per
    notebook and add the notebook's source."""
    records = ledger.profile_dir(profile)
    digest = hashlib.sha256()
    for root, pattern in ((PACKAGE, "*.py"), (records, "*.json")):
        for path in sorted(root.rglob(pattern)):
            digest.update(f"{path.relative_to(root)}\n".encode())
            digest.update(path.read_bytes())
    return digest


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
    if args.executor == "local" and (args.runs is not None or args.no_wait):
        raise ValueError("--runs and --no-wait need --executor slurm")
    if args.executor == "slurm" and args.only is not None:
        raise ValueError(
            "--only runs notebooks here and computes no task, while --executor slurm submits the "
            "tasks: pass one of them (once the array is done, --only runs the notebooks)"
        )
    if args.out is not None and not args.out.strip():
        raise ValueError("--out is empty (an unset variable?); pass a directory, or leave it out")
    if args.only is not None and not args.only:
        raise ValueError("--only needs at least one word (a part of a notebook's name)")
    if args.budget is not None and not (args.budget > 0 and math.isfinite(args.budget)):
        raise ValueError(f"--budget must be a number of seconds > 0, got {args.budget}")
    settings = get_profile(args.profile)
    paths = notebook_paths(args.notebooks, args.only)
    out = Path(args.out or ROOT)
    check_writable(out, "--out")
    check_writable(default_figures(settings.name, out), "the figures folder")
    check_writable(out / "runs" / settings.name, "the runs folder")
    check_data_dir()
    return settings, paths


def status_report(profile: Profile, workers: int) -> str:
    """``--status``: per arm and seed of the plan, done / missing / stale, the CPU time done and
    the time left at the records' measured costs, with ``workers`` processes."""
    table = status.status(profile)
    table["estimate"] = status.estimate(table)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=LEDGER)
    parser.add_argument("--profile", default="cpu", help=f"one of {sorted(PROFILES)}")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    parser.add_argument("--force", action="store_true", help="re-run notebooks already done")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument(
        "--out",
        help="where figures/, runs/ and results/ (the run ledger) go; default: the checkout, "
        "with the ledger in $PSNLIB_RESULTS where that is set",
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
    parser.add_argument(
        "--until",
        help="HH:MM: start no task that would not end by then; with --budget, the earlier limit",
    )
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
    slurm_settings.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings, paths = check_arguments(args)
        seconds_left = sitting.seconds_left(args.budget, args.until)
    except ValueError as err:
        sys.exit(f"psnlib.replication.reproduce: error: {err}")
    deadline = time.monotonic() + seconds_left if seconds_left is not None else None
    # The ledger (the module's docstring), and both paths resolved once, here: the notebooks run
    # from notebooks/, where a relative path means another folder, and their kernels, the workers
    # and the Slurm jobs inherit these (restored when main returns).
    results = Path(args.out) / "results" if args.out else ledger.results_root()
    args.out = Path(args.out or ROOT)
    folders = {"PSNLIB_DATA": data_dir(), ledger.RESULTS_ENV: results}
    try:
        with environment({name: Path(path).resolve() for name, path in folders.items()}):
            return _main(args, settings, paths, deadline)
    except WriteFailed as err:  # a full disk, a read-only folder: one line, not a traceback
        sys.exit(f"psnlib.replication.reproduce: error: {err}")


def _not_done(table: pd.DataFrame, then: str) -> bool:
    """Whether some task of ``table`` (``status.status``) has no usable record; if so, say how many
    and ``then``, what to do: the notebooks run only once every record is made."""
    left = int((table["state"] != "done").sum())
    if left:
        print(
            f"[psnlib] {left} of {len(table)} tasks have no record yet: the notebooks run once "
            f"every record is made ({then})",
            flush=True,
        )
    return bool(left)


def _main(
    args: argparse.Namespace, settings: Profile, paths: list[Path], deadline: float | None
) -> int:
    """``main`` once the command line is checked and the paths resolved."""
    profile, fingerprint = settings.name, profile_fingerprint(settings)
    computes = not (args.status or args.rebuild or args.commit_start or args.only) and (
        args.executor == "slurm" or args.workers > 0
    )
    try:  # what would make a sitting lose its work, or start from other weights: one line
        sitting.check_starting_points(starting_points.policies(settings))
        if computes:
            sitting.check_parts(settings)
            sitting.check_prefix_sets()
            sitting.check_ledger(settings, schedule.tasks(settings))
    except ValueError as err:
        sys.exit(f"psnlib.replication.reproduce: error: {err}")
    if args.status:
        print(status_report(settings, args.workers))
        slurm_lines = slurm.report(settings, (args.out / "runs" / profile).resolve())
        if slurm_lines is not None:  # a job array was submitted here: its jobs' states too
            print(slurm_lines)
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
    if args.executor == "slurm":
        try:
            chosen = slurm_settings.from_arguments(args, settings)
            table = slurm.prepare(
                settings,
                chosen,
                runs_dir,
                partial(starting, settings, args.workers, record),
                keys=args.runs,
                block=not args.no_wait,
            )
        except ValueError as err:  # bad input: one line, before anything is submitted
            sys.exit(f"psnlib.replication.reproduce: error: {err}")
        if table is None:  # --no-wait: submitted (or reported); the records come later
            return 0
        if _not_done(table, "run it again to re-submit the missing ones"):
            return 1
        if args.runs is not None:  # a part of the plan: its records, no notebooks
            return 0
    elif args.workers and not args.only:
        start = time.perf_counter()
        table = prepare(settings, args.workers, record, deadline)
        record(
            {
                "stage": "prepare",
                "workers": args.workers,
                "seconds": round(time.perf_counter() - start),
            }
        )
        if _not_done(table, "run it again to go on; --status shows them"):
            return 0 if deadline is not None else 1
    record_versions(figures_dir)
    inputs = inputs_fingerprint(profile)
    for path in paths:
        done = runs_dir / f"{path.stem}.done"
        made_from = inputs.copy()
        made_from.update(path.read_bytes())
        marker = {"profile": fingerprint, "inputs": made_from.hexdigest()[:12]}
        if not args.force and read_json(done, "notebook record") == marker:
            print(f"[psnlib] {path.name}: done already ({done}); --force to re-run")
            continue
        start = time.perf_counter()
        print(f"[psnlib] {path.name}: running (log below) ...", flush=True)
        run_notebook(path, profile, figures_dir, runs_dir)
        seconds = round(time.perf_counter() - start)
        _record(log, {"stage": path.stem, "seconds": seconds}, figures_dir / TIMING_FILE)
        atomic_write_json(done, marker)
        print(f"[psnlib] {path.name}: finished in {seconds} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
