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
prepare what they will load, one torch thread each: the tiny policies (SFT), the weak-prefix
training sets, then every planned RL run with its evaluations
(``psnlib.replication.experiments.planned_work``), then the premise's evaluations of each GRPO
checkpoint (``psnlib.replication.premise``: noise against temperature at equal pass@1, one task
per seed). Tiny models gain little from a second thread, so on 2 cores two runs at once finish
about twice as fast as one after the other. Wall times of each
stage and notebook are printed and appended to this reproduction's log,
``runs/<profile>/reproduce_timing.json`` (kept across interruptions, so its tasks add up to a run
from scratch), which is copied to ``figures/<profile>/`` after each entry.

A bad command line (an unknown profile, a notebooks directory that does not exist or holds no
notebook, ``--only`` words that match none, a negative ``--workers``, an ``--out`` or data
directory that cannot be written) ends the program with one line naming it, before any work.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from importlib.metadata import version
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import torch

from psnlib.io import (
    atomic_write_json,
    atomic_write_text,
    check_data_dir,
    check_writable,
    read_json,
)
from psnlib.replication.evaluation import eval_config, evaluate_benchmarks
from psnlib.replication.experiments import planned_runs, planned_work
from psnlib.replication.paths import ROOT
from psnlib.replication.paths import figures_dir as default_figures
from psnlib.replication.prefixes import prefix_source, prefix_train_set
from psnlib.replication.premise import premise, premise_at_seed
from psnlib.replication.pretrain import build_policy, policy_dir, policy_meta
from psnlib.replication.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.replication.runs import rl_settings
from psnlib.replication.store import ResultStore
from psnlib.replication.variants import BASE, EVAL_SEED, Variant, load_variant

PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "numpy")
VERSIONS_FILE = "versions.json"  # beside each profile's figures: what made them
TIMING_FILE = "reproduce_timing.json"  # this reproduction's log, in runs/ and figures/
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


def _train_and_evaluate(
    profile: Profile, variant: Variant, seed: int, benchmarks: tuple[str, ...]
) -> str:
    model, tokenizer, _ = load_variant(profile, variant, seed)
    run_key = variant.run_key(profile, seed)
    evaluate_benchmarks(
        model,
        tokenizer,
        variant.profile(profile),
        benchmarks,
        run_key=run_key,
        seed=EVAL_SEED,
        progress=False,
    )
    return f"{variant.label} seed {seed} ({len(benchmarks)} benchmarks)"


def _premise(profile: Profile, seed: int) -> str:
    premise_at_seed(profile, seed)
    return f"premise seed {seed}"


def _one_thread(task: Callable[..., str], *args: Any) -> tuple[str, float, float]:
    """Run one task on one torch thread: its name, wall seconds and CPU seconds."""
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    name = task(*args)
    return name, time.perf_counter() - start, time.process_time() - cpu


def _run_all(
    stage: str, tasks: list[tuple], workers: int, record: Callable[[dict], None] | None = None
) -> None:
    """Run ``(function, *args)`` tasks, ``workers`` processes at a time; report each, and
    ``record`` its wall and CPU seconds (``_record``). One thread per task, so the CPU seconds are
    its wall time on a quiet machine, unlike wall time not stretched by other jobs or pauses."""
    print(f"[psnlib] {stage}: {len(tasks)} task(s), {workers} worker(s)", flush=True)
    if workers == 1:
        done: Iterable = (_one_thread(*task) for task in tasks)
    else:
        pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"))
        done = (f.result() for f in as_completed([pool.submit(_one_thread, *t) for t in tasks]))
    try:
        for i, (name, seconds, cpu) in enumerate(done, 1):
            print(f"[psnlib]   {i}/{len(tasks)} {name}: {seconds:.0f} s", flush=True)
            if record is not None:
                entry = {"stage": stage, "task": name, "workers": workers}
                record({**entry, "seconds": round(seconds), "cpu_seconds": round(cpu)})
    finally:
        if workers > 1:
            pool.shutdown(cancel_futures=True)


