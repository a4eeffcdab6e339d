"""What an interval over paired seeds can say about a claim: verdict words and statistical power.

A claim's difference ``d = ours - theirs`` is measured once per training seed (the arms of a seed
share its data order and evaluation streams: common random numbers), and its 95% interval is the
paired t-interval ``mean(d) +/- t_{0.975, n-1} * se``, ``se = sd(d) / sqrt(n)``.

Verdict words (``verdict``):

- *reproduced*: the paper's direction, the interval clear of 0;
- *contradicted*: the interval clear of 0 the other way;
- *smaller than reported*: the interval covers 0 (an end on 0 covers it: ``[0, 0]``, identical arms,
  is no verdict either way) but lies wholly below the paper's reported difference on this testbed's
  scale: for a pass@k with the paper's reference value, the effect scaled to the headroom
  (``headroom_scaled``; ``psnlib.replication.report.results.judgement`` passes it), else the raw
  effect; the paper's size is excluded, its direction is not refuted. A claim whose paper reports no
  number for its configuration gets no size word, only the direction words;
- *inconclusive*: anything else;
- "about equal" claims (direction ``EQUIVALENT``, 0) are judged against an equivalence margin
  ``m``, stated with the claim: *reproduced* when the interval lies inside ``[-m, m]``,
  *contradicted* when it lies wholly outside, *inconclusive* otherwise;
- "ours costs at most m" claims (direction ``NONINFERIOR``, -1: non-inferiority, one-sided) are
  judged against the margin ``-m`` alone: *reproduced* when the interval's lower end lies above
  ``-m`` (the one-sided 97.5% bound excludes a loss larger than ``m``), *contradicted* when its
  upper end lies below ``-m`` (a loss larger than ``m``), *inconclusive* otherwise. A gain, however
  large, never contradicts it;
- an interval that could not be computed (an end NaN, e.g. a statistic that needs more seeds
  than the profile has, or infinite, an overflow) is *inconclusive*;
- a claim measured on one seed is *exploratory*: its interval (a bootstrap over problems) leaves
  out seed-to-seed spread, so it is never a verdict;
- honest power: a claim whose seeds cannot see its effect of interest is *exploratory* too, its
  interval shown: a verdict word only where the minimum detectable effect (below) is under the
  effect of interest (``effect_of_interest``: the margin of an "about equal" or "costs at most"
  claim; for "ours ahead", the paper's effect on this testbed's scale, or, where the paper
  reports none for the comparison, the size the claim states it must see). A claim with no effect
  of interest (a count, a share or an entropy the papers give no size for) keeps its word, and so
  does an "ours ahead" interval clear of 0: what the seeds did see needs no power to see it.

Power (``minimum_detectable_effect``): the smallest true difference that a two-sided paired t-test
at level 0.05 over ``n`` seeds detects with probability 0.8, from the observed ``se``. The test's
statistic is noncentral t with ``n - 1`` degrees of freedom and noncentrality ``delta / se``, so

    power(delta) = P(|T'| > t_{0.975, n-1}),  T' ~ t_{n-1}(delta / se)

and the MDE solves ``power(delta) = 0.8``. For large ``n`` it tends to the normal closed form
``(z_{0.975} + z_{0.8}) * se``. ``seeds_needed`` inverts it for a target effect.

Headroom (``headroom_scaled``): a pass@k difference in points has less room where the reference
is nearer 100. The paper's effect scaled to this testbed is ``effect * (100 - theirs_here) /
(100 - theirs_paper)``, e.g. +2.2 points on the paper's GRPO at 74.7 is +1.0 on a GRPO at 88.3.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

LEVEL = 0.95  # two-sided interval, test level 1 - LEVEL
POWER = 0.8
# A claim's direction: ours ahead of theirs, about equal to it, or at most a margin below it
SUPERIOR, EQUIVALENT, NONINFERIOR = 1, 0, -1
DIRECTIONS = (SUPERIOR, EQUIVALENT, NONINFERIOR)
REPRODUCED, CONTRADICTED, SMALLER, INCONCLUSIVE, EXPLORATORY = (
    "reproduced",
    "contradicted",
    "smaller than reported",
    "inconclusive",
    "exploratory",
)


def verdict(
    lo: float,
    hi: float,
    direction: int,
    seeds: int,
    margin: float | None = None,
    effect: float | None = None,
    mde: float | None = None,
    interest: float | None = None,
) -> str:
    """The verdict word of an interval ``[lo, hi]`` of ``ours - theirs`` (see the module doc).

    ``direction`` is ``SUPERIOR`` (1) when the paper finds ``ours`` ahead, ``EQUIVALENT`` (0) for
    "about equal", ``NONINFERIOR`` (-1) for "ours at most ``margin`` below theirs"; the last two
    need ``margin`` (>= 0, in the statistic's units). ``effect`` is the paper's reported
    difference on this testbed's scale (scaled to the headroom where it can be), where it gives
    one: a ``SUPERIOR`` interval wholly below it that covers 0 is *smaller than reported*.

    Honest power: given ``mde`` (``minimum_detectable_effect`` of the interval), a claim whose
    ``mde`` is not below its effect of interest (``effect_of_interest(direction, margin,
    interest if given else effect)``) is *exploratory*, unless it is a ``SUPERIOR`` claim whose
    interval is clear of 0: a difference the seeds did see is *reproduced* or *contradicted*
    whatever their power, while a word that reads an absence (*inconclusive*, *smaller than
    reported*) or an equality needs the power to see the effect of interest. Without ``mde``, or
    without an effect of interest, the word follows from the interval alone."""
    if direction not in DIRECTIONS:
        raise ValueError(
            f"direction must be 1 (ours ahead), 0 (about equal) or -1 (at most a margin below), "
            f"got {direction}"
        )
    if seeds < 2:
        return EXPLORATORY
    if direction != SUPERIOR and (margin is None or not margin >= 0):
        # 0: a relative margin of a 0 value
        kind = "an 'about equal'" if direction == EQUIVALENT else "a non-inferiority"
        raise ValueError(f"{kind} claim needs a margin >= 0, got {margin}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE
    seen = direction == SUPERIOR and (lo > 0 or hi < 0)  # needs no power to be seen
    size = effect_of_interest(direction, margin, effect if interest is None else interest)
    if mde is not None and not math.isnan(size) and not mde < size and not seen:
        return EXPLORATORY  # the seeds cannot see the effect of interest
    if direction == EQUIVALENT:
        if -margin <= lo and hi <= margin:
            return REPRODUCED
        return CONTRADICTED if lo > margin or hi < -margin else INCONCLUSIVE
    if direction == NONINFERIOR:
        if lo > -margin:
            return REPRODUCED
        return CONTRADICTED if hi < -margin else INCONCLUSIVE
    if lo > 0:
        return REPRODUCED
    if hi < 0:
        return CONTRADICTED
    if effect is not None and effect > 0 and hi < effect:
        return SMALLER
    return INCONCLUSIVE


def effect_of_interest(
    direction: int, margin: float | None = None, effect: float | None = None
) -> float:
    """The effect a claim's seeds must be able to see for its verdict to be a word (module doc,
    honest power): the ``margin`` of an ``EQUIVALENT`` or ``NONINFERIOR`` claim; for a
    ``SUPERIOR`` claim ``effect`` (the paper's effect on this testbed's scale, or the size the
    claim states it must see where the paper reports none); NaN where there is none."""
    size = effect if direction == SUPERIOR else margin
    return float("nan") if size is None else float(size)


def headroom_scaled(effect: float, theirs_here: float, theirs_paper: float) -> float:
    """The paper's pass@k ``effect`` (points) scaled to this testbed's headroom:
    ``effect * (100 - theirs_here) / (100 - theirs_paper)`` (module doc)."""
    if not 0 <= theirs_paper < 100:
        raise ValueError(f"the paper's reference must be a pass@k in [0, 100), got {theirs_paper}")
    return effect * (100.0 - theirs_here) / (100.0 - theirs_paper)


def paired_t_interval(d: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The paired t-interval ``mean(d) +/- t_{(1 + level) / 2, n - 1} * sd(d) / sqrt(n)`` of the
    n per-seed differences ``d`` (module doc); NaN ends for fewer than two."""
    n = len(d)
    if n < 2:
        return math.nan, math.nan
    half = t_quantile(n, level) * float(d.std(ddof=1)) / math.sqrt(n)
    return float(d.mean()) - half, float(d.mean()) + half


