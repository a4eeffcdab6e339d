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
from psnlib.replication.codeversion import VERSIONS
from psnlib.replication.experiments import benchmarks_of
from psnlib.replication.profiles import Profile
from psnlib.replication.results_text import (
    CODE_INTRO,
    code_differences_markdown,
    margin_text,
    slopes_markdown,
)
from psnlib.replication.results_time import compute_text, timing_summary, timing_text

CONFIRMATORY = tuple(f for f in FAMILIES if f.endswith("confirmatory"))
CODE_PAGE = "PAPER_VS_CODE.md"  # beside RESULTS.md
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
        text = f"- **{family}** ({len(rows)} rows, {len(worded)} in the correction)"
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


def _null_cell(r: Any) -> str:
    """One null's result in a cell: mean gap [95% CI], false-positive rate ± MC error; bold
    where it fails."""
    mean, fpr = _value(r["mean"]), _value(r["fpr"])
    text = f"{mean:+.2f}" if np.isfinite(mean) else ""
    if np.isfinite(_value(r["lo"])):
        text += f" [{r['lo']:+.2f}, {r['hi']:+.2f}]"
    if np.isfinite(fpr):
        text += f", {100 * fpr:.1f}%" + (f" ± {100 * r['fpr_se']:.1f}" if r["fpr_se"] else "")
    return text if r["passes"] else f"**{text}**"


def nulls_markdown(nulls: pd.DataFrame) -> str:
    """The null table (``psnlib.replication.nulls.null_table``) as Markdown, a line per
    statistic: each null's mean gap with its interval and the rule's false-positive rate (a
    null at a margin or the premise's matched pass@1 under "other"), and whether it passes."""
    kinds = ("GRPO vs itself, same seed", "seed-shifted GRPO", "split GRPO seeds")
    lines = [
        "| statistic | GRPO vs itself | seed-shifted | split halves | other | gives verdicts |",
        "|---|---|---|---|---|---|",
    ]
    for label, rows in nulls.groupby("label", sort=False):
        cells = {kind: "" for kind in kinds}
        other = []
        for _, r in rows.iterrows():
            at = _text(r.get("at", "")) if _text(r.get("at", "")) not in ("", "0") else ""
            if not r["draws"]:  # no null could be built: why
                other.append(_text(r["reason"]))
            elif r["null"] in cells and not at:
                cells[r["null"]] = _null_cell(r)
            else:
                other.append(f"{r['null']}{f' at {at}' if at else ''}: {_null_cell(r)}")
        passes = "yes" if rows["passes"].all() else "**no**"
        lines.append(
            f"| {label} | {' | '.join(cells[k] for k in kinds)} | {'; '.join(other)} | {passes} |"
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


def code_page(table: pd.DataFrame, profile: Profile) -> str:
    """``CODE_PAGE``: the paper against its released code, each difference with what this
    profile's arms do and the rows of RESULTS.md that test it
    (``results_text.code_differences_markdown``)."""
    return (
        f"# The paper vs the released code, at the `{profile.name}` profile\n\n{CODE_INTRO} "
        "Rows are those of [RESULTS.md](RESULTS.md).\n\n"
        f"{code_differences_markdown(table.reset_index(drop=True), profile)}\n"
    )


def notes_markdown(table: pd.DataFrame, profile: Profile | None = None) -> str:
    """The papers' texts (with what each row measures), then the rows' notes, keyed by row
    number, each clause once (``_keyed``); the papers' averages named once (``AVERAGES``)."""
    numbers = [int(table.index.get_loc(i)) + 1 for i in table.index]
    papers, notes = {}, {}
    for n, (_, r) in zip(numbers, table.iterrows(), strict=True):
        text = _text(r["paper"])
        for long, short in AVERAGES.items():
            text = text.replace(long, short)
        averaged = _text(r.get("benchmarks", ""))
        if profile is not None and averaged == ", ".join(benchmarks_of(profile, "id")):
            averaged = "the in-distribution levels"
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
not values."""

DEFINITIONS = """\
- **Difference**: ours - theirs in the statistic's unit (points for pass@k and shares, problems
  for "solved only", nats for entropy, steps per CPU minute for throughput), per training seed.
  **95% CI**: paired t over the seeds (a seed's arms share data order and evaluation streams);
  "at equal pass@1": a jackknife over seeds refitting theirs' pass@1 -> pass@K line; one seed: a
  bootstrap over problems (never a verdict).
- **Verdicts** (docs/protocol.md 2.3): *reproduced*, the paper's direction, clear of 0;
  *contradicted*, clear of 0 the other way; *smaller than reported*, covers 0 but wholly below the
  paper's effect scaled to this headroom ("here": effect x (100 - theirs here) / (100 - theirs
  in the paper)); *inconclusive*, anything else. "About equal": inside ±{share:.2%} of theirs'
  value (half the smallest gain either paper reports); "costs at most": one-sided against the
  stated cost. *Exploratory*: the MDE (80% power at the observed spread) is not below the effect
  of interest and the interval is not clear of 0; or one seed; or post hoc at its framing seeds.
