"""Null checks: every statistic that gives a verdict word, applied to GRPO against itself.

A statistic speaks only where GRPO compared with GRPO reads as no difference (docs/protocol.md,
"Null checks"). From the committed records of GRPO at the profile's main seeds (never trained
here: ``grpo_values`` reads the run ledger and raises ``MissingRecords`` naming what is
missing), each statistic is computed with GRPO's seeds standing for both sides, by one of three
nulls, each a list of draws ``(A, B)``: the fake arm's seeds ``A`` paired in order with the
reference's seeds ``B``:

- ``SELF``: GRPO against itself at the same seed, one draw of all ``n`` seeds (``A = B``). For
  a plain paired difference it is 0 by construction; for the training path it is GRPO's final
  policies against their own paths;
- ``SHIFT``: seed ``s`` against seed ``s + k mod n``, one draw per shift ``k = 1 .. n - 1``;
- ``SPLIT``: a random half of the seeds as a fake arm against the other half, ``DRAWS`` draws of
  ``n // 2`` disjoint pairs (``numpy.random.default_rng(SEED)`` permutations).

Per draw: the statistic's estimate, its interval as the claims compute it (the paired t of
``verdicts.paired_t_interval`` over the draw's pairs, or the jackknife of
``claim_stats.frontier_interval`` for ``pass@max at equal pass@1``) and its verdict word
(``verdicts.verdict``, without the honest-power gate, which can only turn a word into
*exploratory*: the rates are upper bounds). Per null (one row of ``null_table``):

- ``mean``: the mean over draws of ``estimate - at`` (``at``: the value the null is built at, 0
  or a margin), and ``lo``, ``hi``: its 95% interval, a leave-one-seed-out jackknife over GRPO's
  seeds (the whole null rebuilt without seed ``i``, ``theta_(i)``; ``se^2 = (n - 1) / n sum_i
  (theta_(i) - mean theta_(i))^2``, ``theta +/- t_{0.975, n-1} se``); for ``SELF`` of a paired
  difference it is exactly the paired t-interval;
- ``fpr``: the share of draws where the rule says a word it must not (``SUPERIOR``: *reproduced*
  or *contradicted*; at a margin: *reproduced*), nominally ``1 - verdicts.LEVEL`` = 5% (2.5% at a
  margin), and ``fpr_se = sqrt(fpr (1 - fpr) / draws)``, its binomial Monte-Carlo error. Draws
  share seeds, so ``fpr_se`` is the error given these ``n`` seeds, not the seed-to-seed error of
  the rate (``note`` says so per null).

A row passes when its interval covers 0 and ``fpr <= MAX_FPR``; a statistic passes when all its
rows do (``failing``). The statistics (``statistic_of`` maps a claim to its key): each plain
per-seed statistic of ``claim_stats`` (pass@1, pass@max, pass@max-pass@1, solved_only,
step_validity, diversity, entropy; their difference ``d = v_s - v_t``, solved_only's the counts
each way); ``pass@max at equal pass@1`` (x, y: pass@1, pass@max of GRPO's finals); the training
path (``frontier``; the gap of seed ``s``'s final policy on seed ``t``'s path), now and by round
two's rule (``OLD_PATH``, ``frontier.first_segment_value``: kept to show it failing); the
premise, per noise site: ``MATCHED``, the noise's pass@1 minus its matched temperature's per
checkpoint (the premise's own null: the matching must leave them equal), and ``SPLIT`` of the
temperature arm's pass@max; the margins' rules (an "about equal" claim's ``EQUIVALENT`` and a
"costs at most" claim's ``NONINFERIOR``): ``SPLIT`` differences shifted to ``at = +m`` and ``-m``
(only ``-m`` for non-inferiority), ``m`` the claim's margin share of the reference half's mean,
as ``results.judgement`` sizes it. The values are the in-distribution benchmarks' averages (the
primary endpoint; the premise: its benchmark), throughput from the training logs.

``simulated_null`` measures each rule's rate on independent normal draws, without records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from psnlib.replication.analysis import frontier
from psnlib.replication.analysis.claim import Claim
from psnlib.replication.analysis.claim_stats import (
    AtEqualPass1,
    frontier_differences,
    frontier_interval,
)
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.analysis.frontier import OnGRPOPath
from psnlib.replication.analysis.null_records import MIN_SEEDS, GRPOValues, grpo_values
from psnlib.replication.analysis.verdicts import (
    CONTRADICTED,
    EQUIVALENT,
    LEVEL,
    NONINFERIOR,
    REPRODUCED,
    SUPERIOR,
    paired_t_interval,
    t_quantile,
    verdict,
)
from psnlib.replication.plan.premise import POLICIES, premise
from psnlib.replication.plan.profiles import Profile

NOMINAL = 1 - LEVEL  # the rules' nominal false-positive rate: 5%
MAX_FPR = 0.07  # a statistic passes where its rule's false-positive rate is at most this
DRAWS = 2000  # draws of a SPLIT null
SEED = 0  # numpy seed of the SPLIT draws and of simulated_null
SELF, SHIFT, SPLIT = "GRPO vs itself, same seed", "seed-shifted GRPO", "split GRPO seeds"
MATCHED = "the premise's matched pass@1"
OLD_PATH = "pass@max on GRPO's training path, round two's rule (first segment)"
NOTES = {
    SELF: "one draw of every seed: fpr is whether the rule fires on it",
    SHIFT: "every shift, each of every seed: the draws share all seeds, so fpr_se (binomial, "
    "as if independent) understates the error",
    SPLIT: f"{DRAWS} random halves (numpy seed {SEED}): the draws share seeds, so fpr_se is the "
    "Monte-Carlo error given these seeds, not their seed-to-seed error",
    MATCHED: "one draw: the noise's pass@1 minus its matched temperature's, paired per checkpoint",
}


@dataclass(frozen=True)
class Pairs:
    """A paired difference ``d = values[a, b]`` per pair (seed ``a`` of the fake arm, ``b`` of the
    reference), its interval the paired t; ``reference``: the per-seed values a margin is a share
    of (None where no margin applies)."""

    values: np.ndarray  # (n, n)
    reference: np.ndarray | None = None  # (n,)

    @property
    def n(self) -> int:
        """How many seeds it pairs."""
        return len(self.values)

    def estimate(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(self.values[a, b].mean())

    def interval(self, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        return paired_t_interval(self.values[a, b])


@dataclass(frozen=True)
class AcrossSeeds:
    """``pass@max at equal pass@1`` (``claim_stats.AtEqualPass1``) of GRPO's finals ``x``
    (pass@1), ``y`` (pass@max) per seed: the fake arm's against the reference's frontier."""

    x: np.ndarray  # (n,)
    y: np.ndarray  # (n,)

    @property
    def n(self) -> int:
        """How many seeds it compares."""
        return len(self.x)

    def estimate(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(frontier_differences(self.x[a], self.y[a], self.x[b], self.y[b]).mean())

    def interval(self, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        return frontier_interval(self.x[a], self.y[a], self.x[b], self.y[b])


Kernel = Pairs | AcrossSeeds


@dataclass(frozen=True)
class Check:
    """One statistic's key (``statistic_of``), how it compares (``kernel``), its rule's
    ``direction``, and its nulls with the margin sign each is built at (0: none; +1, -1: at
    ``+m``, ``-m``, ``m = share x |reference half's mean|``)."""

    key: str
    kernel: Kernel
    direction: int = SUPERIOR
    nulls: tuple[tuple[str, int], ...] = ((SELF, 0), (SHIFT, 0), (SPLIT, 0))
    share: float = 0.0


def draws_of(null: str, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The draws ``(A, B)`` of ``null`` over positions ``0 .. n - 1`` (module doc)."""
    every = np.arange(n)
    if null in (SELF, MATCHED):
        return [(every, every)]
    if null == SHIFT:
        return [(every, np.roll(every, -k)) for k in range(1, n)]
    if null == SPLIT:
        rng, h = np.random.default_rng(SEED), n // 2
        return [(p[:h], p[h : 2 * h]) for p in (rng.permutation(n) for _ in range(DRAWS))]
    raise ValueError(f"null must be one of {(SELF, SHIFT, SPLIT, MATCHED)}, got {null!r}")


def null_mean(kernel: Kernel, null: str) -> tuple[float, float, float]:
    """The mean over ``null``'s draws of the estimate, with its leave-one-seed-out jackknife
    95% interval over the kernel's seeds (module doc)."""

    def theta(seeds: np.ndarray) -> float:
        return float(
            np.mean([kernel.estimate(seeds[a], seeds[b]) for a, b in draws_of(null, len(seeds))])
        )

    n = kernel.n
    every = np.arange(n)
    mean = theta(every)
    loo = np.array([theta(np.delete(every, i)) for i in range(n)])
    se = float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
    return mean, mean - t_quantile(n) * se, mean + t_quantile(n) * se


def wrong(word: str, direction: int) -> bool:
    """Whether ``word`` is a false positive on a null: a direction word where there is no
    difference (``SUPERIOR``), *reproduced* at the margin (``EQUIVALENT``, ``NONINFERIOR``)."""
    return word in (REPRODUCED, CONTRADICTED) if direction == SUPERIOR else word == REPRODUCED


def null_row(check: Check, null: str, sign: int) -> dict:
    """One row of ``null_table``: ``check``'s statistic on ``null`` at margin ``sign`` over its
    kernel's seeds (module doc)."""
    draws = draws_of(null, check.kernel.n)
    fired = []
    for a, b in draws:
        lo, hi = check.kernel.interval(a, b)
        margin, at = None, 0.0
        if check.direction != SUPERIOR:  # the reference half's margin, as results.judgement's
            margin = check.share * abs(float(check.kernel.reference[b].mean()))
            at = sign * margin
        fired.append(
            wrong(verdict(lo + at, hi + at, check.direction, len(a), margin), check.direction)
        )
    mean, lo, hi = null_mean(check.kernel, null)
    fpr = float(np.mean(fired))
    covers = bool(lo <= 0 <= hi)
    reasons = [] if covers else [f"mean {mean:+.2f} [{lo:+.2f}, {hi:+.2f}] excludes 0"]
    if fpr > MAX_FPR:
        reasons.append(f"false-positive rate {fpr:.1%} > {MAX_FPR:.0%}")
    where = {0: "0", 1: "+margin", -1: "-margin"}[sign]
    return {
        "statistic": check.key,
        "null": null,
        "at": where,
        "draws": len(draws),
        "pairs": len(draws[0][0]),
        "mean": mean,
        "lo": lo,
        "hi": hi,
        "fpr": fpr,
        "fpr_se": float(np.sqrt(fpr * (1 - fpr) / len(draws))),
        "passes": covers and fpr <= MAX_FPR,
        "reason": "; ".join(reasons) or "passes",
        "note": NOTES[null],
    }


def premise_key(site: str) -> str:
    """The key of the premise's statistic at noise ``site``."""
    return f"pass@max under noise vs the matched temperature ({site})"


def statistic_of(claim: Claim) -> str:
    """The ``statistic`` of ``null_table`` whose rows decide whether ``claim``'s verdict word may
    stand: its statistic's name, or the premise's at its site, or its margin's rule."""
    if claim.experiment is premise:
        return premise_key(next(s for s, pair in POLICIES.items() if claim.ours in pair))
    name = claim.statistic.name
    if claim.direction == EQUIVALENT:
        return f"{name}, about equal within {claim.margin:.2%} (equivalence)"
    if claim.direction == NONINFERIOR:
        return f"{name}, at most {claim.margin:.0%} below (non-inferiority)"
    return name


def differences(values: pd.Series | np.ndarray) -> np.ndarray:
    """``[s, t] = v_s - v_t`` of per-seed values."""
    v = np.asarray(values, dtype=float)
    return v[:, None] - v[None, :]


def path_gaps(
    paths: pd.DataFrame, gap: Callable[[pd.DataFrame, float, float], float]
) -> np.ndarray:
    """``[s, t]``: the gap of seed ``s``'s GRPO final policy ``(x_s, y_s)`` on seed ``t``'s path,
    ``gap(path_t, x_s, y_s)``, seeds ascending."""
    finals = frontier.final_points(paths)
    by_seed = dict(iter(paths.groupby("seed")))
    return np.array(
        [
            [gap(by_seed[t], x, y) for t in finals["seed"]]
            for x, y in finals[["pass1", "passmax"]].to_numpy()
        ]
    )


def new_path_gap(path: pd.DataFrame, x: float, y: float) -> float:
    """``frontier.frontier_gap`` of one point ``(x, y)`` on one seed's path."""
    seed = path["seed"].iloc[0]
    arm = pd.DataFrame({"seed": [seed], "pass1": [x], "passmax": [y]})
    return float(frontier.frontier_gap(path, arm)["gap"].iloc[0])


def old_path_gap(path: pd.DataFrame, x: float, y: float) -> float:
    """Round two's gap: ``y - frontier.first_segment_value(path, x)``."""
    return y - frontier.first_segment_value(path, x)


def checks_of(claim: Claim, values: GRPOValues) -> list[Check]:
    """The checks of ``claim``'s statistic (``statistic_of``) on GRPO's ``values``."""
    key, stat, per_seed = statistic_of(claim), claim.statistic, values.per_seed
    if claim.experiment is premise:
        site = values.site(next(s for s, pair in POLICIES.items() if claim.ours in pair))
        matched = site["noise_pass1"].to_numpy()[:, None] - site["temperature_pass1"].to_numpy()
        return [
            Check(key, Pairs(matched), nulls=((MATCHED, 0),)),
            Check(key, Pairs(differences(site["temperature_passmax"])), nulls=((SPLIT, 0),)),
        ]
    if claim.direction != SUPERIOR:
        v = per_seed[stat.name].to_numpy(dtype=float)
        signs = (1, -1) if claim.direction == EQUIVALENT else (-1,)
        nulls = tuple((SPLIT, sign) for sign in signs)
        return [Check(key, Pairs(differences(v), v), claim.direction, nulls, claim.margin)]
    if isinstance(stat, AtEqualPass1):
        x, y = (per_seed[s.name].to_numpy(dtype=float) for s in (stat.pass1, stat.passk))
        return [Check(key, AcrossSeeds(x, y))]
    if isinstance(stat, OnGRPOPath):
        return [
            Check(key, Pairs(path_gaps(values.paths, new_path_gap))),
            Check(OLD_PATH, Pairs(path_gaps(values.paths, old_path_gap))),
        ]
    if stat.name == "solved_only":
        return [Check(key, Pairs(values.solved_only - values.solved_only.T))]
    if stat.name not in per_seed:
        raise ValueError(f"no null check for the statistic {stat.name!r}; have {list(per_seed)}")
    return [Check(key, Pairs(differences(per_seed[stat.name])))]


def label(key: str, profile: Profile) -> str:
    """A key as a row shows it: ``max`` replaced by the largest k (``Statistic.label``)."""
    return key.replace("max", str(profile.ks[-1])) if "pass@" in key else key


def table_from(
    values: GRPOValues, profile: Profile, claims: tuple[Claim, ...] = CLAIMS
) -> pd.DataFrame:
    """``null_table`` of GRPO's ``values``: every check of every claim's statistic, once."""
    done: set[str] = set()
    rows = []
    for claim in claims:
        if statistic_of(claim) in done:
            continue
        for check in checks_of(claim, values):  # each over its own seeds (the premise: its own)
            done.add(check.key)
            rows += [null_row(check, null, sign) for null, sign in check.nulls]
    table = pd.DataFrame(rows)
    table.insert(1, "label", [label(k, profile) for k in table["statistic"]])
    return table


def null_table(profile: Profile, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """One row per statistic of ``claims`` and null, from GRPO's committed records at
    ``profile`` (``null_records.grpo_values``; ``MissingRecords`` where one is missing):
    statistic (``statistic_of``), label, null, at, draws, pairs, mean, lo, hi, fpr, fpr_se,
    passes, reason, note (module doc). A profile with fewer main seeds than the nulls need
    (``MIN_SEEDS``, the smoke profile) checks nothing: one row per statistic that fails, so
    that none of them gives a verdict word there."""
    if len(profile.seeds) < MIN_SEEDS:
        return unchecked(profile, claims)
    return table_from(grpo_values(profile), profile, claims)


def unchecked(profile: Profile, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """``null_table``'s rows where the profile's main seeds are too few to build a null: every
    statistic of ``claims`` once, not passing, with the reason."""
    keys = list(dict.fromkeys(statistic_of(claim) for claim in claims))
    reason = (
        f"not checked: the {profile.name} profile has {len(profile.seeds)} main seed(s), the "
        f"nulls need at least {MIN_SEEDS}"
    )
    nan = float("nan")
    return pd.DataFrame(
        {"statistic": key, "label": label(key, profile), "null": "none", "at": "0"}
        | {"draws": 0, "pairs": 0, "mean": nan, "lo": nan, "hi": nan, "fpr": nan}
        | {"fpr_se": nan, "passes": False, "reason": reason, "note": ""}
        for key in keys
    )


def failing(table: pd.DataFrame) -> dict[str, str]:
    """Statistic -> why it fails (its failing rows' nulls and reasons), for those that fail."""
    bad = table[~table["passes"].astype(bool)]
    return {
        key: "; ".join(
            f"{r['null']} (at {r['at']}): {r['reason']}" for r in rows.to_dict("records")
        )
        for key, rows in bad.groupby("statistic", sort=False)
    }


def simulated_null(
    direction: int,
    seeds: int,
    spread: float,
    margin: float | None = None,
    across: bool = False,
    draws: int = DRAWS,
    seed: int = SEED,
) -> pd.DataFrame:
    """A verdict rule's false-positive rate on simulated nulls, without records: ``draws``
    independent sets of ``seeds`` per-seed differences ``~ N(at, spread^2)``, ``at`` 0 for
    ``SUPERIOR``, ``+margin`` and ``-margin`` for ``EQUIVALENT``, ``-margin`` for
    ``NONINFERIOR``, each judged by ``verdicts.verdict`` of its paired t-interval; with
    ``across``, ``pass@max at equal pass@1``'s jackknife rule instead (``SUPERIOR``): pass@1
    ``x ~ N(0, spread^2)`` and pass@max ``y = -x + N(0, spread^2)`` for each side alike. One row
    per ``at``: draws, fpr (``wrong`` words), fpr_se (binomial: the draws are independent)."""
    if seeds < 3 or not spread > 0 or draws < 1:
        raise ValueError(f"need seeds >= 3, spread > 0, draws >= 1; got {seeds}, {spread}, {draws}")
    if across and direction != SUPERIOR:
        raise ValueError("the equal-pass@1 statistic's rule is a superiority rule (direction 1)")
    signs = {SUPERIOR: (0,), EQUIVALENT: (1, -1), NONINFERIOR: (-1,)}[direction]
    if direction != SUPERIOR and not (margin or 0) > 0:
        raise ValueError(f"a margin rule needs a margin > 0, got {margin}")
    rng, rows = np.random.default_rng(seed), []
    for sign in signs:
        at = sign * (margin or 0.0)
        fired = 0
        for _ in range(draws):
            if across:
                x = rng.normal(0.0, spread, (2, seeds))
                y = -x + rng.normal(0.0, spread, (2, seeds))
                lo, hi = frontier_interval(x[0], y[0], x[1], y[1])
            else:
                lo, hi = paired_t_interval(rng.normal(at, spread, seeds))
            fired += wrong(verdict(lo, hi, direction, seeds, margin), direction)
        fpr = fired / draws
        rows.append(
            {"at": at, "draws": draws, "fpr": fpr, "fpr_se": np.sqrt(fpr * (1 - fpr) / draws)}
        )
    return pd.DataFrame(rows)
