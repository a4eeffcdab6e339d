"""Metrics over problems: unbiased pass@k, its uncertainty, aggregation over seeds, solved sets.

pass@k (Chen et al. 2021): with n samples of which c are correct, the probability that a random
k-subset holds at least one correct sample, ``1 - C(n-c, k) / C(n, k)``. A policy's pass@k on a
benchmark is its mean over problems. Per-response metrics (diversity, step consistency,
informativeness, entropy) are in ``psnlib.response_metrics``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _integers(name: str, x) -> np.ndarray:
    """``x`` as an integer array; ValueError naming ``name`` if a value is not a whole number."""
    a = np.asarray(x)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.number) or np.any(a != np.round(a)):
        raise ValueError(f"{name} must hold whole numbers, got {name}={x!r}")
    return a.astype(np.int64)


def _log_comb_ratio(n: int, c: int, k: int) -> float:
    """``log(C(n-c, k) / C(n, k))`` for ``n - c >= k``, from log-gamma (no overflow)."""
    return (
        math.lgamma(n - c + 1)
        - math.lgamma(n - c - k + 1)
        - math.lgamma(n + 1)
        + math.lgamma(n - k + 1)
    )


def pass_at_k(n, c, k) -> np.ndarray | float:
    """Unbiased pass@k, vectorised over broadcastable arrays ``n``, ``c``, ``k``.

    Computed as ``-expm1(log C(n-c, k) - log C(n, k))``: exact to rounding for n in the
    thousands. Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    n_, c_, k_ = _integers("n", n), _integers("c", c), _integers("k", k)
    try:
        n_, c_, k_ = np.broadcast_arrays(n_, c_, k_)
    except ValueError:
        raise ValueError(
            f"pass_at_k needs n, c, k of broadcastable shapes, got {n_.shape}, {c_.shape}, "
            f"{k_.shape}"
        ) from None
    if np.any(c_ < 0) or np.any(c_ > n_):
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n!r}, c={c!r}")
    if np.any(k_ < 1) or np.any(k_ > n_):
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got n={n!r}, k={k!r}")
    out = np.ones(n_.shape)
    some_wrong = n_ - c_ >= k_  # otherwise every k-subset holds a correct sample
    ratio = np.vectorize(_log_comb_ratio, otypes=[float])(
        n_[some_wrong], c_[some_wrong], k_[some_wrong]
    )
    out[some_wrong] = 0.0 - np.expm1(ratio)  # 0.0 - x: no -0.0 when c = 0
    return float(out) if out.ndim == 0 else out


def pass_at_k_matrix(n, correct, ks) -> np.ndarray:
    """Per-problem pass@k: ``out[p, j]`` for problem p (``n[p]`` samples, ``correct[p]``
    correct) and ``k = ks[j]``, shape (P, len(ks)). ``n`` may be one number for all problems."""
    correct = _integers("correct", correct)
    if correct.ndim != 1:
        raise ValueError(f"correct must be one count per problem, got shape {correct.shape}")
    n = _integers("n", n)
    n = np.broadcast_to(n, correct.shape) if n.ndim == 0 else n
    if n.shape != correct.shape:
        raise ValueError(
            f"n and correct must have one entry per problem, got lengths {len(n)} and "
            f"{len(correct)}"
        )
    return pass_at_k(n[:, None], correct[:, None], np.asarray(ks)[None, :])


def pass_at_k_curve(n: int, correct_counts, ks=None) -> np.ndarray:
    """Mean pass@k over problems for each k (default k = 1..n): shape (len(ks),)."""
    ks = np.arange(1, int(n) + 1) if ks is None else ks
    return pass_at_k_matrix(n, correct_counts, ks).mean(axis=0)


def bootstrap_ci(
    n,
    correct,
    ks,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean pass@k with a percentile-bootstrap interval over problems (problems resampled with
    replacement): one row per k with columns k, pass_at_k, lo, hi."""
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    table = pass_at_k_matrix(n, correct, ks)  # (P, K)
    if len(table) == 0:
        raise ValueError("bootstrap_ci needs at least one problem, got none")
    rng = np.random.default_rng(seed)
    means = np.stack(
        [table[rng.integers(0, len(table), len(table))].mean(axis=0) for _ in range(resamples)]
    )  # (R, K)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(means, [tail, 100 - tail], axis=0)
    return pd.DataFrame({"k": list(ks), "pass_at_k": table.mean(axis=0), "lo": lo, "hi": hi})


def aggregate_seeds(
    table: pd.DataFrame, value: str = "pass_at_k", seed: str = "seed"
) -> pd.DataFrame:
    """Across seeds: mean, std (ddof 1), standard error, min, max and count of ``value``, per
    group of every other column except those derived from a single run (``lo``, ``hi``)."""
    missing = {value, seed} - set(table.columns)
    if missing:
        raise ValueError(f"table needs columns {sorted(missing)}; it has {list(table.columns)}")
    by = [c for c in table.columns if c not in (value, seed, "lo", "hi")]
    duplicated = table.duplicated(by + [seed])
    if duplicated.any():
        raise ValueError(
            f"more than one row per seed and group {by}, e.g. {table[duplicated].iloc[0].to_dict()}"
        )
    groups = table.groupby(by, sort=True, dropna=False)[value]
    out = groups.agg(["mean", "std", "min", "max", "count"]).rename(columns={"count": "seeds"})
    out["sem"] = out["std"] / np.sqrt(out["seeds"])
    return out.reset_index()


def solved(problems: pd.DataFrame, key: str = "prompt") -> set:
    """The problems (their ``key``) with at least one correct sample."""
    return set(problems.loc[problems["correct"] > 0, key])


def solved_only(correct_a, correct_b) -> np.ndarray:
    """Per problem, whether ``a`` solves it and ``b`` solves it in none of its samples (the
    papers' "solved by A, never by B in N samples"): ``correct_a > 0`` and ``correct_b == 0``,
    over broadcastable arrays of correct counts."""
    return (np.asarray(correct_a) > 0) & (np.asarray(correct_b) == 0)


def solved_only_by(
    a: pd.DataFrame, b: pd.DataFrame, on: str | list[str] = "prompt"
) -> pd.DataFrame:
    """The problems that ``a`` solves and ``b`` never does (``solved_only``): ``a``'s rows of
    them, its ``n`` and ``correct`` renamed ``n_a`` and ``correct_a``, beside ``b``'s as ``n_b``
    and ``correct_b``.

    ``a`` and ``b`` are per-problem tables (columns ``on``, ``n``, ``correct``) of the same
    problems, each problem named once by its ``on`` columns."""
    on = [on] if isinstance(on, str) else list(on)

    def named(key: tuple):  # a problem as the caller names it: its key, or tuple of keys
        return key[0] if len(on) == 1 else key

    problems = {}
    for name, t in (("a", a), ("b", b)):
        keys = list(t[on].itertuples(index=False, name=None))
        problems[name] = set(keys)
        if len(problems[name]) < len(keys):
            twice = next(k for i, k in enumerate(keys) if k in keys[:i])
            raise ValueError(f"{name} lists a problem twice: {named(twice)!r}")
    if problems["a"] != problems["b"]:
        only = sorted(problems["a"] ^ problems["b"])
        raise ValueError(
            f"a and b must cover the same problems; {len(only)} differ, e.g. "
            f"{[named(k) for k in only[:3]]}"
        )
    both = a.merge(b[[*on, "n", "correct"]], on=on, suffixes=("_a", "_b"))
    return both[solved_only(both["correct_a"], both["correct_b"])].reset_index(drop=True)
