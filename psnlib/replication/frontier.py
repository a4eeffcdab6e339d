"""GRPO's training path as the frontier of "GRPO trained less": pass@max at equal pass@1.

``psnlib.replication.claim_stats``'s ``pass@max at equal pass@1`` reads GRPO's pass@1 -> pass@K
frontier from the spread of its final policies across seeds (the least-squares slope ``b``),
which barely varies at a fixed step count. Here the frontier is *measured* instead: GRPO's run at
each main seed keeps its policy at the profile's ``path_steps`` (``psnlib.replication.jobs``),
each evaluated like the final one, so seed ``s`` has a training path of points
``(x, y) = (pass@1, pass@max)``, in percent, averaged over problems within a benchmark, then over
benchmarks (as ``claim_stats.seed_means``): the base policy at step 0, each kept step, and the
final policy at the run's last step.

The frontier value at pass@1 ``x`` of seed ``s``, ``f_s(x)``, is the linear interpolation along
that path in order of step: on the first segment (the least-trained one) whose pass@1 range holds
``x``. Where ``x`` lies beyond the path's range of pass@1, ``f_s`` extrapolates the straight line
of the segment at that end: above the largest pass@1, the last segment (the final two points:
"GRPO trained longer"); below the smallest, the first (the base policy and the first kept step).
Such a value is marked (``where``: ``above the path`` or ``below the path``, counted in
``frontier_table``'s ``beyond``); with ``extrapolate=False`` it is NaN instead and that seed drops
out of the mean (a smaller ``n``). A segment whose ends share their pass@1 extrapolates nothing
(NaN).

The statistic of an arm: per seed ``d_s = y_arm,s - f_s(x_arm,s)``, the arm's pass@max above
GRPO's path at the arm's own pass@1 (positive: better than GRPO trained less or longer), its mean
over seeds and the paired t-interval (``verdicts.paired_t_interval``). Beside it
``frontier_table`` gives the across-seed statistic of the same arm against GRPO's final policies
(``claim_stats.frontier_differences`` and its jackknife ``frontier_interval``), and
``slope_table`` the path's own slope (pass@max per point of pass@1 along each seed's path, a
least-squares fit over its points, ``claim_stats.frontier_slope``) beside the across-seed one.

Analysis only: it reads ledger records (``path_problems``, ``final_problems``) or tidy tables and
computes nothing a record holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication import ledger
from psnlib.replication.claim_stats import (
    PASS_AT_1,
    PASS_AT_MAX,
    frontier_differences,
    frontier_interval,
    frontier_slope,
)
from psnlib.replication.profiles import Profile
from psnlib.replication.verdicts import paired_t_interval

INSIDE, ABOVE, BELOW = "interpolated", "above the path", "below the path"


def path_problems(
    base: dict[str, Any], runs: Iterable[dict[str, Any]], benchmarks: tuple[str, ...]
) -> pd.DataFrame:
    """GRPO's training paths as one per-problem table (the problems table's columns, with seed,
    step and benchmark): from the ledger records of the base policy (step 0 of every seed) and of
    GRPO's runs (their kept steps, ``ledger.path_tables``, and their final policy at
    ``max_steps``)."""
    start = ledger.benchmark_tables(base, benchmarks)
    frames = []
    for run in runs:
        final = int(run["settings"]["max_steps"])
        steps = {0: start, **ledger.path_tables(run, benchmarks)}
        steps[final] = ledger.benchmark_tables(run, benchmarks)
        frames += [
            tables[benchmark]["problems"].assign(seed=run["seed"], step=step, benchmark=benchmark)
            for step, tables in steps.items()
            for benchmark in benchmarks
        ]
    return pd.concat(frames, ignore_index=True)


def final_problems(records: Iterable[dict[str, Any]], benchmarks: tuple[str, ...]) -> pd.DataFrame:
    """The final policies' per-problem table of some runs' ledger records, with seed and
    benchmark."""
    frames = [
        tables["problems"].assign(seed=record["seed"], benchmark=benchmark)
        for record in records
        for benchmark, tables in ledger.benchmark_tables(record, benchmarks).items()
    ]
    return pd.concat(frames, ignore_index=True)


def points(
    problems: pd.DataFrame, profile: Profile, by: tuple[str, ...] = ("seed",)
) -> pd.DataFrame:
    """``pass1`` and ``passmax`` (pass@1 and pass@K at the profile's smallest and largest k, in
    percent, ``claim_stats.PASS_AT_1`` and ``PASS_AT_MAX``) per group ``by`` (with ``step`` for
    a path: ``by=("seed", "step")``): the mean over problems within a benchmark, then over
    benchmarks."""
    rows = problems.assign(
        pass1=PASS_AT_1.scale * PASS_AT_1.per_problem(problems, profile),
        passmax=PASS_AT_MAX.scale * PASS_AT_MAX.per_problem(problems, profile),
    )
    per_benchmark = rows.groupby([*by, "benchmark"])[["pass1", "passmax"]].mean()
    return per_benchmark.groupby(list(by)).mean().reset_index()


def frontier_value(
    path: pd.DataFrame, x: float, extrapolate: bool = True
) -> tuple[float, str, str]:
    """``f(x)`` along one seed's path (columns step, pass1, passmax; module doc), where it lies
    (``INSIDE``, ``ABOVE`` or ``BELOW``) and the segment's steps (``"32-64"``)."""
    path = path.sort_values("step")
    xs, ys, steps = (path[c].to_numpy() for c in ("pass1", "passmax", "step"))
    if len(xs) < 2:
        raise ValueError(f"a training path needs at least two points, got {len(xs)}")
    ends = [(i, i + 1) for i in range(len(xs) - 1)]
    inside = [(i, j) for i, j in ends if min(xs[i], xs[j]) <= x <= max(xs[i], xs[j])]
    if inside:
        (i, j), where = inside[0], INSIDE
    else:
        (i, j), where = (ends[-1], ABOVE) if x > xs.max() else (ends[0], BELOW)
    segment = f"{steps[i]}-{steps[j]}"
    if xs[i] == xs[j]:  # a segment flat in pass@1: x is its pass@1 (inside) or none (beyond)
        return (float(ys[i]) if where == INSIDE else float("nan")), where, segment
    if where != INSIDE and not extrapolate:
        return float("nan"), where, segment
    return float(ys[i] + (x - xs[i]) * (ys[j] - ys[i]) / (xs[j] - xs[i])), where, segment


