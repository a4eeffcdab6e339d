"""GRPO's training path as the frontier of "GRPO trained less": pass@max at equal pass@1.

``psnlib.replication.analysis.claim_stats``'s ``pass@max at equal pass@1`` reads GRPO's pass@1 ->
pass@K frontier from the spread of its final policies across seeds (the least-squares slope ``b``),
which barely varies at a fixed step count. Here the frontier is *measured* instead: GRPO's run at
each main seed keeps its policy at the profile's ``path_steps``
(``psnlib.replication.compute.jobs``), each evaluated like the final one, so seed ``s`` has a
training path of points ``(x, y) = (pass@1, pass@max)``, in percent, averaged over problems within a
benchmark, then over benchmarks (as ``claim_stats.seed_means``): the base policy at step 0, each
kept step, and the final policy ``(x_T, y_T)`` at the run's last step.

The frontier of seed ``s``, ``f_s``, is monotone: the decreasing isotonic fit of the path's
pass@max on its pass@1 (``scipy.optimize.isotonic_regression``; points of equal pass@1 first
averaged, weighted by their count), linear between the fitted points; beyond the path's range of
pass@1 it goes on from the fitted end point along the path's own least-squares slope over all its
points (``claim_stats.frontier_slope``; NaN for a path flat in pass@1), and the value is marked
(``where``: ``above the path`` or ``below the path``, counted in ``frontier_table``'s ``beyond``).
Pass@1 is not monotone along a path (cpu seed 1: 10.55, 10.49, 9.70, 10.53 at steps 32-80) while
pass@max keeps falling, so a point-to-point reading is no function of pass@1; the fit pools such
points into one level.

The statistic of an arm at seed ``s`` reads it relative to GRPO's own final policy on the same
frontier:

    g_s = (y_arm,s - f_s(x_arm,s)) - (y_T,s - f_s(x_T,s))
        = (y_arm,s - y_T,s) - (f_s(x_arm,s) - f_s(x_T,s)),

the plain pass@max difference less what GRPO's frontier itself moves between GRPO's pass@1 and the
arm's (positive: better than GRPO trained less or longer to the arm's pass@1). GRPO's final policy
against its own path scores 0 by construction, which round two's rule did not: read on the path's
first (least-trained) segment holding ``x`` (``first_segment_value``), the frontier is close to an
upper envelope of noisy points, and GRPO against its own path at the same seed gave
-2.3 [-4.5, -0.1] on the cpu records (``psnlib.replication.analysis.nulls``, which keeps that rule
to show it failing; docs/protocol.md, "Null checks", has the candidates measured and why this one).

Over seeds: the mean of ``g_s`` and the paired t-interval (``verdicts.paired_t_interval``). Beside
it ``frontier_table`` gives the across-seed statistic of the same arm against GRPO's final
policies (``claim_stats.frontier_differences`` and its jackknife ``frontier_interval``), and
``slope_table`` the path's own slope (pass@max per point of pass@1 along each seed's path, a
least-squares fit over its points, ``claim_stats.frontier_slope``) beside the across-seed one.

``OnGRPOPath`` is the gap as a claim's statistic
(``psnlib.replication.analysis.claim_stats.Statistic``): per seed, ours' pass@max moved along GRPO's
frontier to GRPO's final pass@1, ``y_arm - (f_s(x_arm) - f_s(x_T))`` (value_a), against GRPO's final
pass@max ``y_T`` (value_b), so the claims table and RESULTS.md carry the measured frontier beside
the across-seed one (``psnlib.replication.analysis.claims_psn.PASS_ON_GRPO_PATH``, whose paths
``training_paths`` reads from the run ledger).

Analysis only: it reads ledger records (``path_problems``, ``final_problems``) or tidy tables and
computes nothing a record holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression

from psnlib.replication.analysis.claim_stats import (
    PASS_AT_1,
    PASS_AT_MAX,
    NotRun,
    SeedValues,
    Statistic,
    frontier_differences,
    frontier_interval,
    frontier_slope,
)
from psnlib.replication.analysis.verdicts import paired_t_interval
from psnlib.replication.plan.experiments import BASE_POLICY
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.schedule import tasks
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import require
from psnlib.replication.records.tables import task_expectation

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


def first_segment_value(path: pd.DataFrame, x: float) -> float:
    """Round two's frontier value at ``x`` along one seed's path (columns step, pass1, passmax),
    kept for the null table only (``psnlib.replication.analysis.nulls``), which shows it failing:
    the linear interpolation on the first (least-trained) segment, in order of step, whose pass@1
    range holds ``x`` (a segment flat in pass@1 at ``x``: its first point); beyond the path's range,
    on from its end point (the largest pass@1, latest of a tie; the smallest, earliest of a tie)
    along the path's own least-squares slope."""
    path = path.sort_values("step")
    xs, ys = (path[c].to_numpy(dtype=float) for c in ("pass1", "passmax"))
    _check_path(xs)
    inside = [i for i in range(len(xs) - 1) if min(xs[i], xs[i + 1]) <= x <= max(xs[i], xs[i + 1])]
    if not inside:
        above = x > xs.max()
        a = max(range(len(xs)), key=lambda i: (xs[i], i)) if above else int(np.argmin(xs))
        return float(ys[a] + (x - xs[a]) * frontier_slope(xs, ys))
    i = inside[0]
    if xs[i] == xs[i + 1]:
        return float(ys[i])
    return float(ys[i] + (x - xs[i]) * (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]))


