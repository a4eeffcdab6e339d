"""The statistics a claim compares, per training seed: one ``Statistic`` object each.

Most are computed per problem from an experiment's ``problems`` table
(``psnlib.evaluate.evaluate_policy``'s columns; ``n`` samples, ``c`` of them correct), averaged over
the problems of a benchmark, then over benchmarks, per seed:

- ``PASS_AT_1``, ``PASS_AT_MAX``: the unbiased ``pass@k = 1 - C(n - c, k) / C(n, k)`` at the
  profile's smallest and largest k, in percent;
- ``GAIN_GROWTH`` (``pass@max-pass@1``): ``pass@K - pass@1`` per problem, in points, so that the
  paired difference ``ours - theirs`` is the gain at the largest k minus the gain at k = 1 ("the
  gain grows with k");
- ``SOLVED_ONLY``: per seed, the problems one policy solves (``c > 0``) and the other never does
  in its ``n`` samples, each way (``psnlib.metrics.solved_only``; a count, not a mean);
- ``STEP_VALIDITY``, ``DIVERSITY``: the per-problem shares of the same names (valid steps;
  ``1 - `` the mean similarity of random pairs of responses), in percent;
- ``ENTROPY``: the mean token entropy of the trained policy's evaluation samples, in nats.

``PASS_AT_EQUAL_PASS_1`` (``pass@max at equal pass@1``) is the papers' joint claim, pass@K higher
at about the same pass@1, read as the distance from theirs' pass@1 -> pass@K frontier across
seeds. With ``x`` = pass@1 and ``y`` = pass@K per seed (the two statistics above), ``b`` the
least-squares slope of ``y`` on ``x`` over theirs' seeds,

    b = sum_s (x_b,s - mean x_b)(y_b,s - mean y_b) / sum_s (x_b,s - mean x_b)^2,
    d_s = (y_a,s - y_b,s) - b * (x_a,s - x_b,s),

so ``d_s`` is ours' pass@K moved along theirs' frontier to theirs' pass@1 at seed ``s``, minus
theirs' (``value_a = y_a,s - b (x_a,s - x_b,s)``, ``value_b = y_b,s``); where RL trades pass@K for
pass@1 across seeds (``b < 0``), a policy that gains pass@K by giving up pass@1 gains nothing here.
Its interval is a leave-one-seed-out jackknife that refits ``b`` each time, with the t quantile of
``n - 1`` degrees of freedom (``frontier_interval``): ``theta = mean_s d_s``, ``theta_(i)`` the same
on the seeds but ``i`` with ``b`` refitted on them,

    se^2 = (n - 1) / n * sum_i (theta_(i) - mean_i theta_(i))^2,   theta +/- t_{0.975, n-1} * se.

With ``b`` held fixed the jackknife ``se`` is exactly ``sd(d) / sqrt(n)``, so the interval is the
paired t-interval of every other claim; refitting adds the uncertainty of the frontier. It is
deterministic (no resampling), and it keeps the t quantile and the unbiased variance of the
t-interval it generalises, where a percentile bootstrap over 16 seeds would use neither and tend to
cover less than 95%; ``psnlib.replication.analysis.verdicts.standard_error`` inverts it as it
inverts the t-interval (so the MDE beside it is read the same way). It needs 3 seeds (a slope on
each leave-one-out set of 2); with fewer the interval is NaN and the row's note says so.

``THROUGHPUT`` comes from the runs' training logs instead (the ``logs`` table of
``psnlib.replication.records.tables.compare``, which the experiment returns): ``60 * steps /
sum(step_cpu_time)``, training steps per minute of CPU time (generation included; the trainer's
CPU seconds of each optimizer step, every thread of its process), per run. CPU time, unlike the
wall clock, is not stretched by other jobs on the machine. Logs written before the trainer
logged ``step_cpu_time`` fall back to TRL's wall-clock ``step_time``, for every run of the
comparison alike (one clock for both sides), and the row's note says so. Every arm of a
comparison trains the same batch, so the ratio of two runs' values is the ratio of their
rollouts per CPU second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from psnlib.metrics import pass_at_k, solved_only
from psnlib.replication.analysis.verdicts import t_quantile
from psnlib.replication.plan.profiles import Profile

DIGITS = {"problems": 0, "nats": 3}  # decimals shown per unit; 1 for the others


def number(x: float, unit: str, signed: bool = False) -> str:
    """``x`` with the decimals of ``unit`` (``DIGITS``), with its sign if asked; "n/a" for a
    value that could not be computed (NaN)."""
    if not np.isfinite(x):
        return "n/a"
    return f"{x:{'+' if signed else ''}.{DIGITS.get(unit, 1)}f}"


def spans(numbers: Iterable[int]) -> str:
    """Integers as ranges, ``[0, 1, 2, 3, 5]`` -> ``"0-3, 5"`` (seeds, row numbers)."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def paired(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per-problem values of two policies side by side, seed by seed; a policy evaluated at one
    seed only (the base policy) is paired with every seed of the other."""
    keys = ["benchmark", "prompt"]
    if a["seed"].nunique() > 1 and b["seed"].nunique() > 1:
        keys = ["seed", *keys]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if "seed" not in keys:
        many = "seed_a" if a["seed"].nunique() > 1 else "seed_b"
        both = both.rename(columns={many: "seed"})
    if both.empty:
        raise ValueError("the two policies share no evaluated problem and seed")
    return both


def seed_means(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: each policy's mean over problems within a benchmark, then over benchmarks."""
    per_benchmark = both.groupby(["seed", "benchmark"])[["value_a", "value_b"]].mean()
    return per_benchmark.groupby("seed").mean()


