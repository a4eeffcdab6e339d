"""``python -m psnlib.reproduce``: run every notebook with papermill at one profile.

Each notebook ``notebooks/NN_name.ipynb`` is executed with parameters ``profile``, ``figures_dir``
and ``metrics_path``; the executed copy goes to ``runs/<profile>/`` (the committed notebooks stay
without outputs), figures and tables to ``figures/<profile>/``, and the metrics JSON its last cell
writes to ``figures/<profile>/NN_name.json``. A notebook whose metrics JSON already exists is
skipped unless ``--force``, so an interrupted reproduction resumes where it stopped; inside a
notebook, finished RL runs and evaluations are loaded from their caches, so a re-run notebook
only computes what is missing.

Budget at the ``cpu`` profile (``psnlib.experiments.planned_runs("cpu")`` lists it): 24 RL runs
of 80 steps (GRPO, PSN fixed and PSN adaptive II at 3 seeds; 13 ablation runs at seed 0; GRPO
and PSN from the other tiny family), about 100 evaluations (one policy on one benchmark: 100
problems x 256 samples, ~25-40 s each on 2 cores), and the SFT of three tiny policies (~18 min).
Total ~= 18 min + 45 min + 24 x (minutes per RL run): within 3 hours while a run takes at most
~5 minutes; fewer seeds (``Profile.seeds``) or a shorter sweep cut it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from psnlib.experiments import planned_runs
from psnlib.profiles import PROFILES, get_profile

ROOT = Path(__file__).resolve().parent.parent


def notebook_outputs(profile: str, figures_dir: str | Path | None = None) -> Path:
    """Where a notebook writes figures and tables: ``figures_dir``, by default the checkout's
    ``figures/<profile>/`` (so that changing ``profile`` is all it takes); created if missing."""
    path = Path(figures_dir) if figures_dir else ROOT / "figures" / get_profile(profile).name
    path.mkdir(parents=True, exist_ok=True)
    return path


def notebook_paths(notebooks_dir: Path, only: list[str] | None = None) -> list[Path]:
    """Notebooks in run order (by name); ``only`` keeps those whose stem contains any given word."""
    paths = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
    if only:
        paths = [p for p in paths if any(word in p.stem for word in only)]
        if not paths:
            raise ValueError(f"--only {only} matches no notebook in {notebooks_dir}")
    return paths


def run_notebook(path: Path, profile: str, figures_dir: Path, runs_dir: Path) -> Path:
    """Execute one notebook with papermill; returns the metrics JSON path it wrote."""
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
    )
    if not metrics_path.exists():
        raise RuntimeError(f"{path.name} finished without writing its metrics to {metrics_path}")
    return metrics_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help=f"one of {sorted(PROFILES)}")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    parser.add_argument("--force", action="store_true", help="re-run notebooks already done")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT, help="where figures/ and runs/ go")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile).name  # fails fast on an unknown profile
    figures_dir = (args.out / "figures" / profile).resolve()
    runs_dir = (args.out / "runs" / profile).resolve()
    paths = notebook_paths(args.notebooks, args.only)
    plan = planned_runs(profile)
    print(
        f"[psnlib] {len(paths)} notebook(s) at profile {profile!r} -> {figures_dir}; they share "
        f"{(plan.arm != 'base').sum()} RL runs and {plan.benchmarks.sum()} evaluations"
    )
    for path in paths:
        done = figures_dir / f"{path.stem}.json"
        if done.exists() and not args.force:
            print(f"[psnlib] {path.name}: done already ({done.name}); --force to re-run")
            continue
        start = time.perf_counter()
        print(f"[psnlib] {path.name}: running (log below) ...", flush=True)
        run_notebook(path, profile, figures_dir, runs_dir)
        print(f"[psnlib] {path.name}: finished in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
