"""RESULTS.md's tables (``psnlib.replication.report.results_page`` lays out the page): one line
per claim (claim, ours vs theirs, the paper's effect and its value on this testbed's scale, the
difference with its 95% interval, MDE, p, the raw verdict and Holm's), which words Holm's
correction changes, the null checks of every verdict-giving statistic and the aggregates of the
headline arms. Every number and word comes from the tables handed in."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication.analysis.claim import (
    NOT_RUN,
    STATUSES,
)
from psnlib.replication.analysis.claim_stats import number
from psnlib.replication.analysis.claims_psn import PSN_AVG, PSN_BENCHMARKS
from psnlib.replication.analysis.claims_weak import WEAK_AVG
from psnlib.replication.report.results_text import (
    margin_text,
)

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
    """The null table (``psnlib.replication.analysis.nulls.null_table``) as Markdown, a line per
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
    """The aggregates table (``psnlib.replication.analysis.aggregates.aggregate_table``) as
    Markdown."""
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
