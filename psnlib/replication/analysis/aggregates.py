"""The aggregates the field reports beside paired means (Agarwal et al. 2021, "Deep RL at the
edge of the statistical precipice", the rliable library): the interquartile mean of an arm's
scores and the probability that one arm improves on another, each with a bootstrap interval.

A *score* is one run's statistic on one benchmark (a task): here pass@K in percent of a training
seed's final policy on one in-distribution benchmark, so an arm has a (seeds, benchmarks) matrix
``X`` (N runs, T tasks).

- **IQM** (``iqm``): the mean of the middle 50% of all N x T scores pooled (25% trimmed from each
  end, ``scipy.stats.trim_mean``): robust to an outlying seed, less noisy than the median.
- **Probability of improvement** (``probability_of_improvement``), as rliable defines it:

      P(X > Y) = 1/T sum_t P(X_t > Y_t),
      P(X_t > Y_t) = 1/(N M) sum_i sum_j S(x_t,i, y_t,j),  S(x, y) = 1 if x > y, 1/2 if x = y, 0

  over every pair of a run of X and a run of Y on task t (the Mann-Whitney U statistic over N M;
  not only the pairs of a seed). 0.5 is no improvement either way.

Intervals: 95% percentile bootstrap (``scipy.stats.bootstrap``, ``RESAMPLES`` resamples, a fixed
generator, so a table is re-made identically), resampling runs (seeds, each with its T benchmark
scores) with replacement, independently per arm. rliable's stratified bootstrap resamples runs
within each task; a seed's benchmarks here are one trained policy evaluated T ways, so they are
resampled together. Analysis only: from a problems table, nothing computed that a record holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from psnlib.replication.analysis.claim_stats import PASS_AT_MAX, Statistic
from psnlib.replication.plan.profiles import Profile

RESAMPLES = 2000
LEVEL = 0.95
TRIM = 0.25  # the IQM trims this share from each end


def scores(
    problems: pd.DataFrame, policy: str, profile: Profile, statistic: Statistic = PASS_AT_MAX
) -> pd.DataFrame:
    """``policy``'s score matrix: one row per seed, one column per benchmark, the statistic's
    per-problem values averaged over the benchmark's problems, in its unit."""
    mine = statistic.problem_values(problems, policy, profile)
    means = mine.groupby(["seed", "benchmark"])["value"].mean() * statistic.scale
    matrix = means.unstack("benchmark")
    if matrix.isna().any().any():
        raise ValueError(f"{policy!r} is not evaluated on every benchmark at every seed")
    return matrix


def iqm(x: np.ndarray) -> float:
    """The interquartile mean of every score of ``x`` (module doc)."""
    return float(stats.trim_mean(np.ravel(x), TRIM))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """``P(X > Y)`` of two score matrices with the same tasks as columns (module doc)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)  # (N, T), (M, T)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"two score matrices over the same tasks, got {x.shape} and {y.shape}")
    diff = x[:, None, :] - y[None, :, :]  # (N, M, T)
    s = (diff > 0) + 0.5 * (diff == 0)
    return float(s.mean(axis=(0, 1)).mean())


def _interval(
    statistic: Callable[..., float], matrices: tuple[np.ndarray, ...]
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic(*matrices)`` over resampled rows (runs),
    each matrix resampled on its own (module doc). ``scipy.stats.bootstrap`` resamples
    one-dimensional samples, so it resamples each matrix's row indices."""
    rows = tuple(np.arange(len(m)) for m in matrices)

    def resampled(*index: np.ndarray) -> float:
        return statistic(*(m[i] for m, i in zip(matrices, index, strict=True)))

    result = stats.bootstrap(
        rows,
        resampled,
        n_resamples=RESAMPLES,
        confidence_level=LEVEL,
        method="percentile",
        paired=False,
        vectorized=False,
        axis=0,
        rng=np.random.default_rng(0),
    )
    lo, hi = result.confidence_interval
    return float(lo), float(hi)


def aggregate_table(
    problems: pd.DataFrame,
    profile: Profile,
    arms: Sequence[str],
    reference: str,
    statistic: Statistic = PASS_AT_MAX,
) -> pd.DataFrame:
    """Per arm of ``arms`` (policy labels of ``problems``): seeds, its IQM with a 95% interval,
    and its probability of improvement over ``reference`` with a 95% interval (NaN for the
    reference itself), on the statistic's scores (``scores``)."""
    ref = scores(problems, reference, profile, statistic)
    rows = []
    for arm in arms:
        x = scores(problems, arm, profile, statistic)
        if list(x.columns) != list(ref.columns):
            raise ValueError(f"{arm!r} and {reference!r} differ in benchmarks")
        lo, hi = _interval(iqm, (x.to_numpy(),))
        row = {"policy": arm, "seeds": len(x), "iqm": iqm(x.to_numpy()), "iqm_lo": lo}
        row["iqm_hi"] = hi
        if arm == reference:
            row |= {"p_improve": np.nan, "p_improve_lo": np.nan, "p_improve_hi": np.nan}
        else:
            data = (x.to_numpy(), ref.to_numpy())
            p_lo, p_hi = _interval(probability_of_improvement, data)
            p = probability_of_improvement(*data)
            row |= {"p_improve": p, "p_improve_lo": p_lo, "p_improve_hi": p_hi}
        rows.append(row)
    table = pd.DataFrame(rows).set_index("policy")
    table.attrs["statistic"] = statistic.label(profile)
    table.attrs["reference"] = reference
    return table