- **Statuses**: *{not_run}*; *{not_comparable}* (solves no problem at any seed);
  *{null_failed}* (table above).
- **p and Holm** (docs/protocol.md 2.10): the p-value of the test behind the word (below 0.05
  exactly where the interval gives it); Holm's step-down correction within each family
  ({families}); the Holm word is the rule on the interval widened to Holm's level. Statuses,
  one-seed and post-hoc rows (2.12) take no part."""


def versions_text(compute: pd.DataFrame) -> str:
    """The records' code versions in words: how many of the plan's tasks have a record (the
    finished rows of ``jobs.measured_compute``, which reads only records at their kind's current
    version) and those versions (``codeversion.VERSIONS``)."""
    done = int(compute["eval_seconds"].notna().sum())
    kinds = ", ".join(f"{kind} {v}" for kind, v in VERSIONS.items())
    return (
        f"{done} of {len(compute)} planned records, all at their kinds' current code versions "
        f"({kinds}: `codeversion.VERSIONS`)"
    )


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
            "Per null: the mean gap [95% CI] and the verdict rule's false-positive rate at 5% (± "
            "its Monte-Carlo error); a statistic passes where every interval covers 0 and every "
            "rate is at most 7% (docs/protocol.md 2.9; `15_results_nulls.csv` has the draws).",
            nulls_markdown(nulls),
        ]
    if aggregates is not None:
        parts += [
            "## Aggregates of the headline arms",
            "rliable's: the interquartile mean of the seeds' per-benchmark scores and the "
            "probability that a run of the arm beats one of GRPO on a benchmark, with 95% "
            "percentile bootstrap intervals over seeds.",
            aggregates_markdown(aggregates),
        ]
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
    parts += ["## Definitions", definitions, "## Notes by row", notes_markdown(table, profile)]
    if slopes is not None:
        parts += ["## GRPO's frontier, read two ways", slopes_markdown(slopes)]
    parts += [
        "## The paper vs the released code",
        f"{CODE_INTRO} Each difference and the rows that test it: [{CODE_PAGE}]({CODE_PAGE}).",
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
    """Write ``results_markdown`` to ``path`` and ``code_page`` beside it (``CODE_PAGE``),
    atomically, the run time read from ``timing_path`` (``timing_summary``); the records'
    versions from ``compute`` (``versions_text``) unless ``versions`` says them."""
    timing = timing_summary(timing_path)
    if not versions and compute is not None:
        versions = versions_text(compute)
    text = results_markdown(
        table, profile, timing, compute, figure, slopes, nulls, aggregates, versions
    )
    atomic_write_text(Path(path).with_name(CODE_PAGE), code_page(table, profile))
    return atomic_write_text(path, text)
