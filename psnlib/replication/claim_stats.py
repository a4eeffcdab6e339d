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

``THROUGHPUT`` comes from the runs' training logs instead (the ``logs`` table of
``psnlib.replication.variants.compare``, which the experiment returns): ``60 * steps /
sum(step_time)``, training steps per minute of step wall time (generation included), per run.
Every arm of a comparison trains the same batch, so the ratio of two runs' values is the ratio of
their rollouts per second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from psnlib.metrics import pass_at_k, solved_only
from psnlib.replication.profiles import Profile

DIGITS = {"problems": 0, "nats": 3}  # decimals shown per unit; 1 for the others


def number(x: float, unit: str, signed: bool = False) -> str:
    """``x`` with the decimals of ``unit`` (``DIGITS``), with its sign if asked."""
    return f"{x:{'+' if signed else ''}.{DIGITS.get(unit, 1)}f}"


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
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """The statistic of policies ``ours`` and ``theirs`` per seed, in its unit (index seed;
        columns value_a, value_b) from the tables handed (``problems``: the benchmarks to
        average only; ``logs``: for a per-run statistic), and the paired per-problem table
        behind it (None for a per-run statistic), for the one-seed bootstrap."""
        if self.per_run is not None:
            if logs is None:
                raise ValueError(f"the {self.name} statistic needs the runs' training logs")
            return run_values(logs, ours, theirs, self.per_run) * self.scale, None
        if problems is None:
            raise ValueError(f"the {self.name} statistic needs the problems table")
        both = paired(*(self.problem_values(problems, p, profile) for p in (ours, theirs)))
        return self.per_seed(both) * self.scale, both

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
    """``60 * steps / sum(step_time)`` over the log's steps with a step time."""
    times = log["step_time"].dropna().to_numpy(dtype=float)
    return 60.0 * len(times) / times.sum() if times.sum() > 0 else float("nan")


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
