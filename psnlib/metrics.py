"""Evaluation metrics: the unbiased pass@k estimator and its curves.

pass@k (Chen et al. 2021): with n samples of which c are correct, the probability that a random
k-subset holds at least one correct sample, ``1 - C(n-c, k) / C(n, k)``.
"""

from __future__ import annotations

import math

import numpy as np


def _pass_at_k_scalar(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k) / C(n, k) in log space: no overflow for n in the thousands.
    log_ratio = (
        math.lgamma(n - c + 1)
        - math.lgamma(n - c - k + 1)
        - math.lgamma(n + 1)
        + math.lgamma(n - k + 1)
    )
    return 1.0 - math.exp(log_ratio)


def pass_at_k(n, c, k) -> np.ndarray | float:
    """Unbiased pass@k, vectorised over broadcastable arrays ``n``, ``c``, ``k``.

    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    n_, c_, k_ = np.broadcast_arrays(np.asarray(n), np.asarray(c), np.asarray(k))
    if np.any(c_ < 0) or np.any(c_ > n_):
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n!r}, c={c!r}")
    if np.any(k_ < 1) or np.any(k_ > n_):
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got n={n!r}, k={k!r}")
    out = np.vectorize(_pass_at_k_scalar, otypes=[float])(n_, c_, k_)
    return float(out) if out.ndim == 0 else out


def pass_at_k_curve(n: int, correct_counts, ks=None) -> np.ndarray:
    """Mean pass@k over problems for each k (default k = 1..n): shape (len(ks),)."""
    c = np.asarray(correct_counts)
    ks = np.arange(1, n + 1) if ks is None else np.asarray(ks)
    return np.array([pass_at_k(n, c, k).mean() for k in ks])