def _check_path(xs: np.ndarray) -> None:
    if len(xs) < 2:
        raise ValueError(f"a training path needs at least two points, got {len(xs)}")


def monotone_fit(path: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One seed's monotone frontier (module doc): the path's distinct pass@1 values, ascending,
    and the decreasing isotonic fit of pass@max on them (points of equal pass@1 averaged first,
    weighted by their count)."""
    xs = path["pass1"].to_numpy(dtype=float)
    _check_path(xs)
    levels = path.groupby("pass1")["passmax"].agg(["mean", "size"])  # sorted by pass@1
    fit = isotonic_regression(
        levels["mean"].to_numpy(dtype=float),
        weights=levels["size"].to_numpy(dtype=float),
        increasing=False,
    ).x
    return levels.index.to_numpy(dtype=float), fit


def frontier_value(path: pd.DataFrame, x: float) -> tuple[float, str]:
    """``f(x)`` on one seed's monotone frontier (columns pass1, passmax; module doc) and where
    ``x`` lies: ``INSIDE`` the path's range of pass@1, ``ABOVE`` or ``BELOW`` it (on from the
    fitted end point along the path's own least-squares slope: NaN for a path flat in
    pass@1)."""
    xs, fit = monotone_fit(path)
    if xs[0] <= x <= xs[-1]:
        return float(np.interp(x, xs, fit)), INSIDE
    slope = frontier_slope(path["pass1"], path["passmax"])
    end = -1 if x > xs[-1] else 0
    return float(fit[end] + (x - xs[end]) * slope), ABOVE if end else BELOW


def frontier_gap(path: pd.DataFrame, arm: pd.DataFrame) -> pd.DataFrame:
    """Per seed that both have: the arm's pass1 and passmax (``arm``: seed, pass1, passmax),
    GRPO's final ``grpo_pass1``, ``grpo_passmax`` (its path's last step), the frontier's values
    at both pass@1s (``frontier``: at the arm's; ``at_grpo``: at GRPO's), the gap ``gap = (passmax
    - grpo_passmax) - (frontier - at_grpo)`` (module doc) and where the arm's pass@1 lies on that
    seed's path (``path``: seed, step, pass1, passmax)."""
    if arm["seed"].duplicated().any():
        raise ValueError(f"an arm has one row per seed, got the seeds {arm['seed'].tolist()}")
    rows = []
    paths = dict(iter(path.groupby("seed")))
    final = final_points(path).set_index("seed")
    for seed, x, y in arm[["seed", "pass1", "passmax"]].itertuples(index=False):
        if seed not in paths:
            continue
        value, where = frontier_value(paths[seed], x)
        x_t, y_t = final.loc[seed, "pass1"], final.loc[seed, "passmax"]
        at_grpo = frontier_value(paths[seed], x_t)[0]
        rows.append(
            {"seed": seed, "pass1": x, "passmax": y, "grpo_pass1": x_t, "grpo_passmax": y_t}
            | {"frontier": value, "at_grpo": at_grpo, "gap": (y - y_t) - (value - at_grpo)}
            | {"where": where}
        )
    if not rows:
        raise ValueError(f"no seed of the arm {sorted(arm['seed'])} has a GRPO training path")
    return pd.DataFrame(rows)


