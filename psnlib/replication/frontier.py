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
``x``. Where ``x`` lies beyond the path's range of pass@1, ``f_s`` goes on from the path's point
at that end (above the largest pass@1: that point, the most trained of a tie, "GRPO trained
longer"; below the smallest: that point, the least trained of a tie) along the path's own
least-squares slope over all its points (``claim_stats.frontier_slope``). Not along the end
segment: between the last kept steps pass@1 moves by tenths of a point, so that segment's slope
is noise (on the cpu round's first seeds it reached -200 points of pass@max per point of pass@1,
the whole path's -1 to -5). Such a value is marked (``where``: ``above the path`` or ``below the
path``, counted in ``frontier_table``'s ``beyond``); with ``extrapolate=False`` it is NaN instead
and that seed drops out of the mean (a smaller ``n``). A path flat in pass@1 extrapolates nothing
(NaN).

The statistic of an arm: per seed ``d_s = y_arm,s - f_s(x_arm,s)``, the arm's pass@max above
GRPO's path at the arm's own pass@1 (positive: better than GRPO trained less or longer), its mean
over seeds and the paired t-interval (``verdicts.paired_t_interval``). Beside it
``frontier_table`` gives the across-seed statistic of the same arm against GRPO's final policies
(``claim_stats.frontier_differences`` and its jackknife ``frontier_interval``), and
``slope_table`` the path's own slope (pass@max per point of pass@1 along each seed's path, a
least-squares fit over its points, ``claim_stats.frontier_slope``) beside the across-seed one.

``OnGRPOPath`` is the gap as a claim's statistic (``psnlib.replication.claim_stats.Statistic``):
per seed, ours' pass@max (value_a) against GRPO's path at ours' pass@1 (value_b), so the claims
table and RESULTS.md carry the measured frontier beside the across-seed one
(``psnlib.replication.claims_psn.PASS_ON_GRPO_PATH``, whose paths
``psnlib.replication.jobs.training_paths`` reads from the run ledger).

Analysis only: it reads ledger records (``path_problems``, ``final_problems``) or tidy tables and
computes nothing a record holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication import ledger
from psnlib.replication.claim_stats import (
    PASS_AT_1,
    PASS_AT_MAX,
    NotRun,
    SeedValues,
    Statistic,
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
    (``INSIDE``, ``ABOVE`` or ``BELOW``) and the segment's steps (``"32-64"``; beyond the path,
    the step it goes on from: ``"from 80"``)."""
    path = path.sort_values("step")
    xs, ys, steps = (path[c].to_numpy() for c in ("pass1", "passmax", "step"))
    if len(xs) < 2:
        raise ValueError(f"a training path needs at least two points, got {len(xs)}")
    ends = [(i, i + 1) for i in range(len(xs) - 1)]
    inside = [(i, j) for i, j in ends if min(xs[i], xs[j]) <= x <= max(xs[i], xs[j])]
    if not inside:
        above = x > xs.max()
        # the end point: the largest pass@1 (latest of a tie) or the smallest (earliest of a tie)
        a = max(range(len(xs)), key=lambda i: (xs[i], i)) if above else int(np.argmin(xs))
        where, segment = (ABOVE if above else BELOW), f"from {steps[a]}"
        if not extrapolate:
            return float("nan"), where, segment
        return float(ys[a] + (x - xs[a]) * frontier_slope(xs, ys)), where, segment
    i, j = inside[0]
    if xs[i] == xs[j]:  # a segment flat in pass@1 at x: its first point
        return float(ys[i]), INSIDE, f"{steps[i]}-{steps[j]}"
    return (
        float(ys[i] + (x - xs[i]) * (ys[j] - ys[i]) / (xs[j] - xs[i])),
        INSIDE,
        f"{steps[i]}-{steps[j]}",
    )


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


@dataclass(frozen=True)
class OnGRPOPath(Statistic):
    """pass@max of ours against GRPO's training path at ours' pass@1 (``frontier_gap``): value_a
    ours' pass@max, value_b the path's value ``f_s(x_ours)`` at the same seed, so the difference
    is the gap ``g_s`` of the module doc, its interval the paired t over seeds. ``paths`` reads
    the paths as ``psnlib.replication.jobs.training_paths`` does (profile, benchmarks, seeds,
    compute; a ``LookupError`` for records it lacks, which makes the claim ``NotRun``: nothing is
    computed here); ``reference`` is the label of the policy whose path it is (theirs must be
    it)."""

    paths: Callable[..., pd.DataFrame] | None = None
    reference: str = ""

    def __post_init__(self) -> None:
        if self.paths is None or not self.reference:
            raise ValueError(f"{self.name}: give the paths' reader and the reference's label")

    def seed_values(
        self,
        problems: pd.DataFrame | None,
        logs: pd.DataFrame | None,
        ours: str,
        theirs: str,
        profile: Profile,
        exclude: tuple[int, ...] = (),
    ) -> SeedValues:
        """Per seed of ours outside ``exclude`` with a path: value_a, value_b (class doc); a note
        with the path's points and how many seeds lie beyond their path (extrapolated)."""
        if theirs != self.reference:
            raise ValueError(f"{self.name} compares an arm with {self.reference!r}, got {theirs!r}")
        if problems is None:
            raise ValueError(f"the {self.name} statistic needs the problems table")
        mine = problems[(problems["policy"] == ours) & ~problems["seed"].isin(exclude)]
        if mine.empty:
            raise ValueError(f"no evaluation of policy {ours!r} outside the seeds {exclude}")
        benchmarks = tuple(sorted(set(mine["benchmark"])))
        arm = points(mine, profile)
        try:  # read, never computed here: a claim without the records is not run
            path = self.paths(profile, benchmarks, arm["seed"].tolist(), compute=False)
        except LookupError as missing:
            raise NotRun(str(missing)) from None
        gaps = frontier_gap(path, arm).dropna(subset=["frontier"]).set_index("seed")
        values = gaps[["passmax", "frontier"]].set_axis(["value_a", "value_b"], axis=1)
        steps = ", ".join(map(str, sorted(set(path["step"]))))
        beyond = int((gaps["where"] != INSIDE).sum())
        note = (
            f"GRPO's path at each seed: its policy at steps {steps} (0: the base policy); "
            f"{beyond} of {len(gaps)} seeds' pass@1 beyond their path (on along the path's "
            "own slope)"
        )
        return SeedValues(values, note=note)
