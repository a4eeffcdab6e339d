"""pass@k against brute force over k-subsets and an independent closed form."""

import itertools
import math
import random

import numpy as np
import pytest

from psnlib.metrics import pass_at_k, pass_at_k_curve


def brute_force(n: int, c: int, k: int) -> float:
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force_small_n(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    c, k = rng.randint(0, n), rng.randint(1, n)
    assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_matches_closed_form_large_n_vectorised():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 400, size=200)
    c = np.array([rng.integers(0, m + 1) for m in n])
    k = np.array([rng.integers(1, m + 1) for m in n])
    got = pass_at_k(n, c, k)
    want = [closed_form(int(a), int(b), int(d)) for a, b, d in zip(n, c, k, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_edge_cases():
    assert pass_at_k(256, 0, 256) == 0.0
    assert pass_at_k(256, 256, 1) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_curve_is_non_decreasing_and_ends_at_coverage():
    counts = [0, 1, 5, 0, 16]
    curve = pass_at_k_curve(16, counts)
    assert np.all(np.diff(curve) >= -1e-12)
    assert curve[0] == pytest.approx(np.mean(counts) / 16)
    assert curve[-1] == pytest.approx(3 / 5)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_bad_input(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k needs"):
        pass_at_k(n, c, k)
