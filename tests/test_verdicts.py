"""Verdict words on hand-made intervals, and the power computation against closed forms."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from psnlib.replication.analysis.verdicts import (
    EQUIVALENT,
    NONINFERIOR,
    SUPERIOR,
    headroom_scaled,
    minimum_detectable_effect,
    paired_t_interval,
    power,
    seeds_needed,
    standard_error,
    t_quantile,
    verdict,
)


@pytest.mark.parametrize(
    ("lo", "hi", "direction", "seeds", "effect", "margin", "expected"),
    [
        (1.0, 5.0, 1, 3, 2.2, None, "reproduced"),  # the paper's way, clear of 0
        (0.1, 1.0, 1, 3, 2.2, None, "reproduced"),  # clear of 0, smaller than the paper's
        (-7.5, 6.6, 1, 3, 2.2, None, "inconclusive"),  # covers 0 and the paper's effect
        (-1.0, 3.0, 1, 3, None, None, "inconclusive"),  # covers 0, no effect reported
        (-1.0, 1.5, 1, 3, 2.2, None, "smaller than reported"),  # covers 0, wholly below +2.2
        (-1.0, 2.2, 1, 3, 2.2, None, "inconclusive"),  # reaches the paper's +2.2: not below it
        (-1.0, 1.5, 1, 3, -0.5, None, "inconclusive"),  # no positive size to fall short of
        (-5.0, -1.0, 1, 3, None, None, "contradicted"),  # clear of 0 the other way
        (-0.5, 0.5, 0, 3, None, 1.0, "reproduced"),  # inside the equivalence margin
        (-0.5, 1.5, 0, 3, None, 1.0, "inconclusive"),  # crosses the margin
        (1.2, 3.0, 0, 3, None, 1.0, "contradicted"),  # wholly outside it
        (-3.0, -1.1, 0, 3, None, 1.0, "contradicted"),
        (1.0, 5.0, 1, 1, 2.2, None, "exploratory"),  # one seed: never a verdict
        (-5.0, -1.0, 0, 1, None, 1.0, "exploratory"),
    ],
)
def test_verdict_words(lo, hi, direction, seeds, effect, margin, expected):
    assert verdict(lo, hi, direction, seeds, margin=margin, effect=effect) == expected


@pytest.mark.parametrize(
    ("effect", "here", "paper", "expected"),
    [
        (2.24, 88.3, 74.7, 2.24 * 11.7 / 25.3),  # the PSN fixed claim at the cpu testbed: ~1.04
        (4.8, 74.7, 74.7, 4.8),  # the same reference: unchanged
        (3.0, 100.0, 50.0, 0.0),  # no headroom left here
        (1.0, 50.0, 75.0, 2.0),  # twice the paper's headroom: twice the points
    ],
)
def test_headroom_scaling_on_hand_made_numbers(effect, here, paper, expected):
    assert headroom_scaled(effect, here, paper) == pytest.approx(expected, rel=1e-12)


def test_headroom_needs_a_paper_reference_below_100():
    with pytest.raises(ValueError, match=r"pass@k in \[0, 100\), got 100"):
        headroom_scaled(1.0, 80.0, 100.0)


def test_about_equal_needs_a_margin_and_directions_are_checked():
    with pytest.raises(ValueError, match="needs a margin >= 0, got None"):
        verdict(-1.0, 1.0, 0, 3)
    with pytest.raises(ValueError, match="needs a margin >= 0, got -1"):
        verdict(-1.0, 1.0, 0, 3, margin=-1.0)
    # a share of a 0 value (e.g. pass@1 of a policy that solves nothing) is a margin of 0
    assert verdict(0.0, 0.0, 0, 3, margin=0.0) == "reproduced"
    assert verdict(0.0, 0.5, 0, 3, margin=0.0) == "inconclusive"
    with pytest.raises(ValueError, match=r"direction must be 1 .*, 0 .* or -1 .*got 2"):
        verdict(-1.0, 1.0, 2, 3)
    with pytest.raises(ValueError, match="a non-inferiority claim needs a margin >= 0, got None"):
        verdict(-1.0, 1.0, NONINFERIOR, 3)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (-3.9, 1.0, "reproduced"),  # the loss is at most 4: the lower end clears -4
        (-3.9, -0.5, "reproduced"),  # slower, surely, but by less than the margin
        (0.5, 9.0, "reproduced"),  # faster: never against "costs at most"
        (-4.0, 1.0, "inconclusive"),  # the lower end on the margin does not clear it
        (-8.3, 0.0, "inconclusive"),  # the committed cpu interval (wall time): a loss beyond 4
        (-9.0, -4.5, "contradicted"),  # the upper end below -4: a loss larger than the margin
        (-12.0, 3.0, "inconclusive"),
    ],
)
def test_non_inferiority_is_one_sided_against_minus_the_margin(lo, hi, expected):
    """``ours - theirs`` at most 4 below (e.g. 8% of 50 steps/min): only the lower end of the
    interval can reproduce it and only the upper end contradict it; an equivalence reading of
    the same intervals differs where ours is ahead."""
    assert verdict(lo, hi, NONINFERIOR, 16, margin=4.0) == expected
    assert verdict(0.5, 9.0, EQUIVALENT, 16, margin=4.0) == "inconclusive"  # +/- 4: not equal
    assert verdict(lo, hi, NONINFERIOR, 1, margin=4.0) == "exploratory"


def test_an_interval_that_could_not_be_computed_decides_nothing():
    nan = float("nan")
    for direction, margin in ((SUPERIOR, None), (EQUIVALENT, 1.0), (NONINFERIOR, 1.0)):
        assert verdict(nan, nan, direction, 16, margin=margin, effect=2.0) == "inconclusive"


def test_an_interval_of_exactly_zero_covers_zero() -> None:
    """Identical (or saturated) arms differ by 0 on every seed: the interval is [0, 0], which
    covers 0 (its ends on 0 clear it neither way), so it is no verdict for either side; below a
    positive reported effect it is *smaller than reported*."""
    assert paired_t_interval(np.zeros(2)) == (0.0, 0.0)  # the smoke profile's 2 seeds
    assert verdict(0.0, 0.0, SUPERIOR, 2) == "inconclusive"
    assert verdict(0.0, 0.0, SUPERIOR, 2, effect=2.2) == "smaller than reported"
    assert verdict(0.0, 0.0, NONINFERIOR, 2, margin=0.0) == "inconclusive"  # on -0: not above it


@pytest.mark.parametrize(
    ("lo", "hi", "direction", "margin"),
    [
        (1.0, math.inf, SUPERIOR, None),  # one finite end clear of 0 is not enough
        (-math.inf, -1.0, SUPERIOR, None),
        (-math.inf, math.inf, SUPERIOR, None),
        (2.0, math.inf, EQUIVALENT, 1.0),
        (-math.inf, -5.0, NONINFERIOR, 4.0),
        (1.0, math.nan, SUPERIOR, None),
    ],
)
def test_an_interval_with_an_infinite_end_decides_nothing(
    lo: float, hi: float, direction: int, margin: float | None
) -> None:
    """An infinite end (an overflow) is as undecided as a NaN one: both ends must be finite."""
    assert verdict(lo, hi, direction, 2, margin=margin, effect=2.0) == "inconclusive"


# t with 1 degree of freedom is the standard Cauchy: t_p = tan(pi (p - 1/2)); printed: 12.706
T_975_1 = math.tan(0.475 * math.pi)


def test_paired_interval_at_two_seeds_by_hand() -> None:
    """The smoke profile's 2 seeds, d = (1, 4): mean 2.5, sd = 3 / sqrt(2), se = sd / sqrt(2) =
    1.5, so the interval is 2.5 -/+ 1.5 * t_{0.975, 1}. Tolerance: a few float64 roundings."""
    assert t_quantile(2) == pytest.approx(12.706, abs=5e-4)  # the printed table
    assert t_quantile(2) == pytest.approx(T_975_1, rel=1e-14)
    lo, hi = paired_t_interval(np.array([1.0, 4.0]))
    assert lo == pytest.approx(2.5 - 1.5 * T_975_1, rel=1e-14)
    assert hi == pytest.approx(2.5 + 1.5 * T_975_1, rel=1e-14)
    assert standard_error(lo, hi, 2) == pytest.approx(1.5, rel=1e-14)


def power_at_two_seeds(nc: float) -> float:
    """The module doc's ``P(|T'| > t_{0.975, 1})`` at 1 degree of freedom from its definition:
    ``T' = (Z + nc) / |V|`` with Z, V independent standard normals, so conditioning on ``|V| = v``
    it is ``int_0^inf 2 phi(v) [Phi(nc - t v) + Phi(-nc - t v)] dv`` (no noncentral t)."""

    def given(v: float) -> float:
        return (
            2
            * stats.norm.pdf(v)
            * (stats.norm.cdf(nc - T_975_1 * v) + stats.norm.cdf(-nc - T_975_1 * v))
        )

    return integrate.quad(given, 0, math.inf, epsabs=1e-13, epsrel=1e-13)[0]


def test_mde_at_two_seeds_against_the_power_integral() -> None:
    """The MDE over 2 seeds solves ``power = 0.8``: about 16.3 se, where power rises 0.028 per se.
    The integral is within 1e-13 (quad's bound) of the power, 2e-13 relative in the root; the
    code's root is within brentq's xtol 2e-12 of it, 1.2e-13 relative: rel=1e-12 bounds both."""
    assert power_at_two_seeds(0.0) == pytest.approx(0.05, rel=1e-12)  # no effect: the level
    nc = optimize.brentq(lambda x: power_at_two_seeds(x) - 0.8, 1.0, 100.0, xtol=1e-14)
    assert power(1.5 * nc, 1.5, 2) == pytest.approx(0.8, rel=1e-12)
    assert minimum_detectable_effect(1.0, 2) == pytest.approx(nc, rel=1e-12)
    assert minimum_detectable_effect(1.5, 2) == pytest.approx(1.5 * nc, rel=1e-12)  # d = (1, 4)


def test_seeds_needed_at_two_and_at_exactly_most() -> None:
    """The search is inclusive at both ends: an effect equal to the MDE at 2 seeds needs 2 (the
    first count tried), and one equal to the MDE at 5 needs 5 even when ``most`` is 5."""
    sd = 2.84
    at_two = minimum_detectable_effect(sd / math.sqrt(2), 2)
    assert seeds_needed(sd, at_two) == 2
    assert seeds_needed(sd, at_two, most=2) == 2
    at_five = minimum_detectable_effect(sd / math.sqrt(5), 5)
    assert seeds_needed(sd, at_five) == 5
    assert seeds_needed(sd, at_five, most=5) == 5
    assert seeds_needed(sd, at_five, most=4) is None


def test_standard_error_inverts_the_t_interval():
    d = np.array([1.0, 3.0, 2.5, 0.5])
    se = d.std(ddof=1) / 2
    half = stats.t.ppf(0.975, 3) * se
    assert standard_error(d.mean() - half, d.mean() + half, 4) == pytest.approx(se)


@pytest.mark.parametrize(
    ("seeds", "level", "table"), [(4, 0.95, 3.182), (16, 0.95, 2.131), (8, 0.9, 1.895)]
)
def test_t_quantile_is_the_two_sided_students_t_of_the_tables(seeds, level, table):
    # printed t tables, 3 decimals: t_{0.975, 3}, t_{0.975, 15}, t_{0.95, 7}
    assert t_quantile(seeds, level) == pytest.approx(table, abs=5e-4)


@pytest.mark.parametrize("n", [200, 2000])
def test_mde_tends_to_the_normal_closed_form(n):
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # (z_{1-a/2} + z_{power}) * se
    assert minimum_detectable_effect(0.7, n) == pytest.approx(
        z * 0.7, rel=3e-3 if n > 1000 else 1e-2
    )


def test_mde_has_the_stated_power_by_simulation_at_ten_seeds():
    """A paired t-test over 10 seeds whose true difference is the MDE rejects 0 about 80% of the
    time (20,000 simulated experiments; the binomial SD of the rate is 0.003)."""
    rng = np.random.default_rng(0)
    n, sd = 10, 2.0
    delta = minimum_detectable_effect(sd / math.sqrt(n), n)
    d = rng.normal(delta, sd, (20_000, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    assert np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)) == pytest.approx(0.8, abs=0.012)
    assert power(0.0, 1.0, n) == pytest.approx(0.05)  # no effect: the test's level


def test_mde_edges_and_seeds_needed():
    assert math.isnan(minimum_detectable_effect(1.0, 1))
    assert minimum_detectable_effect(0.0, 5) == 0.0
    assert minimum_detectable_effect(1.0, 3) > minimum_detectable_effect(1.0, 10)
    n = seeds_needed(2.84, 2.24)  # the spread of PSN fixed - GRPO at cpu, the paper's effect
    assert minimum_detectable_effect(2.84 / math.sqrt(n), n) <= 2.24
    assert minimum_detectable_effect(2.84 / math.sqrt(n - 1), n - 1) > 2.24
    assert seeds_needed(100.0, 0.01, most=50) is None
    with pytest.raises(ValueError, match="effect must be > 0"):
        seeds_needed(1.0, 0.0)
