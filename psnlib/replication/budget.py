"""What an experiment still has to compute, and roughly how long that takes.

Before ``psnlib.replication.experiments.Plan.run`` trains anything, ``pending`` lists its (policy,
seed) runs that are not in the cache and the benchmark evaluations that are not stored, and
``estimate_seconds`` prices them with the measured cost of the committed reproduction:
``figures/<profile>/15_results_compute.csv``, which notebook 15 writes from each run's own
records (the sum of its training steps' times, its evaluations' times). A run of that table
costs what it cost then; another run costs the median of its arm's runs, an evaluation the mean
cost of one run on one benchmark. Those were wall times on one thread of a shared 2-core machine,
so the estimate is rough, and it is only made where such a table exists (``cpu``).
``sft_announcement`` does the same for policies still to build by SFT, with the build times of
notebook 01 (``figures/<profile>/01_testbed.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from psnlib.io import data_dir
from psnlib.replication import ledger, paths
from psnlib.replication.pretrain import policy_dir
from psnlib.replication.profiles import PolicySpec, Profile
from psnlib.replication.variants import BASE, Variant, expectation

COMPUTE_TABLE = "15_results_compute.csv"  # notebook 15's table of measured costs
TESTBED_METRICS = "01_testbed.json"  # notebook 01's metrics: the policies' SFT seconds
Work = list[tuple[Variant, int, tuple[str, ...]]]  # (variant, seed, benchmarks)


def figures_dir(profile: Profile) -> Path:
    """The checkout's ``figures/<profile>/``, where the committed measurements are."""
    return paths.figures_dir(profile.name)


def sft_announcement(profile: Profile, policies: dict[str, PolicySpec]) -> str | None:
    """A line naming the ``policies`` (``{"base": spec, ...}``) that are not built yet, with
    their SFT time as notebook 01 measured it (``figures/<profile>/01_testbed.json``) where it
    did; None when all are built."""
    todo = [name for name, spec in policies.items() if not policy_dir(spec).exists()]
    if not todo:
        return None
    path = figures_dir(profile) / TESTBED_METRICS
    measured = json.loads(path.read_text()).get("build_seconds", {}) if path.exists() else {}
    text = f"[psnlib] to build by SFT first: the {' and '.join(todo)} policy"
    if all(name in measured for name in todo):
        seconds = sum(measured[name] for name in todo)
        text += f", about {seconds / 60:.0f} min as measured in figures/{profile.name}/{path.name}"
    return text


def _stored_benchmarks(profile: Profile, run_key: str) -> set[str]:
    """Benchmarks with a stored evaluation of ``run_key`` at the profile's evaluation sizes
    (``psnlib.evaluate``'s stores, found by name without loading the policy's weights)."""
    stored: set[str] = set()
    for config in (data_dir() / "results" / profile.name).glob(f"{run_key}-*/config.json"):
        c = json.loads(config.read_text())
        if (c.get("problems"), c.get("samples")) == (profile.eval_problems, profile.eval_samples):
            stored |= {p.stem for p in config.parent.glob("*.json") if p.name != "config.json"}
    return stored


def pending(profile: Profile, work: Work) -> pd.DataFrame:
    """One row per (variant, seed) of ``work`` with something left to compute (neither a usable
    ledger record nor everything cached, ``psnlib.replication.ledger``): policy, seed,
    run (its cache key), arm, ``train`` (the RL run, or the base policy's SFT, is not cached)
    and ``evaluations`` (benchmarks without a stored evaluation)."""
    rows = []
    for v, seed, benchmarks in work:
        if ledger.usable(expectation(profile, v, seed, benchmarks)) is not None:
            continue  # the run ledger holds it: nothing to compute
        key = v.run_key(profile, seed)
        built = policy_dir(v.profile(profile).base).exists()
        trained = built if v.arm == BASE else v.run_path(profile, seed).exists()
        stored = _stored_benchmarks(v.profile(profile), key)
        missing = [b for b in benchmarks if b not in stored]
        if not trained or missing:
            row = {"policy": v.label, "seed": seed, "run": key, "arm": v.arm.name}
            rows.append(row | {"train": not trained, "evaluations": len(missing)})
    columns = ["policy", "seed", "run", "arm", "train", "evaluations"]
    return pd.DataFrame(rows, columns=columns)


def measured_costs(path: str | Path) -> pd.DataFrame | None:
    """The table of measured costs at ``path`` (columns run, train_seconds, eval_seconds), or
    None if there is none."""
    path = Path(path)
    return pd.read_csv(path) if path.exists() else None


def estimate_seconds(
    todo: pd.DataFrame, measured: pd.DataFrame, planned: Work, profile: Profile
) -> float:
    """Seconds ``todo`` (``pending``'s table) should take, priced with ``measured`` (a
    ``15_results_compute.csv``) whose runs are the ``planned`` work of ``profile`` (to know each
    one's arm and how many benchmarks its ``eval_seconds`` covers)."""
    info = {v.run_key(profile, seed): (v.arm.name, len(b)) for v, seed, b in planned}
    done = measured.dropna(subset=["train_seconds", "eval_seconds"])
    done = done[done["run"].isin(info)]
    arms = done["run"].map(lambda key: info[key][0])
    benchmarks = done["run"].map(lambda key: info[key][1])
    per_evaluation = done["eval_seconds"].sum() / max(benchmarks.sum(), 1)
    rl = done[arms != BASE.name]
    train = dict(zip(done["run"], done["train_seconds"], strict=True))
    median = rl.groupby(arms[arms != BASE.name])["train_seconds"].median().to_dict()
    overall = float(rl["train_seconds"].median()) if len(rl) else 0.0
    seconds = 0.0
    for row in todo.itertuples():
        if row.train and row.arm != BASE.name:  # an SFT: sft_announcement
            seconds += train.get(row.run, median.get(row.arm, overall))
        seconds += row.evaluations * per_evaluation
    return float(seconds)


def announcement(
    name: str, todo: pd.DataFrame, policies: int, seconds: float | None, source: str = ""
) -> str:
    """One line saying what experiment ``name`` computes before it shows anything: how many of
    its ``policies`` (variant x seed) are RL runs to train, how many evaluations run, and the
    estimate ``seconds`` (None: no measured costs), measured in ``source``."""
    if todo.empty:
        return f"[psnlib] {name}: all {policies} policies and their evaluations are cached"
    trains = int((todo["train"] & (todo["arm"] != BASE.name)).sum())
    text = (
        f"[psnlib] {name}: {trains} of {policies} policies to train by RL, "
        f"{int(todo['evaluations'].sum())} evaluations to compute"
    )
    if (todo["train"] & (todo["arm"] == BASE.name)).any():
        text += ", a base policy to build by SFT first"
    if seconds is None:
        return text + " (no measured times for this profile to estimate from)"
    return text + f"; about {seconds / 60:.0f} min at the per-run times measured in {source}"