def t_quantile(seeds: int, level: float = LEVEL) -> float:
    """``t_{(1 + level) / 2, seeds - 1}``: the Student t quantile of a two-sided ``level``
    interval over ``seeds`` paired seeds (every interval over seeds here uses it)."""
    return float(stats.t.ppf((1 + level) / 2, seeds - 1))


def standard_error(lo: float, hi: float, seeds: int) -> float:
    """``se`` of a paired t-interval ``[lo, hi]`` over ``seeds`` seeds: half its width over
    ``t_{0.975, n-1}``."""
    return (hi - lo) / 2 / t_quantile(seeds)


def power(delta: float, se: float, seeds: int) -> float:
    """Probability that the two-sided paired t-test over ``seeds`` seeds rejects 0 when the true
    difference is ``delta`` and the standard error ``se``."""
    df, nc, t = seeds - 1, delta / se, t_quantile(seeds)
    far_tail = np.nan_to_num(stats.nct.cdf(-t, df, nc))  # ~0, and nan from scipy at large nc
    return float(stats.nct.sf(t, df, nc) + far_tail)


def minimum_detectable_effect(se: float, seeds: int, target: float = POWER) -> float:
    """The smallest difference detected with probability ``target`` (module doc); ``nan`` for
    fewer than two seeds, 0 for ``se`` = 0."""
    if seeds < 2 or not np.isfinite(se):
        return float("nan")
    if se == 0:
        return 0.0
    upper = se * (t_quantile(seeds) + 1)
    while power(upper, se, seeds) < target:  # power grows with delta: widen until bracketed
        upper *= 2
    return float(optimize.brentq(lambda d: power(d, se, seeds) - target, 0.0, upper))


