"""RESULTS.md, the page a reader opens: the answer first, definitions once, notes keyed by row.

From the claims table of ``psnlib.replication.results`` (one row per claim, with the verdict, its
p-value and Holm's word within the claim's family), the null table of
``psnlib.replication.nulls`` and the aggregates of ``psnlib.replication.aggregates``:

1. how it was made, in a few lines, and the headline figure;
2. **the confirmatory claims**, one line each (claim, ours vs theirs, the paper's effect and its
   value on this testbed's scale, the difference with its 95% interval, MDE, p, the raw verdict
   and Holm's), then which words Holm's correction changes, computed from the rows;
3. the null checks: every verdict-giving statistic against GRPO against itself;
4. the aggregates (IQM, probability of improvement over GRPO) of the headline arms;
5. the secondary claims, one line each, as the confirmatory ones;
6. the definitions (once), then the papers' texts and the rows' notes, keyed by row number (a
   text shared by several rows once, with their numbers);
7. GRPO's frontier read two ways, the paper against its released code, the run time
   (``psnlib.replication.results_text``).

Nothing in it is written once for every profile: every number and every word of a verdict comes
from the tables handed in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psnlib.io import atomic_write_text
from psnlib.replication.claim import (
    EQUIVALENCE_SHARE,
    FAMILIES,
    NOT_COMPARABLE,
    NOT_RUN,
    NULL_FAILED,
    STATUSES,
)
from psnlib.replication.claim_stats import number, spans
from psnlib.replication.claims_psn import PSN_AVG, PSN_BENCHMARKS
from psnlib.replication.claims_weak import WEAK_AVG
from psnlib.replication.profiles import Profile
from psnlib.replication.results_text import (
    CODE_INTRO,
    code_differences_markdown,
    margin_text,
    slopes_markdown,
)
from psnlib.replication.results_time import compute_text, timing_summary, timing_text

CONFIRMATORY = tuple(f for f in FAMILIES if f.endswith("confirmatory"))
# the papers' averages, named once on the page
AVERAGES = {PSN_AVG: "PSN avg.", PSN_BENCHMARKS: "PSN benchmarks", WEAK_AVG: "weak avg."}


def _value(x: Any) -> float:
    """A table cell as a float (NaN where the column is absent or empty)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _text(x: Any) -> str:
    """A text cell; "" for an empty one (a CSV read back gives NaN)."""
    return x if isinstance(x, str) else ""


