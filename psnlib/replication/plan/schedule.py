"""The schedule: every task of a profile's plan, in the order a sitting computes them.

A ``Task`` is one policy of the plan (``planned_work``: a variant at a seed) with every
benchmark any experiment evaluates it on, and the extras its task computes on the same policy:
for GRPO at the premise's seeds the premise on its checkpoint, the probes of
``psnlib.replication.plan.probes.PROBES`` at the first main seed, and for GRPO at the main seeds
its training path (the policies kept at the profile's ``path_steps``). ``tasks`` lists them,
primary comparisons first (``PRIORITY``); ``planned_runs`` is the same plan as a table of runs,
the compute budget. Each task has one record in the run ledger
(``psnlib.replication.records.status.expected`` says what it must match); computing one is
``psnlib.replication.compute.jobs.run_task``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from psnlib.replication.plan.experiments import GRPO, PLANS
from psnlib.replication.plan.premise import premise
from psnlib.replication.plan.probes import PROBES, probe_seed
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.plan.variants import (
    BASE,
    Variant,
)

# The plans whose policies run first, group by group: the tuning of every explorer (its choices
# decide the tuned arms' runs), then the primary comparisons of issue 41 at the main seeds (GRPO
# with the premise and its path, PSN fixed and adaptive II, the released code's two PSNs, the TIS
# three-way, the exploration baselines, the 3PO-style arm), then the other main arms (weak
# prefixes, the out-of-distribution evaluations); the rest (ablations, other models) last.
# Within a group, seed by seed, so that the pairs of every comparison fill in together.
PRIORITY = (
    ("tuning",),
    (
        "rl_narrows_coverage",
        "released_code",
        "main_results",
        "tis_three_way",
        "exploration_baselines",
        "masked_is",
    ),
    ("weak_prefix", "entropy_dynamics", "coverage", "ood"),
)


@dataclass(frozen=True)
class Task:
    """One policy of the plan: ``variant`` at ``seed``, evaluated on ``benchmarks``, the premise
    on its checkpoint if ``premise``, ``probes`` (names of ``psnlib.replication.plan.probes.
    PROBES``) on its policy, and its training path: the policies its run keeps at the steps of
    ``path``, each evaluated on ``benchmarks``."""

    variant: Variant
    seed: int
    benchmarks: tuple[str, ...]
    premise: bool = False
    probes: tuple[str, ...] = ()
    path: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        """``base`` (evaluations of a starting policy) or ``run`` (an RL run)."""
        return "base" if self.variant.arm == BASE else "run"

    def key(self, profile: Profile) -> str:
        """Its run key: the name of its record."""
        return self.variant.run_key(profile, self.seed)

    def name(self) -> str:
        """How progress lines name it."""
        what = f"{self.variant.label} seed {self.seed} ({len(self.benchmarks)} benchmarks"
        extra = ["premise"] if self.premise else []
        extra += [f"path at steps {', '.join(map(str, self.path))}"] if self.path else []
        return what + "".join(f", {x}" for x in [*extra, *self.probes]) + ")"


def _group(profile: Profile) -> dict[str, int]:
    """Run key -> the first ``PRIORITY`` group of a plan that uses it."""
    first: dict[str, int] = {}
    for group, names in enumerate(PRIORITY):
        for name in names:
            plan = PLANS[name](profile)
            for v in plan.variants:
                for seed in v.seeds(plan.seeds):
                    first.setdefault(v.run_key(profile, seed), group)
    return first


def tasks(profile: Profile) -> list[Task]:
    """Every task of ``profile``'s plan, primary comparisons first (``PRIORITY``)."""
    premise_seeds = set(premise(profile).seeds)
    grpo = {GRPO.run_key(profile, seed): seed for seed in premise_seeds}
    path_seeds = (*profile.seeds, *profile.tuning_seeds)  # the frontier of the claims, the rule
    pathed = {GRPO.run_key(profile, seed): seed for seed in path_seeds}
    probed: dict[str, list[str]] = {}
    for name, probe in PROBES.items():
        for v in probe.variants:
            probed.setdefault(v.run_key(profile, probe_seed(profile)), []).append(name)
    found = [
        Task(
            v,
            seed,
            benchmarks,
            premise=grpo.get(key := v.run_key(profile, seed)) == seed,
            probes=tuple(probed.get(key, ())),
            path=profile.path_steps if pathed.get(key) == seed else (),
        )
        for v, seed, benchmarks in planned_work(profile)
    ]
    group, last = _group(profile), len(PRIORITY)
    order = {id(task): i for i, task in enumerate(found)}
    return sorted(found, key=lambda t: (group.get(t.key(profile), last), t.seed, order[id(t)]))


def _plan_entries(profile: Profile) -> Iterator[tuple[str, Variant, int, tuple[str, ...]]]:
    """(experiment, variant, seed, benchmarks) of every plan, in plan order."""
    for name, build in PLANS.items():
        p = build(profile)
        for v in p.variants:
            for seed in v.seeds(p.seeds):
                yield name, v, seed, p.benchmarks


def planned_work(profile: str | Profile = "cpu") -> list[tuple[Variant, int, tuple[str, ...]]]:
    """Every distinct (variant, seed) the experiments train or load, once, with the union of the
    benchmarks they evaluate it on, in plan order: what ``psnlib.replication.reproduce --workers``
    prepares in parallel before the notebooks run. ``profile``: a ``Profile`` or its name."""
    profile = get_profile(profile)
    work: dict[str, tuple[Variant, int, dict[str, None]]] = {}
    for _, v, seed, benchmarks in _plan_entries(profile):
        work.setdefault(v.run_key(profile, seed), (v, seed, {}))[2].update(
            dict.fromkeys(benchmarks)
        )
    return [(v, seed, tuple(benchmarks)) for v, seed, benchmarks in work.values()]


def planned_runs(profile: str | Profile = "cpu") -> pd.DataFrame:
    """Every policy the experiments train or evaluate, one row per distinct run (arm, seed and
    settings; base policies have arm ``base`` and train nothing), with the experiments that share
    it and how many benchmarks it is evaluated on: the compute budget of ``make reproduce``.
    ``profile``: a ``Profile`` or its name."""
    profile = get_profile(profile)
    rows: dict[str, dict] = {}
    for name, v, seed, benchmarks in _plan_entries(profile):
        key = v.run_key(profile, seed)
        row = rows.setdefault(
            key,
            {"run": key, "arm": v.arm.name, "seed": seed, "policy": v.label}
            | {"used_by": [], "benchmarks": set()},
        )
        row["used_by"] += [name] if name not in row["used_by"] else []
        row["benchmarks"] |= set(benchmarks)
    table = pd.DataFrame(list(rows.values()))
    return table.assign(
        used_by=table["used_by"].map(", ".join), benchmarks=table["benchmarks"].map(len)
    )
