"""Equal tuning for every explorer (docs/protocol.md 2.13): each knob's tuning curve, and the value
its rule chooses, read from the tuning plan's records.

The tuning plan (``psnlib.replication.plan.experiments.tuning``) trains PSN's sigma, the rollout
temperature and the entropy coefficient at three values each, with GRPO and its training path,
at the tuning seeds, and evaluates them on the tuning problems (no reported evaluation draws
them). ``curves`` reads it: one row per knob, value and seed with pass@1 and pass@K (``pass1``,
``passmax``: points, the mean over the tuning benchmarks) and ``gap``, the null-checked
training-path statistic of protocol 2.9 against GRPO at the same seed (``frontier.frontier_gap``:
pass@K at equal pass@1 on GRPO's own frontier). ``choose`` applies the rule, once per knob:

1. a value whose policy solves no tuning problem (pass@K 0 at every seed) is out (2.11);
2. of the rest, the highest mean ``gap`` over the seeds wins;
3. a tie, equal at the reported precision (0.1 points), goes to the value nearest the current
   one (on the knob's log scale: the temperature's excess over 1); of two equally near, the
   smaller.

Plain pass@K is not the score: it would reward the knob that trades the most pass@1.
"""

from __future__ import annotations

import math

import pandas as pd

from psnlib.replication.analysis import frontier, summaries
from psnlib.replication.plan.experiments import tuning
from psnlib.replication.plan.profile_config import KNOBS
from psnlib.replication.plan.profiles import Profile

PRECISION = 1  # decimals of the reported gap: means equal at this precision tie


def current_values(profile: Profile) -> dict[str, float]:
    """Each knob's value before the tuning: PSN fixed's sigma, the raised temperature, and the
    weaker entropy bonus (the stronger one collapsed, protocol 2.13)."""
    return {
        "sigma": profile.psn_sigma,
        "temperature": profile.baseline_temperature,
        "entropy_coef": min(profile.entropy_coefs),
    }


def curves(profile: Profile) -> pd.DataFrame:
    """One row per knob, value and tuning seed: ``pass1``, ``passmax`` and ``gap`` (the module's
    docstring), read from the records (a missing one is a ``MissingRecords`` naming it)."""
    plan = tuning(profile)
    if not plan.variants:
        raise ValueError(f"profile {profile.name!r} states no tuning (tuning_seeds is empty)")
    problems = summaries.read(plan, progress=False)["problems"]
    path = frontier.training_paths(profile, plan.benchmarks, plan.seeds)
    rows = []
    for variant in plan.variants:
        if "knob" not in variant.tags:
            continue
        mine = problems[problems["policy"] == variant.label]
        gap = frontier.frontier_gap(path, frontier.points(mine, profile, ("seed",)))
        knob, value = variant.tags["knob"], variant.tags["value"]
        rows.append(gap[["seed", "pass1", "passmax", "gap"]].assign(knob=knob, value=value))
    grpo = frontier.final_points(path).assign(knob="GRPO", value=math.nan, gap=0.0)
    table = pd.concat([*rows, grpo[["seed", "pass1", "passmax", "gap", "knob", "value"]]])
    return table[["knob", "value", "seed", "pass1", "passmax", "gap"]].reset_index(drop=True)


def _distance(knob: str, value: float, current: float) -> float:
    """How far ``value`` lies from ``current`` on the knob's log scale."""
    if knob == "temperature":  # the excess over the sampling temperature 1
        value, current = value - 1.0, current - 1.0
    return abs(math.log(value / current))


def choose(table: pd.DataFrame, current: dict[str, float]) -> pd.DataFrame:
    """The rule (the module's docstring) on ``curves``' table: one row per knob with ``chosen``
    (its value; NaN where every value solved nothing), ``current``, the mean ``gap`` of each
    value (``gaps``) and ``why``."""
    rows = []
    for knob in KNOBS:
        mine = table[table["knob"] == knob]
        if mine.empty:
            continue
        by_value = mine.groupby("value")
        solved = by_value["passmax"].max() > 0
        gaps = by_value["gap"].mean()
        alive = gaps[solved]
        now = current[knob]
        if alive.empty:
            chosen, why = math.nan, "every value solved no tuning problem"
        else:
            best = round(alive.max(), PRECISION)
            tied = [v for v, g in alive.items() if round(g, PRECISION) == best]
            chosen = min(tied, key=lambda v: (round(_distance(knob, v, now), 9), v))
            out = sorted(v for v in gaps.index if not solved[v])
            why = f"highest mean gap {alive[chosen]:+.2f}" + (
                f", tied with {[v for v in tied if v != chosen]}: nearest {now:g}"
                if len(tied) > 1
                else ""
            )
            why += f"; out (solved nothing): {out}" if out else ""
        text = ", ".join(f"{v:g}: {g:+.2f}" for v, g in gaps.items())
        rows.append({"knob": knob, "chosen": chosen, "current": now, "gaps": text, "why": why})
    return pd.DataFrame(rows)