def solved_only_counts(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the problems solved by one policy and by the other in none of its samples
    (``psnlib.metrics.solved_only`` of the paired correct counts), each way."""
    a, b = both["value_a"], both["value_b"]
    counts = both.assign(value_a=solved_only(a, b), value_b=solved_only(b, a))
    return counts.groupby("seed")[["value_a", "value_b"]].sum().astype(float)


CPU_CLOCK, WALL_CLOCK = "step_cpu_time", "step_time"  # the logs' seconds per optimizer step


def step_clock(logs: pd.DataFrame) -> tuple[str, str]:
    """The column of seconds per step that a throughput comparison reads from ``logs`` (its
    runs' training logs), and the row's note: ``step_cpu_time`` where every run logged it, else
    the wall-clock ``step_time`` for all of them (logs that predate it), said in the note."""
    runs = logs.groupby(["policy", "seed"])
    if CPU_CLOCK in logs:
        logged = runs[CPU_CLOCK].apply(lambda t: t.notna().any())
        if logged.all():
            return CPU_CLOCK, ""
        old = f"{int((~logged).sum())} of {len(logged)} runs' logs predate"
    else:
        old = "these runs' logs predate"
    return WALL_CLOCK, (
        f"wall-clock step_time, not CPU time: {old} step_cpu_time, so machine load enters the "
        "throughput"
    )


def run_values(
    logs: pd.DataFrame, ours: str, theirs: str, per_run: Callable[[pd.DataFrame], float]
) -> pd.DataFrame:
    """Per seed: ``per_run`` of the training log of ``ours`` (value_a) and ``theirs``
    (value_b), at the seeds both were trained at."""
    columns = []
    for policy in (ours, theirs):
        mine = logs[logs["policy"] == policy]
        if mine.empty:
            raise ValueError(f"no training log of policy {policy!r}")
        columns.append(pd.Series({seed: per_run(log) for seed, log in mine.groupby("seed")}))
    values = pd.concat(columns, axis=1, keys=["value_a", "value_b"], join="inner")
    if values.empty:
        raise ValueError(f"{ours!r} and {theirs!r} share no training seed")
    return values


class NotRun(Exception):
    """The profile has no run (or no record) of what a claim compares: the message says which.
    ``psnlib.replication.analysis.claim.Claim.sides`` raises it for a policy the profile lacks, a
    statistic for records it needs that do not exist (its row says "not run", with the reason)."""


@dataclass(frozen=True)
class SeedValues:
    """What ``Statistic.seed_values`` measured for one claim."""

    values: pd.DataFrame  # per seed (index) the statistic of ours (value_a) and theirs (value_b)
    paired: pd.DataFrame | None = None  # the per-problem pairs behind it (one-seed bootstrap)
    interval: tuple[float, float] | None = None  # its own interval (None: the paired t over seeds)
    note: str = ""  # what the row should say of how it was measured


@dataclass(frozen=True)
class Statistic:
    """One statistic a claim compares: per problem (``per_problem``, from the problems table,
    combined per seed by ``per_seed``) or per run (``per_run``, from its training log), the factor
    to its unit, and the unit."""

    name: str  # as a claim's row shows it, "max" standing for the profile's largest k
    unit: str  # "points", "problems", "nats" or "steps/min"
    scale: float = 100.0  # the value times scale is in unit (100: a share in percentage points)
    per_problem: Callable[[pd.DataFrame, Profile], np.ndarray] | None = None
    per_seed: Callable[[pd.DataFrame], pd.DataFrame] = seed_means  # of the paired values
    per_run: Callable[[pd.DataFrame], float] | None = None

    def label(self, profile: Profile) -> str:
        """The name as a row shows it: ``max`` replaced by the profile's largest k."""
        return self.name.replace("max", str(profile.ks[-1])) if "pass@" in self.name else self.name

    def seed_values(
        self,
        problems: pd.DataFrame | None,
        logs: pd.DataFrame | None,
        ours: str,
        theirs: str,
        profile: Profile,
        exclude: tuple[int, ...] = (),
    ) -> SeedValues:
        """The statistic of policies ``ours`` and ``theirs`` per seed, in its unit (index seed;
        columns value_a, value_b) from the tables handed (``problems``: the benchmarks to
        average only; ``logs``: for a per-run statistic), with the paired per-problem table
        behind it (None for a per-run statistic), for the one-seed bootstrap. The seeds in
        ``exclude`` (those that framed the claim) are left out, after pairing: a policy evaluated
        at one seed only (the base policy) still pairs with every other seed."""
        if self.per_run is not None:
            if logs is None:
                raise ValueError(f"the {self.name} statistic needs the runs' training logs")
            mine = logs[logs["policy"].isin([ours, theirs])]
            clock, note = step_clock(mine) if len(mine) else (CPU_CLOCK, "")
            per_run = self.per_run
            values = run_values(mine.assign(seconds=mine.get(clock)), ours, theirs, per_run)
            values = values[~values.index.isin(exclude)]
            if values.empty:
                raise ValueError(f"{ours!r} and {theirs!r} share no seed outside {exclude}")
            return SeedValues(values * self.scale, note=note)
        if problems is None:
            raise ValueError(f"the {self.name} statistic needs the problems table")
        both = paired(*(self.problem_values(problems, p, profile) for p in (ours, theirs)))
        both = both[~both["seed"].isin(exclude)]
        if both.empty:
            raise ValueError(f"{ours!r} and {theirs!r} share no seed outside {exclude}")
        return SeedValues(self.per_seed(both) * self.scale, both)

    def problem_values(self, problems: pd.DataFrame, policy: str, profile: Profile) -> pd.DataFrame:
        """One policy's per-problem values: seed, benchmark, prompt, value."""
        mine = problems[problems["policy"] == policy]
        if mine.empty:
            have = sorted(set(problems["policy"]))
            raise ValueError(f"no evaluation of policy {policy!r}; have {have}")
        return mine[["seed", "benchmark", "prompt"]].assign(value=self.per_problem(mine, profile))


def _pass(rows: pd.DataFrame, k: int) -> np.ndarray:
    return pass_at_k(rows["n"].to_numpy(), rows["correct"].to_numpy(), k)


def _column(name: str) -> Callable[[pd.DataFrame, Profile], np.ndarray]:
    return lambda rows, profile: rows[name].to_numpy(dtype=float)


def _steps_per_minute(log: pd.DataFrame) -> float:
    """``60 * steps / sum(seconds)`` over the log's steps with a time (``seconds``: the clock
    ``step_clock`` chose)."""
    times = log["seconds"].dropna().to_numpy(dtype=float)
    return 60.0 * len(times) / times.sum() if times.sum() > 0 else float("nan")


def frontier_slope(pass1: np.ndarray, passk: np.ndarray) -> float:
    """Least-squares slope of ``passk`` on ``pass1`` over seeds (module doc: ``b``); NaN where
    ``pass1`` does not vary."""
    x = np.asarray(pass1, dtype=float) - np.mean(pass1)
    y = np.asarray(passk, dtype=float) - np.mean(passk)
    ss = float(x @ x)
    return float(x @ y) / ss if ss > 0 else float("nan")


def frontier_differences(
    pass1_a: np.ndarray, passk_a: np.ndarray, pass1_b: np.ndarray, passk_b: np.ndarray
) -> np.ndarray:
    """Per seed ``d_s = (passk_a - passk_b) - b (pass1_a - pass1_b)``, ``b`` the slope of
    theirs' (``_b``) frontier (module doc); all four arrays are per seed, paired."""
    b = frontier_slope(pass1_b, passk_b)
    return (np.asarray(passk_a) - passk_b) - b * (np.asarray(pass1_a) - pass1_b)


def frontier_interval(
    pass1_a: np.ndarray, passk_a: np.ndarray, pass1_b: np.ndarray, passk_b: np.ndarray
) -> tuple[float, float]:
    """The 95% jackknife interval of ``mean_s d_s`` with the frontier refitted on each
    leave-one-seed-out set (module doc); NaN for fewer than 3 seeds or a flat frontier."""
    arrays = [np.asarray(a, dtype=float) for a in (pass1_a, passk_a, pass1_b, passk_b)]
    n = len(arrays[0])
    if n < 3:
        return float("nan"), float("nan")
    theta = float(frontier_differences(*arrays).mean())
    keep = ~np.eye(n, dtype=bool)  # row i: every seed but i
    loo = np.array([frontier_differences(*(a[keep[i]] for a in arrays)).mean() for i in range(n)])
    se = float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
    half = t_quantile(n) * se
    return theta - half, theta + half


@dataclass(frozen=True)
class AtEqualPass1(Statistic):
    """pass@K of ours against theirs at theirs' pass@1, along theirs' pass@1 -> pass@K frontier
    across seeds (module doc); ``pass1`` and ``passk`` are the statistics it combines."""

    pass1: Statistic | None = None
    passk: Statistic | None = None

    def seed_values(
        self,
        problems: pd.DataFrame | None,
        logs: pd.DataFrame | None,
        ours: str,
        theirs: str,
        profile: Profile,
        exclude: tuple[int, ...] = (),
    ) -> SeedValues:
        """value_a: ours' pass@K moved to theirs' pass@1 of the seed, ``y_a - b (x_a - x_b)``;
        value_b: theirs' pass@K; the jackknife interval, and a note with ``b`` and the plain
        pass@K difference; the seeds in ``exclude`` are left out before the frontier is fitted."""
        at_k = self.passk.seed_values(problems, logs, ours, theirs, profile, exclude)
        y, both = at_k.values, at_k.paired  # the pairs name the benchmarks averaged
        pass1 = self.pass1.seed_values(problems, logs, ours, theirs, profile, exclude)
        x = pass1.values.loc[y.index]
        b = frontier_slope(x["value_b"], y["value_b"])
        values = pd.DataFrame(
            {"value_a": y["value_a"] - b * (x["value_a"] - x["value_b"]), "value_b": y["value_b"]}
        )
        columns = (x["value_a"], y["value_a"], x["value_b"], y["value_b"])
        interval = frontier_interval(*(c.to_numpy() for c in columns))
        k = self.passk.label(profile)
        plain = number(float((y["value_a"] - y["value_b"]).mean()), "points", signed=True)
        plain = f"plain {k} difference {plain}"
        if not np.isfinite(b):
            at = f"{x['value_b'].iloc[0]:.1f}" if len(x) else "none"
            note = (
                f"{theirs}'s pass@1 does not vary over its {len(y)} seed(s) ({at} at each): no "
                f"frontier; {plain}"
            )
            return SeedValues(values, both, interval, note)
        note = (
            f"{theirs}'s frontier over {len(y)} seeds: {b:+.1f} points of {k} per point of pass@1"
        )
        note += f"; {plain}"
        if not np.isfinite(interval[0]):
            why = "fewer than 3 seeds" if len(y) < 3 else "a frontier that cannot be refitted"
            note += f"; no interval: {why} (the jackknife refits the frontier without each seed)"
        return SeedValues(values, both, interval, note)


PASS_AT_1 = Statistic("pass@1", "points", per_problem=lambda rows, p: _pass(rows, p.ks[0]))
PASS_AT_MAX = Statistic("pass@max", "points", per_problem=lambda rows, p: _pass(rows, p.ks[-1]))
GAIN_GROWTH = Statistic(  # the gain at the largest k minus the gain at k = 1
    "pass@max-pass@1",
    "points",
    per_problem=lambda rows, p: _pass(rows, p.ks[-1]) - _pass(rows, p.ks[0]),
)
SOLVED_ONLY = Statistic(
    "solved_only", "problems", 1.0, _column("correct"), per_seed=solved_only_counts
)
STEP_VALIDITY = Statistic("step_validity", "points", per_problem=_column("step_validity"))
DIVERSITY = Statistic("diversity", "points", per_problem=_column("diversity"))
ENTROPY = Statistic("entropy", "nats", 1.0, per_problem=_column("entropy"))
THROUGHPUT = Statistic("throughput", "steps/min", 1.0, per_run=_steps_per_minute)
PASS_AT_EQUAL_PASS_1 = AtEqualPass1(
    "pass@max at equal pass@1", "points", pass1=PASS_AT_1, passk=PASS_AT_MAX
)