def frontier_gap(path: pd.DataFrame, arm: pd.DataFrame, extrapolate: bool = True) -> pd.DataFrame:
    """Per seed that both have: the arm's pass1 and passmax (``arm``: seed, pass1, passmax), the
    frontier value at its pass1 along that seed's GRPO path (``path``: seed, step, pass1,
    passmax), ``gap = passmax - frontier``, where the value lies and on which segment."""
    if arm["seed"].duplicated().any():
        raise ValueError(f"an arm has one row per seed, got the seeds {arm['seed'].tolist()}")
    rows = []
    paths = dict(iter(path.groupby("seed")))
    for seed, x, y in arm[["seed", "pass1", "passmax"]].itertuples(index=False):
        if seed not in paths:
            continue
        value, where, segment = frontier_value(paths[seed], x, extrapolate)
        rows.append(
            {"seed": seed, "pass1": x, "passmax": y, "frontier": value, "gap": y - value}
            | {"where": where, "segment": segment}
        )
    if not rows:
        raise ValueError(f"no seed of the arm {sorted(arm['seed'])} has a GRPO training path")
    return pd.DataFrame(rows)


def final_points(path: pd.DataFrame) -> pd.DataFrame:
    """Each seed's last point of its path (GRPO's final policy): seed, step, pass1, passmax."""
    return path.sort_values("step").groupby("seed").tail(1).sort_values("seed")


def frontier_table(
    path: pd.DataFrame, arms: pd.DataFrame, extrapolate: bool = True
) -> pd.DataFrame:
    """Per policy of ``arms`` (columns policy, seed, pass1, passmax): ``n`` seeds with a path,
    ``mean`` gap above GRPO's path (``frontier_gap``) with its paired t-interval ``lo``, ``hi``,
    ``beyond`` (how many seeds' pass@1 lies beyond their path: extrapolated, or left out of ``n``
    without ``extrapolate``); beside
    it ``across``, ``across_lo``, ``across_hi``: the across-seed statistic against GRPO's final
    policies at the same seeds (``claim_stats.frontier_differences``, jackknife interval)."""
    rows = []
    final = final_points(path).set_index("seed")
    for policy, arm in arms.groupby("policy", sort=False):
        gaps = frontier_gap(path, arm, extrapolate)
        d = gaps["gap"].dropna().to_numpy(dtype=float)
        lo, hi = paired_t_interval(d)
        mine = arm.set_index("seed").loc[gaps["seed"]]
        columns = [
            mine["pass1"],
            mine["passmax"],
            *(final.loc[gaps["seed"], c] for c in ("pass1", "passmax")),
        ]
        arrays = [c.to_numpy(dtype=float) for c in columns]
        across = float(frontier_differences(*arrays).mean())
        across_lo, across_hi = frontier_interval(*arrays)
        rows.append(
            {"policy": policy, "n": len(d), "mean": float(d.mean()) if len(d) else np.nan}
            | {"lo": lo, "hi": hi, "beyond": int((gaps["where"] != INSIDE).sum())}
            | {"across": across, "across_lo": across_lo, "across_hi": across_hi}
        )
    return pd.DataFrame(rows).set_index("policy")


def path_slopes(path: pd.DataFrame) -> pd.Series:
    """Per seed: the least-squares slope of pass@max on pass@1 over its path's points (points of
    pass@max per point of pass@1; ``claim_stats.frontier_slope``)."""
    return (
        path.groupby("seed")
        .apply(lambda p: frontier_slope(p["pass1"], p["passmax"]))
        .rename("slope")
    )


def slope_table(path: pd.DataFrame) -> pd.DataFrame:
    """The two readings of GRPO's frontier, in points of pass@max per point of pass@1: ``along
    the path`` (the mean over seeds of ``path_slopes``, with its t-interval) and ``across seeds``
    (the slope over the seeds' final policies, what ``claim_stats`` uses; no interval)."""
    slopes = path_slopes(path).dropna().to_numpy(dtype=float)
    final = final_points(path)
    lo, hi = paired_t_interval(slopes)
    along = {"slope": float(slopes.mean()) if len(slopes) else np.nan, "lo": lo, "hi": hi}
    across = {"slope": frontier_slope(final["pass1"], final["passmax"]), "lo": np.nan}
    return pd.DataFrame(
        [along | {"n": len(slopes)}, across | {"hi": np.nan, "n": len(final)}],
        index=pd.Index(["along the path", "across seeds"], name="frontier"),
    )
