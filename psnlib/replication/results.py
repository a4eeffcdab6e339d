"""RESULTS.md: claim by claim, the papers' numbers beside ours, with an interval and a verdict.

Each ``Claim`` names the experiment (``psnlib.replication.experiments.PLANS``) that tests it, the
policy the paper says comes out ahead (``ours``), the one it is compared with (``theirs``) and a
statistic. ``evaluate_claims`` loads the experiments' cached runs and evaluations (what ``make
reproduce`` prepared), computes the statistic per training seed (``psnlib.replication.claim_stats``:
pass@k, shares, entropy from the problems table; throughput from the training logs) and the
difference ``ours - theirs`` with a 95% interval:

- with two or more seeds, a t-interval over the per-seed differences (seeds are paired: the same
  seed gives both arms the same initial data order; a policy with one evaluation, the base
  policy, is compared with every seed of the other);
- with one seed, a paired bootstrap over problems (resampled within each benchmark). It covers
  problem sampling only, not seed-to-seed spread, and the verdict says so.

The verdict (``psnlib.replication.verdicts``) follows from the interval: *reproduced*,
*contradicted*, *inconclusive*, or *exploratory* for one seed; beside it the minimum detectable
effect at 80% power from the observed spread. A claim whose policies the profile does not train (a
third base model where the profile has one other) gets the status ``NOT_RUN`` and the reason, no
numbers. ``psnlib.replication.results_text.results_markdown`` renders the table and a discussion
computed from it (nothing in it is written once for every profile); notebook 15 writes it to
``figures/<profile>/RESULTS.md``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from psnlib.replication.claim_stats import (
    NOT_RUN,
    STATS,
    NotRun,
    cached_logs,
    label,
    number,
    readable,
    resolve,
    seed_values,
    unit_of,
)
from psnlib.replication.claims import CLAIMS, Claim
from psnlib.replication.experiments import WEAK_PREFIX, benchmarks_of, plan, run
from psnlib.replication.profiles import Profile, get_profile
from psnlib.replication.results_text import (
    claims_markdown,
    discussion,
    results_markdown,
    timing_summary,
    write_results,
)
from psnlib.replication.summaries import AVERAGE, with_average
from psnlib.replication.verdicts import minimum_detectable_effect, standard_error, verdict

__all__ = [
    "check_claim",
    "claims_markdown",
    "discussion",
    "evaluate_claims",
    "headline_curves",
    "judge",
    "judgement",
    "not_run",
    "results_markdown",
    "timing_summary",
    "write_results",
]

RESAMPLES = 2000  # bootstrap resamples of the one-seed intervals
LEVEL = 0.95


def _bootstrap(both: pd.DataFrame, seed: int = 0) -> tuple[float, float]:
    """Interval of the mean-over-benchmarks difference, problems resampled within benchmarks."""
    rng = np.random.default_rng(seed)
    means = np.zeros(RESAMPLES)
    groups = list(both.groupby("benchmark"))
    for _, table in groups:
        d = (table["value_a"] - table["value_b"]).to_numpy()  # (P,)
        means += d[rng.integers(0, len(d), (RESAMPLES, len(d)))].mean(axis=1) / len(groups)
    tail = 100 * (1 - LEVEL) / 2
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def _t_interval(d: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.5 + LEVEL / 2, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return float(d.mean() - half), float(d.mean() + half)


def judgement(claim: Claim, lo: float, hi: float, seeds: int, theirs: float) -> dict:
    """The columns that follow from a claim's interval (``psnlib.replication.verdicts``): the
    paper's effect, the equivalence margin (the statistic's unit; "about equal" claims only), the
    minimum detectable effect at 80% power and the verdict; for a claim without runs (0 seeds)
    the status ``NOT_RUN`` instead of a verdict."""
    margin = claim.margin * abs(theirs) if claim.direction == 0 and seeds else float("nan")
    se = standard_error(lo, hi, seeds) if seeds > 1 else float("nan")
    return {
        "effect": float("nan") if claim.effect is None else claim.effect,
        "margin": margin,
        "mde": minimum_detectable_effect(se, seeds),
        "verdict": verdict(lo, hi, claim.direction, seeds, margin=margin) if seeds else NOT_RUN,
    }


def judge(table: pd.DataFrame, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """``table`` (rows of ``check_claim``) with the claim's own columns (its ``paper`` text and
    the judgement) computed anew from each row's interval and the claim of the same name, e.g.
    after the verdict rules or the claims' texts changed."""
    by_name = {c.name: c for c in claims}
    missing = sorted(set(table["claim"]) - set(by_name))
    if missing:
        raise ValueError(f"no claim named {missing}; known: {sorted(by_name)}")
    rows = []
    for r in table.to_dict("records"):
        claim = by_name[r["claim"]]
        theirs = r["value_theirs"]
        rows.append(
            {
                **r,
                "paper": claim.paper,
                **judgement(claim, r["lo"], r["hi"], int(r["seeds"]), theirs),
            }
        )
    return pd.DataFrame(rows)