def final_points(path: pd.DataFrame) -> pd.DataFrame:
    """Each seed's last point of its path (GRPO's final policy): seed, step, pass1, passmax."""
    return path.sort_values("step").groupby("seed").tail(1).sort_values("seed")


def frontier_table(path: pd.DataFrame, arms: pd.DataFrame) -> pd.DataFrame:
    """Per policy of ``arms`` (columns policy, seed, pass1, passmax): ``n`` seeds with a path,
    ``mean`` gap on GRPO's path (``frontier_gap``) with its paired t-interval ``lo``, ``hi``,
    ``beyond`` (how many seeds' pass@1 lies beyond their path: read along its own slope); beside
    it ``across``, ``across_lo``, ``across_hi``: the across-seed statistic against GRPO's final
    policies at the same seeds (``claim_stats.frontier_differences``, jackknife interval)."""
    rows = []
    for policy, arm in arms.groupby("policy", sort=False):
        gaps = frontier_gap(path, arm)
        d = gaps["gap"].dropna().to_numpy(dtype=float)
        lo, hi = paired_t_interval(d)
        columns = ("pass1", "passmax", "grpo_pass1", "grpo_passmax")
        arrays = [gaps[c].to_numpy(dtype=float) for c in columns]
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
    """pass@max of ours against GRPO's training path (``frontier_gap``): value_a ours' pass@max
    moved along GRPO's monotone frontier to GRPO's final pass@1, ``y_arm - (f_s(x_arm) -
    f_s(x_T))``, value_b GRPO's final pass@max ``y_T`` at the same seed, so the difference is the
    gap ``g_s`` of the module doc, its interval the paired t over seeds. ``paths`` reads the paths
    as ``training_paths`` does (profile, benchmarks, seeds; a
    ``LookupError`` for records it lacks, which makes the claim ``NotRun``: nothing is computed
    here); ``reference`` is the label of the policy whose path it is (theirs must be it)."""

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
        with the path's points and how many seeds' pass@1 lies beyond their path."""
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
            path = self.paths(profile, benchmarks, arm["seed"].tolist())
        except LookupError as missing:
            raise NotRun(str(missing)) from None
        gaps = frontier_gap(path, arm).dropna(subset=["gap"]).set_index("seed")
        values = pd.DataFrame(
            {
                "value_a": gaps["passmax"] - (gaps["frontier"] - gaps["at_grpo"]),
                "value_b": gaps["grpo_passmax"],
            }
        )
        steps = ", ".join(map(str, sorted(set(path["step"]))))
        beyond = int((gaps["where"] != INSIDE).sum())
        note = (
            f"GRPO's path at each seed: its policy at steps {steps} (0: the base policy), read "
            f"on its monotone fit relative to GRPO's final policy; {beyond} of {len(gaps)} seeds' "
            "pass@1 beyond their path (on along the path's own slope)"
        )
        return SeedValues(values, note=note)


def training_paths(
    profile: Profile,
    benchmarks: tuple[str, ...],
    seeds: Iterable[int] | None = None,
) -> pd.DataFrame:
    """GRPO's training paths at ``profile``'s main seeds (or those of ``seeds`` among them) as
    ``psnlib.replication.analysis.frontier.points`` (seed, step, pass1, passmax) on ``benchmarks``,
    from the run ledger's records of the base policy and of GRPO's path tasks (``tasks``); nothing
    is trained or evaluated: a task without a usable record is a ``MissingRecords`` that names it,
    before anything is read."""
    plan = tasks(profile)
    wanted = set(profile.seeds if seeds is None else seeds)
    start = next(t for t in plan if t.variant.label == BASE_POLICY.label)
    kept = [t for t in plan if t.path and t.seed in wanted]
    if not kept:
        raise ValueError(
            f"profile {profile.name!r} keeps GRPO's path at none of the seeds {sorted(wanted)} "
            f"(path_steps {profile.path_steps}, main seeds {profile.seeds})"
        )
    needed = {t.name(): task_expectation(profile, t) for t in (start, *kept)}
    base, *grpo = require(profile.name, needed, "GRPO's training path").values()
    steps = path_problems(base, grpo, benchmarks)
    return points(steps, profile, ("seed", "step"))