def _p(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _word(word: str) -> str:
    """A verdict in bold, a status (no verdict) in italics."""
    return f"*{word}*" if word in STATUSES or word == NOT_RUN else f"**{word}**"


def _paper_effect(r: Any) -> str:
    effect, scaled = _value(r.effect), _value(getattr(r, "effect_scaled", np.nan))
    if not np.isfinite(effect):
        return ""
    return f"{effect:+.1f}" + (f" ({scaled:+.1f} here)" if np.isfinite(scaled) else "")


def claim_line(number_: int, r: Any, values: bool = True) -> str:
    """One claim as one table line: ``| # | claim | ours vs theirs (statistic) | paper effect |
    difference [95% CI] | seeds | MDE | p | verdict | Holm |`` (without ``values``, the
    statistic alone in the third cell); a row without numbers (not run) has its status alone."""
    holm = _text(getattr(r, "verdict_holm", "")) or r.verdict
    sides = f"{r.ours} vs {r.theirs}" if values else r.statistic
    if r.seeds == 0:
        cells = f"{sides} | {_paper_effect(r)} | | 0 | | | {_word(r.verdict)} |"
        return f"| {number_} | {r.claim} | {cells} |"
    unit = r.unit
    ours = (
        f"{r.ours} {number(r.value_ours, unit)} vs {r.theirs} {number(r.value_theirs, unit)} "
        f"({r.statistic})"
        if values
        else r.statistic
    )
    diff = number(r.diff, unit, signed=True)
    if np.isfinite(r.lo) and np.isfinite(r.hi):
        diff += f" [{number(r.lo, unit, signed=True)}, {number(r.hi, unit, signed=True)}]"
    mde = "" if np.isnan(r.mde) else number(r.mde, unit)
    p = _p(_value(getattr(r, "p", np.nan)))
    margin = f" ({margin_text(r)})" if margin_text(r) else ""
    return (
        f"| {number_} | {r.claim} | {ours} | {_paper_effect(r)} | {diff} | {r.seeds} | {mde} | "
        f"{p} | {_word(r.verdict)}{margin} | {_word(holm) if holm != r.verdict else 'same'} |"
    )


HEADER = (
    "| # | claim | ours vs theirs (statistic) | paper effect (here) | difference [95% CI] | "
    "seeds | MDE | p | verdict | Holm |\n|---|---|---|---|---|---|---|---|---|---|"
)


def claims_markdown(table: pd.DataFrame, rows: pd.Index | None = None, values: bool = True) -> str:
    """The rows ``rows`` of ``table`` (all by default) as one Markdown table, a line each,
    numbered by their position in ``table`` from 1 (the number the notes are keyed by); without
    ``values``, the statistic in place of each side's value (the secondary claims: the values are
    in the claims CSV)."""
    rows = table.index if rows is None else rows
    numbers = [int(table.index.get_loc(i)) + 1 for i in rows]
    lines = [
        claim_line(n, r, values) for n, r in zip(numbers, table.loc[rows].itertuples(), strict=True)
    ]
    header = HEADER if values else HEADER.replace("ours vs theirs (statistic)", "statistic")
    return "\n".join([header, *lines])


def holm_changes(table: pd.DataFrame) -> str:
    """What Holm's correction changes, in words computed from the rows: per family the words
    before and after, and each row whose word changes."""
    lines = []
    for family, rows in table.groupby("family", sort=False):
        worded = rows[rows["p_holm"].notna()] if "p_holm" in rows else rows.iloc[:0]
        changed = worded[worded["verdict"] != worded["verdict_holm"]]
        counts = rows["verdict"].value_counts()
        said = ", ".join(f"{n} {w}" for w, n in counts.items())
        text = f"- **{family}** ({len(rows)} rows: {said}; {len(worded)} in the correction)"
        if changed.empty:
            lines.append(text + ": Holm changes no word.")
            continue
        moves = "; ".join(
            f"row {int(table.index.get_loc(i)) + 1} ({r.claim}): {r.verdict} -> {r.verdict_holm} "
            f"(p {_p(r.p)}, Holm {_p(r.p_holm)})"
            for i, r in changed.iterrows()
        )
        lines.append(f"{text}: {moves}.")
    return "\n".join(lines)


def nulls_markdown(nulls: pd.DataFrame) -> str:
    """The null table (``psnlib.replication.nulls.null_table``) as Markdown, a line per
    statistic and null."""
    lines = [
        "| statistic | null | draws | mean gap [95% CI] | false positives at 5% | passes |",
        "|---|---|---|---|---|---|",
    ]
    for r in nulls.itertuples():
        interval = f" [{r.lo:+.2f}, {r.hi:+.2f}]" if np.isfinite(_value(r.lo)) else ""
        fpr = "" if not np.isfinite(_value(r.fpr)) else f"{100 * r.fpr:.1f}% ± {100 * r.fpr_se:.1f}"
        passes = "yes" if r.passes else f"**no**: {r.reason}"
        mean = "" if not np.isfinite(_value(r.mean)) else f"{r.mean:+.2f}"
        lines.append(
            f"| {getattr(r, 'label', r.statistic)} | {r.null} | {r.draws} | {mean}{interval} | "
            f"{fpr} | {passes} |"
        )
    return "\n".join(lines)


def aggregates_markdown(aggregates: pd.DataFrame) -> str:
    """The aggregates table (``psnlib.replication.aggregates.aggregate_table``) as Markdown."""
    reference = aggregates.attrs.get("reference", "the reference")
    lines = [
        f"| policy | seeds | IQM [95% CI] | P(improves on {reference}) [95% CI] |",
        "|---|---|---|---|",
    ]
    for policy, r in aggregates.iterrows():
        p = ""
        if np.isfinite(r["p_improve"]):
            p = f"{r['p_improve']:.2f} [{r['p_improve_lo']:.2f}, {r['p_improve_hi']:.2f}]"
        lines.append(
            f"| {policy} | {int(r['seeds'])} | {r['iqm']:.1f} [{r['iqm_lo']:.1f}, "
            f"{r['iqm_hi']:.1f}] | {p} |"
        )
    return "\n".join(lines)


def _keyed(texts: dict[int, str]) -> list[str]:
    """Texts by row number as Markdown bullets, each made of clauses (``"; "`` between them)
    that many rows share: each distinct clause once, with the rows that have it, in the order
    first seen."""
    clauses: dict[str, list[int]] = {}
    for n, text in texts.items():
        for clause in text.split("; "):
            if clause:
                clauses.setdefault(clause, []).append(n)
    return [
        f"- row{'s' if len(rows) > 1 else ''} {spans(rows)}: {clause}"
        for clause, rows in clauses.items()
    ]


def notes_markdown(table: pd.DataFrame) -> str:
    """The papers' texts (with what each row measures), then the rows' notes, keyed by row
    number, each clause once (``_keyed``); the papers' averages named once (``AVERAGES``)."""
    numbers = [int(table.index.get_loc(i)) + 1 for i in table.index]
    papers, notes = {}, {}
    for n, (_, r) in zip(numbers, table.iterrows(), strict=True):
        text = _text(r["paper"])
        for long, short in AVERAGES.items():
            text = text.replace(long, short)
        averaged = _text(r.get("benchmarks", ""))
        note = "; ".join(
            x for x in (f"averages {averaged}" if averaged else "", _text(r.get("note", ""))) if x
        )
        papers[n], notes[n] = text, note
    named = "; ".join(f"*{short}*: {long}" for long, short in AVERAGES.items())
    lines = [f"**What the papers report, and what each row measures** ({named}):", ""]
    return "\n".join([*lines, *_keyed(papers), "", "**Notes:**", "", *_keyed(notes)])


INTRO = """\
Generated by `notebooks/15_results.ipynb` (`make reproduce PROFILE={name}`) from the run ledger's
records (`results/{name}/`; {versions}): do not edit by hand. The papers trained 7B models on
competition math; we train a ~1M-parameter policy on Countdown ({steps} RL steps of {prompts}
prompts x {G}; {problems} problems x {samples} samples per benchmark at temperature
{temperature}). Seeds: the main comparisons ({main_seeds}) average the in-distribution levels
(out-of-distribution claims: the others), the exploration baselines ({baseline_seeds}) the same
levels, the ablations ({ablation_seeds}) evaluate {ablation_benchmarks} only. Compare directions,
not values; the definitions are below the tables."""

DEFINITIONS = """\
- **Difference**: ours - theirs in the statistic's unit (percentage points for pass@k and shares;
  problems for "solved only"; nats for entropy; training steps per CPU minute for throughput),
  averaged over the benchmarks the row names, per training seed. **95% CI**: a paired t-interval
  over the seeds (the arms of a seed share its data order and evaluation streams); "at equal
  pass@1" rows: a jackknife over seeds that refits theirs' least-squares pass@1 -> pass@K line
  across seeds; one-seed rows: a bootstrap over problems (never a verdict).
- **Verdict words** (docs/protocol.md 2.3): *reproduced*, the paper's direction with the interval
  clear of 0; *contradicted*, clear of 0 the other way; *smaller than reported*, covering 0 but
  wholly below the paper's effect scaled to this testbed's headroom (the "here" value: effect x
  (100 - theirs here) / (100 - theirs in the paper)); *inconclusive*, anything else. "About equal"
  claims: inside one margin, ±{share:.2%} of theirs' value (half the smallest gain either paper
  reports); "costs at most": one-sided against the paper's stated cost. *Exploratory*: the MDE
  (the difference a paired t-test over these seeds detects with 80% power at the observed spread)
  is not below the effect of interest and the interval is not clear of 0, or one seed, or a post-hoc
  claim at the seeds that framed it.
- **Statuses, not verdicts**: *{not_run}* (the profile trains no such policy);
  *{not_comparable}* (the reference solves no problem at any seed: a failed baseline decides
  nothing); *{null_failed}* (the statistic does not pass its null check, table above).
- **p and Holm** (docs/protocol.md 2.10): p is the p-value of the test behind the
  row's word (two-sided against 0; against the margin for "about equal" and "costs at most"),
  exactly below 0.05 where the interval gives the word. Holm's step-down correction runs within
  each family: {families}. The Holm word is the rule applied to the interval widened to the level at
  which the row's test decides as Holm's does. Statuses, one-seed and post-hoc rows take no part.
- **Post hoc**: a claim framed, or an arm added, after records were seen is tested on the other
  seeds; where there are none it is *exploratory* at the seeds that framed it until fresh seeds
  confirm it (its note says when and why it was framed).
- **Null checks**: each statistic that can give a verdict is applied to GRPO against itself
  (its own final policies, seed-shifted and resampled GRPO seeds as a fake arm); one whose null
  gap is not centred on 0 or whose verdict rule fires on more than 7% of null draws gives no
  verdict (`psnlib.replication.nulls`).
- **Aggregates**: the interquartile mean of the seeds' per-benchmark scores and the probability
  that an arm's run beats GRPO's (every pair of runs, per benchmark, averaged; rliable's
  definition), with 95% percentile bootstrap intervals over seeds
  (`psnlib.replication.aggregates`)."""


def _seeds(seeds: tuple[int, ...]) -> str:
    return f"{len(seeds)} seed" + ("s" if len(seeds) != 1 else "")


def results_markdown(
    table: pd.DataFrame,
    profile: Profile,
    timing: dict,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
    slopes: pd.DataFrame | None = None,
    nulls: pd.DataFrame | None = None,
    aggregates: pd.DataFrame | None = None,
    versions: str = "",
) -> str:
    """RESULTS.md (module doc) from the claims ``table`` (``results.evaluate_claims``), the
    profile, the run time (``timing_summary``) and, where given, the measured compute, the
    headline figure's file name, GRPO's frontier slopes, the null table, the aggregates and a
    line on the records' code versions."""
    table = table.reset_index(drop=True)
    intro = INTRO.format(
        name=profile.name,
        versions=versions or "one record per task of the plan",
        steps=profile.rl_steps,
        prompts=profile.rl_prompts_per_step,
        G=profile.num_generations,
        problems=profile.eval_problems,
        samples=profile.eval_samples,
        temperature=profile.eval_temperature,
        main_seeds=_seeds(profile.seeds),
        baseline_seeds=_seeds(profile.baseline_seeds),
        ablation_seeds=_seeds(profile.ablation_seeds),
        ablation_benchmarks=", ".join(profile.ablation_benchmarks),
    )
    parts = [f"# Results at the `{profile.name}` profile", intro]
    if figure:
        parts.append(f"![pass@k, average of the in-distribution benchmarks]({figure})")
    family = table["family"] if "family" in table else pd.Series("", index=table.index)
    confirmatory = table.index[family.isin(CONFIRMATORY)]
    secondary = table.index[~family.isin(CONFIRMATORY)]
    parts += [
        "## The confirmatory claims",
        "Each paper's claims against GRPO on the primary endpoint at the main seeds, a line each.",
        claims_markdown(table, confirmatory),
    ]
    if "p_holm" in table:
        parts += ["### What Holm's correction changes", holm_changes(table)]
    if nulls is not None:
        parts += [
            "## Null checks: each statistic against GRPO against itself",
            nulls_markdown(nulls),
        ]
    if aggregates is not None:
        parts += ["## Aggregates of the headline arms", aggregates_markdown(aggregates)]
    parts += [
        "## The secondary claims",
        "Each row's two values are in `15_results_claims.csv`; its sides are in its claim's words.",
        claims_markdown(table, secondary, values=False),
    ]
    definitions = DEFINITIONS.format(
        share=EQUIVALENCE_SHARE,
        not_run=NOT_RUN,
        not_comparable=NOT_COMPARABLE,
        null_failed=NULL_FAILED,
        families="; ".join(FAMILIES),
    )
    parts += ["## Definitions", definitions, "## Notes by row", notes_markdown(table)]
    if slopes is not None:
        parts += ["## GRPO's frontier, read two ways", slopes_markdown(slopes)]
    parts += [
        "## The paper vs the released code",
        CODE_INTRO,
        code_differences_markdown(table, profile),
    ]
    parts += ["## Run time", timing_text(timing)]
    if compute is not None:
        parts.append(compute_text(compute, timing))
    return "\n\n".join(parts) + "\n"


def write_results(
    table: pd.DataFrame,
    path: str | Path,
    profile: Profile,
    timing_path: str | Path,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
    slopes: pd.DataFrame | None = None,
    nulls: pd.DataFrame | None = None,
    aggregates: pd.DataFrame | None = None,
    versions: str = "",
) -> Path:
    """Write ``results_markdown`` to ``path`` atomically, the run time read from
    ``timing_path`` (``timing_summary``)."""
    timing = timing_summary(timing_path)
    text = results_markdown(
        table, profile, timing, compute, figure, slopes, nulls, aggregates, versions
    )
    return atomic_write_text(path, text)