def _row(claim: Claim, statistic: str, benchmarks: str, note: str = "") -> dict:
    """The columns of a row that the claim alone gives."""
    return {
        "claim": claim.name,
        "paper": claim.paper,
        "ours": claim.ours,
        "theirs": claim.theirs,
        "statistic": statistic,
        "unit": unit_of(claim.statistic),
        "benchmarks": benchmarks,
        "note": note,
    }


def not_run(claim: Claim, profile: Profile, reason: str) -> dict:
    """The row of a claim that ``profile`` has no runs for: no numbers, the status ``NOT_RUN``
    and the ``reason`` in ``note``."""
    nan = float("nan")
    readable_claim = replace(claim, ours=readable(claim.ours), theirs=readable(claim.theirs))
    numbers = dict(seeds=0, value_ours=nan, value_theirs=nan, diff=nan, lo=nan, hi=nan)
    return {
        **_row(readable_claim, label(claim.statistic, profile), "", reason),
        **numbers,
        **judgement(claim, nan, nan, 0, nan),
        "notebook": claim.notebook,
    }


def check_claim(
    claim: Claim, problems: pd.DataFrame, profile: Profile, logs: pd.DataFrame | None = None
) -> dict:
    """Our side of one claim from the experiment's per-problem table (and its training
    ``logs``, for a per-run statistic: ``psnlib.replication.claim_stats``; read from the cached runs
    where not given): each policy's statistic (mean
    over seeds; for ``solved_only``, problems solved only by it), the difference, its interval,
    the verdict and the benchmarks averaged. Percent for pass@k and shares, a count for
    ``solved_only``. A claim whose policies the profile lacks gets the row of ``not_run``."""
    names = profile.benchmarks if claim.kind == "all" else benchmarks_of(profile, claim.kind)
    problems = problems[problems["benchmark"].isin(names)]
    try:
        claim = resolve(claim, profile)
        if logs is None and STATS[claim.statistic].per_run is not None:
            logs = cached_logs(claim, profile, tuple(sorted(set(problems["seed"]))))
    except NotRun as reason:
        return not_run(claim, profile, str(reason))
    values, both = seed_values(claim, problems, logs, profile)
    d = (values["value_a"] - values["value_b"]).to_numpy()  # (seeds,), in the statistic's unit
    if len(d) > 1:
        lo, hi = _t_interval(d)
    elif both is None or claim.statistic == "solved_only":
        lo = hi = float("nan")
    else:
        lo, hi = (x * STATS[claim.statistic].scale for x in _bootstrap(both))
    seeds = len(d)
    theirs = float(values["value_b"].mean())
    averaged = "" if both is None else ", ".join(b for b in names if b in set(both["benchmark"]))
    return {
        **_row(claim, label(claim.statistic, profile), averaged or "training runs"),
        "seeds": seeds,
        "value_ours": float(values["value_a"].mean()),
        "value_theirs": theirs,
        "diff": float(d.mean()),
        "lo": lo,
        "hi": hi,
        **judgement(claim, lo, hi, seeds, theirs),
        "notebook": claim.notebook,
    }


def evaluate_claims(
    profile: str | Profile = "cpu", claims: tuple[Claim, ...] = CLAIMS
) -> pd.DataFrame:
    """Every claim tested on the experiments' runs (trained and evaluated now if not cached):
    one row per claim, the columns of ``check_claim``; a claim whose policies the profile's
    experiment does not train gets the row of ``not_run``, and nothing is trained for it."""
    profile = get_profile(profile)
    tables: dict[str, dict[str, pd.DataFrame]] = {}
    rows = []
    for claim in claims:
        try:
            resolved = resolve(claim, profile)
            labels = {v.label for v in plan(claim.experiment, profile).variants}
            absent = [p for p in (resolved.ours, resolved.theirs) if p not in labels]
            if absent:
                raise NotRun(f"the {claim.experiment} experiment at this profile has no {absent}")
        except NotRun as reason:
            rows.append(not_run(claim, profile, str(reason)))
            continue
        if claim.experiment not in tables:
            tables[claim.experiment] = run(claim.experiment, profile, progress=False)
        t = tables[claim.experiment]
        rows.append(check_claim(resolved, t["problems"], profile, t.get("logs")))
    return pd.DataFrame(rows)


def _number(x: float, statistic: str) -> str:
    """``x`` as RESULTS.md shows a value of ``statistic``
    (``psnlib.replication.claim_stats.number``)."""
    return number(x, statistic)


def headline_curves(profile: str | Profile = "cpu") -> pd.DataFrame:
    """pass@k averaged over the in-distribution benchmarks, per policy and seed: base, GRPO,
    PSN fixed and adaptive (notebook 03) and GRPO + weak prefix (notebook 09)."""
    main = run("main_results", profile, progress=False)["curves"]
    weak = run("weak_prefix", profile, progress=False)["curves"]
    curves = with_average(pd.concat([main, weak[weak.policy == WEAK_PREFIX.label]]))
    return curves[curves["benchmark"] == AVERAGE].reset_index(drop=True)
