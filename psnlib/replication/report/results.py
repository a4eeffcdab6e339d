"""RESULTS.md: claim by claim, the papers' numbers beside ours, with an interval and a verdict.

Each ``Claim`` holds the experiment that tests it, the policy the paper says comes out ahead
(``ours``), the one it is compared with (``theirs``) and a statistic. ``evaluate_claims`` runs the
experiments (loading the cached runs and evaluations that ``make reproduce`` prepared), and
``check_claim`` computes the statistic per training seed from the tables the experiment returns
(``psnlib.replication.analysis.claim_stats``: pass@k, shares, entropy from the problems table;
throughput from the training logs; pass@k at equal pass@1 from each seed's pass@1 and pass@k) and
the difference ``ours - theirs`` with a 95% interval:

- with two or more seeds, a t-interval over the per-seed differences (seeds are paired: the same
  seed gives both arms the same initial data order; a policy with one evaluation, the base
  policy, is compared with every seed of the other), or the statistic's own interval where it
  has one (pass@k at equal pass@1: a jackknife over seeds that refits the frontier);
- with one seed, a paired bootstrap over problems (resampled within each benchmark). It covers
  problem sampling only, not seed-to-seed spread, and the verdict says so.

The verdict (``psnlib.replication.analysis.verdicts``) follows from the interval: *reproduced*,
*contradicted*, *smaller than reported*, *inconclusive*, or *exploratory* for one seed, against 0,
an equivalence margin or a non-inferiority margin as the claim's direction says; beside it the
minimum detectable effect at 80% power from the observed spread. Sizes are on this testbed's scale:
*smaller than reported* is judged against the paper's effect scaled to the headroom where it is a
pass@k with the paper's reference value (the raw effect otherwise), and a claim whose MDE is not
below its effect of interest (that scaled effect, the size the claim states it must see where the
paper gives none, or the margin) is *exploratory*, its interval shown. A claim's ``exclude_seeds``
(at a profile, the seeds that framed it) are left out of its statistic; where the profile has no
other seeds the claim is measured on them and stays *exploratory* (post hoc, ``Claim.post_hoc``). A
claim whose policies the profile does not train (a third base model where the profile has one other)
gets the status ``NOT_RUN`` and the reason, no numbers; one whose reference solves no problem at any
seed the status ``NOT_COMPARABLE`` (a collapsed baseline is no reference); one whose statistic fails
its null check (``psnlib.replication.analysis.nulls``, passed as ``nulls``) the status
``NULL_FAILED``, its numbers shown.

Error control: each row with a verdict word carries the p-value of the test behind it
(``verdicts.p_value``) and, within its claim's family (``Claim.family``), Holm's adjusted p and the
verdict the rule gives on the interval widened to Holm's level (``verdicts.holm_interval``):
``p_holm`` and ``verdict_holm`` (``with_holm``). Statuses, post-hoc and one-seed rows take no part
in the correction and keep their word.
``psnlib.replication.report.results_page.results_markdown`` renders the page (the confirmatory
claims first, nothing in it written once for every profile); notebook 15 writes it to
``figures/<profile>/RESULTS.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication.analysis import premise_tables, summaries
from psnlib.replication.analysis.claim import (
    NOT_COMPARABLE,
    NOT_RUN,
    NULL_FAILED,
    STATUSES,
    Claim,
    NotRun,
)
from psnlib.replication.analysis.claim_stats import seed_means, spans
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.analysis.nulls import statistic_of
from psnlib.replication.analysis.verdicts import (
    EXPLORATORY,
    effect_of_interest,
    headroom_scaled,
    holm,
    holm_interval,
    minimum_detectable_effect,
    p_value,
    paired_t_interval,
    standard_error,
    verdict,
)
from psnlib.replication.plan.experiments import (
    Plan,
    benchmarks_of,
)
from psnlib.replication.plan.premise import PremisePlan
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.report.results_page import Sections, results_markdown, write_results
from psnlib.replication.report.results_tables import claims_markdown
from psnlib.replication.report.results_text import code_differences, discussion
from psnlib.replication.report.results_time import timing_summary

__all__ = [
    "Sections",
    "check_claim",
    "claim_row",
    "claims_markdown",
    "code_differences",
    "discussion",
    "evaluate_claims",
    "judge",
    "judgement",
    "not_run",
    "results_markdown",
    "timing_summary",
    "with_holm",
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


def on_this_scale(size: float | None, theirs: float, paper_theirs: float | None) -> float:
    """A size the paper states in its points (an effect, or a claim's ``interest``) on this
    testbed's scale: scaled to the headroom
    (``psnlib.replication.analysis.verdicts.headroom_scaled``) where the claim carries the paper's
    reference value (a pass@k), as it is otherwise; NaN for none."""
    if size is None:
        return float("nan")
    if paper_theirs is None:
        return float(size)
    return headroom_scaled(size, theirs, paper_theirs)


def judgement(
    claim: Claim,
    lo: float,
    hi: float,
    seeds: int,
    theirs: float,
    diff: float = float("nan"),
    worded: tuple[float, float] | None = None,
) -> dict:
    """The columns that follow from a claim's interval (``psnlib.replication.analysis.verdicts``):
    the claim's direction, the paper's effect (and, for a pass@k, scaled to this testbed's
    headroom), the margin (the statistic's unit: ``claim.margin`` x theirs' value; equivalence and
    non-inferiority claims only), the effect of interest, the minimum detectable effect at 80%
    power, the p-value of the test behind the word (``verdicts.p_value``, from ``diff``, the
    interval's centre) and the verdict; for a claim without runs (0 seeds) the status ``NOT_RUN``
    instead of a verdict. ``worded``: another interval to read the word from (Holm's widened one,
    ``with_holm``), the MDE and p still from ``[lo, hi]``.

    Size on this testbed's scale: *smaller than reported* is judged against the scaled effect
    where there is one (a pass@k with the paper's reference value), the raw effect otherwise.
    Honest power: the effect of interest is that effect, or, where the paper reports none for the
    comparison, ``claim.interest`` on the same scale, or the margin; where the MDE is not below it
    the verdict is *exploratory*."""
    nan = float("nan")
    margin = claim.margin * abs(theirs) if claim.margin is not None and seeds else nan
    se = standard_error(lo, hi, seeds) if seeds > 1 else nan
    mde = minimum_detectable_effect(se, seeds)
    scaled = nan
    if claim.effect is not None and claim.paper_theirs is not None and seeds:
        scaled = headroom_scaled(claim.effect, theirs, claim.paper_theirs)
    size = on_this_scale(claim.effect, theirs, claim.paper_theirs)  # the size word's
    wanted = (
        size
        if claim.effect is not None
        else on_this_scale(claim.interest, theirs, claim.paper_theirs)
    )  # what the seeds must see
    interest = effect_of_interest(claim.direction, margin, wanted)
    word_lo, word_hi = worded or (lo, hi)
    word = verdict(
        word_lo,
        word_hi,
        claim.direction,
        seeds,
        margin=margin,
        effect=size,
        mde=mde,
        interest=interest,
    )
    return {
        "direction": claim.direction,
        "effect": nan if claim.effect is None else claim.effect,
        "effect_scaled": scaled,
        "margin": margin,
        "interest": interest if seeds else nan,
        "mde": mde,
        "p": p_value(diff, lo, hi, seeds, claim.direction, margin),
        "verdict": word if seeds else NOT_RUN,
    }


def with_holm(table: pd.DataFrame, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """``table`` (rows of ``check_claim``) with ``p_holm`` and ``verdict_holm``: within each
    family (column ``family``), Holm's adjusted p of the rows whose verdict is a word from an
    interval over seeds (``verdicts.holm``; statuses, post-hoc rows and one-seed rows take no
    part: NaN, and their word unchanged), and the verdict the rule gives on the interval widened
    to the level at which the row's own test decides as Holm's (``verdicts.holm_interval``)."""
    by_name = {c.name: c for c in claims}
    table = table.copy()
    tested = (
        ~table["verdict"].isin(STATUSES)
        & ~table["post_hoc"].astype(bool)
        & (table["seeds"] >= 2)
        & np.isfinite(table["p"].astype(float))
    )
    table["p_holm"] = np.nan
    for _, rows in table[tested].groupby("family"):
        table.loc[rows.index, "p_holm"] = holm(rows["p"].to_numpy(dtype=float))
    words = []
    for r in table.to_dict("records"):
        if not np.isfinite(r["p_holm"]):
            words.append(r["verdict"])
            continue
        seeds = int(r["seeds"])
        widened = holm_interval(r["diff"], r["lo"], r["hi"], seeds, r["p"], r["p_holm"])
        claim = by_name[r["claim"]]
        again = judgement(claim, r["lo"], r["hi"], seeds, r["value_theirs"], r["diff"], widened)
        words.append(again["verdict"])
    table["verdict_holm"] = words
    return table


def judge(table: pd.DataFrame, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """``table`` (rows of ``check_claim``) with the claim's own columns (its ``paper`` text, its
    family and the judgement) computed anew from each row's interval and the claim of the same
    name, e.g. after the verdict rules or the claims' texts changed, then Holm's columns
    (``with_holm``). A row's status (``STATUSES``) and a post-hoc row's *exploratory* stay."""
    by_name = {c.name: c for c in claims}
    missing = sorted(set(table["claim"]) - set(by_name))
    if missing:
        raise ValueError(f"no claim named {missing}; known: {sorted(by_name)}")
    rows = []
    for r in table.to_dict("records"):
        claim = by_name[r["claim"]]
        post_hoc = bool(r.get("post_hoc", False))
        diff = r.get("diff", (r["lo"] + r["hi"]) / 2)  # a t-interval's centre
        judged = judgement(claim, r["lo"], r["hi"], int(r["seeds"]), r["value_theirs"], diff)
        if r.get("verdict") in STATUSES or post_hoc:
            judged["verdict"] = r["verdict"]
        rows.append(
            {**r, "paper": claim.described, "family": claim.family, "post_hoc": post_hoc}
            | {"diff": diff, **judged}
        )
    return with_holm(pd.DataFrame(rows), claims)


def _row(
    claim: Claim, profile: Profile, ours: str, theirs: str, benchmarks: str, note: str = ""
) -> dict:
    """The columns of a row that the claim and its policies' labels give."""
    return {
        "claim": claim.name,
        "family": claim.family,
        "paper": claim.described,
        "ours": ours,
        "theirs": theirs,
        "statistic": claim.statistic.label(profile),
        "unit": claim.statistic.unit,
        "benchmarks": benchmarks,
        "note": note,
    }


def not_run(claim: Claim, profile: Profile, reason: str) -> dict:
    """The row of a claim that ``profile`` has no runs for: no numbers, the status ``NOT_RUN``
    and the ``reason`` in ``note``."""
    nan = float("nan")
    numbers = dict(seeds=0, value_ours=nan, value_theirs=nan, diff=nan, lo=nan, hi=nan)
    return {
        **_row(claim, profile, claim.ours.label, claim.theirs.label, "", reason),
        **numbers,
        **judgement(claim, nan, nan, 0, nan),
        "post_hoc": False,
        "notebook": claim.notebook,
    }


def collapsed(problems: pd.DataFrame, policy: str, seeds: pd.Index) -> bool:
    """Whether ``policy`` solves no problem of ``problems`` (none of its samples correct) at
    any of ``seeds``: a reference that failed, against which no claim is judged."""
    mine = problems[(problems["policy"] == policy) & problems["seed"].isin(seeds)]
    return bool(len(mine)) and not (mine["correct"] > 0).any()


def check_claim(
    claim: Claim,
    problems: pd.DataFrame,
    profile: Profile,
    logs: pd.DataFrame | None = None,
    nulls: Mapping[str, str] | None = None,
) -> dict:
    """Our side of one claim from the tables its experiment returns: the per-problem ``problems``
    and, for a per-run statistic, the training ``logs``
    (``psnlib.replication.analysis.claim_stats``): each policy's statistic (mean over seeds; for
    ``solved_only``, problems solved only by it), the difference, its interval, the verdict and the
    benchmarks averaged. Percent for pass@k and shares, a count for ``solved_only``. A claim whose
    policies the profile lacks, or whose statistic finds no records to read (GRPO's training path,
    read from the run ledger and never computed here), gets the row of ``not_run``; one whose
    reference solves nothing at its seeds the status ``NOT_COMPARABLE``; one whose statistic is in
    ``nulls`` (``psnlib.replication.analysis.nulls.statistic_of(claim)`` -> why it fails its null
    check, ``psnlib.replication.analysis.nulls.failing``) the status ``NULL_FAILED``, the reason in
    its note. A post-hoc claim (``Claim.post_hoc``, or every seed read framed it) is measured on
    the seeds that framed it and is *exploratory*."""
    names = profile.benchmarks if claim.kind == "all" else benchmarks_of(profile, claim.kind)
    problems = problems[problems["benchmark"].isin(names)]
    try:
        ours, theirs = claim.sides(profile)
    except NotRun as reason:
        return not_run(claim, profile, str(reason))
    stat = claim.statistic
    framed = claim.excluded(profile)
    read = set(problems["seed"])  # post hoc too where every seed read framed it
    post_hoc = claim.post_hoc(profile) or bool(framed) and bool(read) and read <= set(framed)
    try:
        measured = stat.seed_values(
            problems, logs, ours.label, theirs.label, profile, () if post_hoc else framed
        )
    except NotRun as reason:  # records the statistic reads are not there
        return not_run(claim, profile, str(reason))
    values, both = measured.values, measured.paired
    d = (values["value_a"] - values["value_b"]).to_numpy()  # (seeds,), in the statistic's unit
    if measured.interval is not None:
        lo, hi = measured.interval
    elif len(d) > 1:
        lo, hi = paired_t_interval(d)
    elif both is None or stat.per_seed is not seed_means:  # the bootstrap resamples a mean
        lo = hi = float("nan")
    else:
        lo, hi = (x * stat.scale for x in _bootstrap(both))
    seeds = len(d)
    theirs_value = float(values["value_b"].mean())
    averaged = "" if both is None else ", ".join(b for b in names if b in set(both["benchmark"]))
    notes = [measured.note] if measured.note else []
    diff = float(d.mean()) if seeds else float("nan")
    judged = judgement(claim, lo, hi, seeds, theirs_value, diff)
    if framed and post_hoc:
        notes.insert(
            0,
            f"post hoc: exploratory at the seeds that framed it ({spans(framed)}) until fresh "
            "seeds confirm it",
        )
        judged["verdict"] = EXPLORATORY
    elif framed:
        notes.insert(0, f"seeds that framed the claim left out: {spans(framed)}")
    if collapsed(problems, theirs.label, values.index):
        notes.insert(
            0, f"{theirs.label} solves no problem at any seed: a collapsed policy, no reference"
        )
        judged["verdict"] = NOT_COMPARABLE
    elif nulls and (key := statistic_of(claim)) in nulls:
        notes.insert(0, f"the statistic ({key}) fails its null check: {nulls[key]}")
        judged["verdict"] = NULL_FAILED
    return {
        **_row(
            claim, profile, ours.label, theirs.label, averaged or "training runs", "; ".join(notes)
        ),
        "seeds": seeds,
        "value_ours": float(values["value_a"].mean()),
        "value_theirs": theirs_value,
        "diff": diff,
        "lo": lo,
        "hi": hi,
        **judged,
        "post_hoc": post_hoc,
        "notebook": claim.notebook,
    }


def claim_row(
    claim: Claim,
    profile: Profile,
    tables: Callable[[], dict[str, pd.DataFrame]],
    nulls: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``check_claim``'s row of ``claim`` on the tables ``tables()`` returns (read only where the
    profile trains both of its policies), or ``not_run``'s row where it does not, or where the
    tables hold no run of one side (seeds read that it does not run at)."""
    try:
        sides = claim.sides(profile)
    except NotRun as reason:
        return not_run(claim, profile, str(reason))
    t = tables()
    have = set(t["problems"].get("policy", ()))  # an empty table: no column
    absent = [v.label for v in sides if v.label not in have]
    if absent:
        return not_run(claim, profile, f"no run of {absent} at the seeds read")
    return check_claim(claim, t["problems"], profile, t.get("logs"), nulls)


def evaluate_claims(
    profile: Profile,
    claims: tuple[Claim, ...] = CLAIMS,
    nulls: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every claim tested on its experiment's tables (``claim_row``; each experiment read once),
    one row per claim, the columns of ``check_claim`` (``nulls``: the statistics that fail their
    null check, and why) and Holm's within each family (``with_holm``); a claim whose policies the
    profile's experiment does not train gets the row of ``not_run``, and nothing is read for it."""
    read: dict[Callable[[Profile], Plan], dict[str, pd.DataFrame]] = {}  # per experiment

    def tables(experiment: Callable[[Profile], Plan]) -> dict[str, pd.DataFrame]:
        if experiment not in read:
            plan = experiment(profile)
            reader = premise_tables.read if isinstance(plan, PremisePlan) else summaries.read
            read[experiment] = reader(plan, progress=False)
        return read[experiment]

    rows = [claim_row(c, profile, partial(tables, c.experiment), nulls) for c in claims]
    return with_holm(pd.DataFrame(rows), claims)