def prepare(profile: Profile, workers: int, record: Callable[[dict], None] | None = None) -> None:
    """Build, train and evaluate everything the notebooks load, ``workers`` at a time, stage by
    stage (policies, weak prefixes, runs, premise); each task's time is passed to ``record``."""
    work = planned_work(profile)
    specs = {profile.base, profile.weak, *(v.profile(profile).base for v, _, _ in work)}
    prefixes = set()
    for v, seed, _ in work:
        settings = {} if v.arm == BASE else rl_settings(profile, v.arm, seed, **v.settings)
        if settings.get("prefix_prob", 0.0) > 0:
            prefixes.add((seed, settings["prefix_truncation"], settings["prefix_source"]))
            specs.add(prefix_source(profile, settings["prefix_source"]))
    _run_all("policies", [(_build, spec) for spec in specs], workers, record)
    prefix_tasks = [(_prefixes, profile, *key) for key in sorted(prefixes)]
    _run_all("weak prefixes", prefix_tasks, workers, record)
    work = sorted(work, key=lambda item: -len(item[2]))  # most benchmarks first: a short tail
    _run_all("runs", [(_train_and_evaluate, profile, *item) for item in work], workers, record)
    seeds = premise(profile).seeds  # their GRPO runs are trained above (rl_narrows_coverage)
    _run_all("premise", [(_premise, profile, seed) for seed in seeds], workers, record)


def measured_compute(profile: Profile) -> pd.DataFrame:
    """What each planned run cost, from its own records; nothing is trained or evaluated.

    One row per run of ``planned_work``: ``train_seconds``, the sum of its steps' ``step_time``
    (generation included; 0 for a base policy) and ``eval_seconds``, its benchmarks'
    evaluation time; NaN where the run or one of its evaluations is not finished. Both are wall
    times of the process that did the work, so they include whatever shared the machine then.
    """
    rows = []
    for v, seed, benchmarks in planned_work(profile):
        p, key = v.profile(profile), v.run_key(profile, seed)
        row = {"run": key, "policy": v.label, "seed": seed}
        if v.arm == BASE:
            done, train = policy_dir(p.base).exists(), 0.0
        else:
            path = v.run_path(profile, seed)
            done = path.exists()
            log = policy_meta(path)["log"] if done else []
            train = sum(float(e.get("step_time", 0.0)) for e in log)
        parts = []
        if done:
            model, _, _ = load_variant(profile, v, seed)  # cached: loaded, not trained
            store = ResultStore.for_run(p.name, key, eval_config(model, p, key, EVAL_SEED))
            parts = [store.load(b) for b in benchmarks]
        finished = bool(parts) and all(t is not None for t in parts)
        evaluate = sum(float(t["curves"]["seconds"].iloc[0]) for t in parts) if finished else None
        rows.append(row | {"train_seconds": train if done else None, "eval_seconds": evaluate})
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
    settings = get_profile(args.profile)
    paths = notebook_paths(args.notebooks, args.only)
    check_writable(args.out, "--out")
    check_data_dir()
    return settings, paths


def main(argv: list[str] | None = None) -> int:
    """Prepare, then run the notebooks (the module's docstring). A bad command line ends the
    program with one line, ``psnlib.replication.reproduce: error: ...``, before any work."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help=f"one of {sorted(PROFILES)}")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    parser.add_argument("--force", action="store_true", help="re-run notebooks already done")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT, help="where figures/ and runs/ go")
    parser.add_argument(
        "--workers",
        type=int,
        default=1 if torch.cuda.is_available() else min(os.cpu_count() or 1, 4),
        help="processes that train and evaluate the planned runs before the notebooks; 0 skips",
    )
    args = parser.parse_args(argv)
    try:
        settings, paths = check_arguments(args)
    except ValueError as err:
        sys.exit(f"psnlib.replication.reproduce: error: {err}")
    profile, fingerprint = settings.name, profile_fingerprint(settings)
    figures_dir = default_figures(profile, args.out).resolve()
    runs_dir = (args.out / "runs" / profile).resolve()
    plan = planned_runs(settings)
    print(
        f"[psnlib] {len(paths)} notebook(s) at profile {profile!r} -> {figures_dir}; they share "
        f"{(plan.arm != 'base').sum()} RL runs and {plan.benchmarks.sum()} evaluations"
    )
    record = partial(_record, runs_dir / TIMING_FILE, copy_to=figures_dir / TIMING_FILE)
    figures_dir.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    record_versions(figures_dir)
    if args.workers and not args.only:
        start = time.perf_counter()
        prepare(settings, args.workers, record)
        seconds = round(time.perf_counter() - start)
        record({"stage": "prepare", "workers": args.workers, "seconds": seconds})
    for path in paths:
        done = runs_dir / f"{path.stem}.done"
        if not args.force and read_json(done, "notebook record") == {"profile": fingerprint}:
            print(f"[psnlib] {path.name}: done already ({done}); --force to re-run")
            continue
        start = time.perf_counter()
        print(f"[psnlib] {path.name}: running (log below) ...", flush=True)
        run_notebook(path, profile, figures_dir, runs_dir)
        seconds = round(time.perf_counter() - start)
        record({"stage": path.stem, "seconds": seconds})
        atomic_write_json(done, {"profile": fingerprint})
        print(f"[psnlib] {path.name}: finished in {seconds} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