def seeds_needed(sd: float, effect: float, most: int = 1000) -> int | None:
    """The fewest paired seeds (>= 2) whose MDE at seed spread ``sd`` is at most ``effect``;
    ``None`` past ``most``."""
    if not effect > 0:
        raise ValueError(f"effect must be > 0, got {effect}")
    for n in range(2, most + 1):
        if minimum_detectable_effect(sd / math.sqrt(n), n) <= effect:
            return n
    return None


def p_value(
    diff: float, lo: float, hi: float, seeds: int, direction: int, margin: float | None = None
) -> float:
    """The p-value of the test behind a verdict word, read off the row's 95% interval ``[lo,
    hi]`` of ``diff = ours - theirs`` over ``seeds`` seeds (a t-interval ``diff +/- t * se``: the
    paired t, or the jackknife of the equal-pass@1 statistic), so that ``p < 1 - LEVEL`` exactly
    where the interval gives the word (module doc):

    - ``SUPERIOR``: ``p = 2 P(T > |diff| / se)``, ``T ~ t_{n-1}``: the two-sided test of 0
      (reproduced or contradicted: the interval clear of 0);
    - ``EQUIVALENT`` with margin ``m``: the smaller of ``2 max(P(T > (diff + m) / se), P(T <
      (diff - m) / se))`` (two one-sided tests, TOST: the interval inside ``[-m, m]``) and ``2
      min(P(T > (diff - m) / se), P(T < (diff + m) / se))`` (the interval wholly outside it);
    - ``NONINFERIOR`` with margin ``m``: ``2 min(P(T > (diff + m) / se), P(T < (diff + m) /
      se))``: the interval's lower end above ``-m``, or its upper end below it.

    NaN where the interval is not finite or there are fewer than two seeds (no test)."""
    if seeds < 2 or not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(diff)):
        return float("nan")
    se, df = standard_error(lo, hi, seeds), seeds - 1

    def above(x: float) -> float:  # P(T > x / se), with se = 0 read as a point mass
        return float(stats.t.sf(x / se, df)) if se > 0 else float(x < 0)

    def below(x: float) -> float:  # P(T < x / se)
        return float(stats.t.cdf(x / se, df)) if se > 0 else float(x > 0)

    if direction == SUPERIOR:
        return min(1.0, 2 * min(above(diff), below(diff)))
    m = float(margin if margin is not None else float("nan"))
    if not m >= 0:
        raise ValueError(f"a claim with direction {direction} needs a margin >= 0, got {margin}")
    if direction == EQUIVALENT:
        inside = 2 * max(above(diff + m), below(diff - m))
        outside = 2 * min(above(diff - m), below(diff + m))
        return min(1.0, inside, outside)
    return min(1.0, 2 * min(above(diff + m), below(diff + m)))


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family's ``p`` (NaN entries take no part and
    stay NaN): with the m finite ones sorted, ``p_(1) <= ... <= p_(m)``,

        p_holm_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)),

    so rejecting where ``p_holm < alpha`` controls the family-wise error rate at ``alpha``."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    if (p[tested] < 0).any() or (p[tested] > 1).any():
        raise ValueError(f"p-values must lie in [0, 1], got {p[tested].tolist()}")
    order = tested[np.argsort(p[tested], kind="stable")]  # ascending p
    m = len(order)
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])  # (m - j + 1) p_(j), j from 1
    out[order] = np.maximum.accumulate(scaled)
    return out


def holm_interval(
    diff: float, lo: float, hi: float, seeds: int, p: float, p_holm: float
) -> tuple[float, float]:
    """The row's interval widened to the level at which its own test decides as Holm's does:
    ``diff +/- t_{1 - a/2, n-1} se`` with ``a = (1 - LEVEL) p / p_holm`` (``p_holm >= p``), so
    the widened interval gives a word exactly where ``p_holm < 1 - LEVEL`` and the verdict rule
    (``verdict``) reads it as it reads the raw one. The raw interval where ``p`` is 0 or not
    finite (nothing to widen)."""
    if not (np.isfinite(p) and np.isfinite(p_holm)) or p <= 0 or p_holm <= p:
        return lo, hi
    level = 1 - (1 - LEVEL) * p / p_holm
    half = t_quantile(seeds, level) * standard_error(lo, hi, seeds)
    return diff - half, diff + half
