"""What an experiment still has to compute: ``pending`` lists its (policy, seed) runs that are not
in the cache and the benchmark evaluations that are not stored (of a plan's ``work``; the plans
themselves only read records, ``psnlib.replication.analysis.summaries.read``, and the compute
layer, ``psnlib.replication.reproduce``, computes what is missing). ``sft_announcement`` names the
policies still to build by SFT, with the build times notebook 01 measured
(``figures/<profile>/01_testbed.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from psnlib.paths import data_dir
from psnlib.replication.plan.policies import policy_dir
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.plan.variants import BASE, Variant
from psnlib.replication.records import ledger, paths
from psnlib.replication.records.tables import expectation

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
    ledger record nor everything cached, ``psnlib.replication.records.ledger``): policy, seed,
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
