"""The claims table in words: a discussion computed from its rows (each notebook's conclusion,
``psnlib.replication.report.notebook.conclusion``), the paper against its released code
(``psnlib.replication.analysis.code_differences.CODE_DIFFERENCES``, each with the rows that test it)
and GRPO's frontier slopes; ``psnlib.replication.report.results_page`` puts them on RESULTS.md.
Nothing in it is written once for every profile.

Each value is shown in its statistic's unit with its decimals
(``psnlib.replication.analysis.claim_stats.number``); a claim whose policies the profile does not
train shows the status ``NOT_RUN`` and the reason instead of numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication.analysis.claim import NOT_RUN
from psnlib.replication.analysis.claim_stats import number
from psnlib.replication.analysis.code_differences import CODE_DIFFERENCES, CodeDifference
from psnlib.replication.analysis.verdicts import (
    EQUIVALENT,
    EXPLORATORY,
    NONINFERIOR,
    seeds_needed,
    standard_error,
)
from psnlib.replication.plan.profiles import Profile


def margin_text(r: Any) -> str:
    """The row's margin in words: equivalence (``±m``) or non-inferiority (``-m``); "" without
    one. A table written before the direction column reads as equivalence."""
    if np.isnan(r.margin):
        return ""
    direction = getattr(r, "direction", EQUIVALENT)
    if direction == NONINFERIOR:
        return f"at most {r.margin:.2f} below"
    return f"equal within ±{r.margin:.2f}"


def _note(r: Any) -> str:
    """The row's note; "" where it has none (a CSV read back gives NaN for an empty one)."""
    note = getattr(r, "note", "")
    return note if isinstance(note, str) else ""


def _has_interval(r: Any) -> bool:
    return bool(np.isfinite(r.lo) and np.isfinite(r.hi))


def _where(size: float, lo: float, hi: float) -> str:
    """Where ``size`` lies against the interval ``[lo, hi]``, in words."""
    if hi < size:
        return "excluded (above the interval)"
    return "excluded (below the interval)" if lo > size else "inside it"


def _size_text(r: Any) -> str:
    """What a claim's interval says of the paper's size, raw and scaled to the headroom, and the
    seeds the paper's effect on this testbed's scale (the scaled one where there is one: the size
    the verdict judges) would need where the interval decides neither its sign nor that size."""
    sizes = [("the paper's", r.effect)]
    scaled = getattr(r, "effect_scaled", float("nan"))
    if not np.isnan(scaled):
        sizes.append(("scaled to this headroom", scaled))
    said = [f"{name} {size:+.1f} is {_where(size, r.lo, r.hi)}" for name, size in sizes]
    text = "; " + ", ".join(said)
    judged = sizes[-1][1]  # the scaled effect where there is one
    if r.lo > 0 or r.hi < 0 or r.hi < judged or not judged > 0:  # decided, or no size to see
        return text
    sd = standard_error(r.lo, r.hi, r.seeds) * np.sqrt(r.seeds)
    need = seeds_needed(sd, judged) if sd > 0 else 2
    which = "scaled effect" if len(sizes) > 1 else "effect"
    return (
        text
        + f"; the paper's {which} would need "
        + (f"about {need} seeds" if need else "more than 1000 seeds")
    )


def _power_text(r: Any) -> str:
    """The row's effect of interest beside its MDE: where the MDE is not below it, the row is
    exploratory, unless its interval is clear of 0 (a difference seen needs no power:
    ``verdicts.verdict``); "" for a row without one."""
    interest = getattr(r, "interest", float("nan"))
    if not np.isfinite(interest):
        return ""
    text = f"; the effect of interest: {number(interest, r.unit)} {r.unit}"
    if r.mde < interest:
        return text
    if r.verdict != EXPLORATORY:  # clear of 0: seen whatever the power
        return text + ", below the MDE, but the interval is clear of 0"
    return text + ", which these seeds cannot see: *exploratory*, not a verdict"


def discussion(table: pd.DataFrame) -> str:
    """What the claims table says, claim by claim, in words computed from its numbers: each
    multi-seed claim's verdict, difference, MDE beside the effect of interest (where the MDE is
    not below it the row is exploratory), its margin (equivalence or non-inferiority),
    whether the interval excludes the paper's effect (raw and scaled to the headroom) and,
    where it decides nothing, the seeds that would, and the row's note; the one-seed claims
    listed as exploratory, the claims without runs as not run."""
    lines, exploratory, absent = [], [], []
    for r in table.itertuples():
        st, unit = r.statistic, r.unit
        note = _note(r)
        if r.seeds == 0:
            absent.append(f"{r.claim} ({note})")
            continue
        if r.seeds < 2:
            value = f"{number(r.diff, unit, signed=True)} {unit}" if np.isfinite(r.diff) else note
            exploratory.append(f"{r.claim} ({value})")
            continue
        diff = f"{number(r.diff, unit, signed=True)} {unit}"
        if not _has_interval(r):
            lines.append(
                f"- **{r.claim}** ({st}, {r.seeds} seeds): *{r.verdict}*; ours - theirs "
                f"{diff}, no interval ({note})."
            )
            continue
        lo, hi = number(r.lo, unit, signed=True), number(r.hi, unit, signed=True)
        text = (
            f"- **{r.claim}** ({st}, {r.seeds} seeds): *{r.verdict}*; ours - theirs "
            f"{diff} [{lo}, {hi}]. At this spread, {r.seeds} "
            f"seeds detect {number(r.mde, unit)} {unit} with 80% power"
        )
        text += _power_text(r)
        if margin_text(r):
            kind = "non-inferiority" if getattr(r, "direction", 0) == NONINFERIOR else "equivalence"
            text += f"; the {kind} margin: {margin_text(r)}"
        if not np.isnan(r.effect):
            text += _size_text(r)
        if note:
            text += f" ({note})"
        lines.append(text + ".")
    if exploratory:
        lines.append(
            "- **Exploratory** (one seed; the interval leaves out seed-to-seed spread): "
            + "; ".join(exploratory)
            + "."
        )
    if absent:
        lines.append(f"- **{NOT_RUN.capitalize()}**: " + "; ".join(absent) + ".")
    return "\n".join(lines)


def _result(table: pd.DataFrame, name: str) -> str:
    """A claim's row of ``table`` in a few words: verdict, difference and interval, seeds."""
    rows = table[table["claim"] == name]
    if rows.empty:
        return f"{name}: not in this table"
    r = next(rows.itertuples())
    if r.seeds == 0:
        return f"{name}: *{r.verdict}*"
    unit = r.unit
    interval = (
        f" [{number(r.lo, unit, signed=True)}, {number(r.hi, unit, signed=True)}]"
        if _has_interval(r)
        else ""
    )
    seeds = f"{r.seeds} seed" + ("s" if r.seeds != 1 else "")
    return (
        f"{name}: **{r.verdict}**, {number(r.diff, unit, signed=True)}{interval} {unit} "
        f"({r.statistic}, {seeds})"
    )


def code_differences(
    table: pd.DataFrame,
    profile: Profile,
    differences: tuple[CodeDifference, ...] = CODE_DIFFERENCES,
) -> pd.DataFrame:
    """The paper against its released code: one row per difference, what the paper's text and
    the code do, what this profile's arms do (from their run settings), and the claims' rows of
    ``table`` that test it with their verdicts and intervals, one line each (or why none
    does)."""
    rows = []
    for d in differences:
        tested = [_result(table, name) for name in d.claims]
        rows.append(
            {
                "difference": d.what,
                "paper": d.paper,
                "released code": d.code,
                "here": d.here(profile),
                "tested by": "\n".join(tested) if tested else f"not tested here: {d.untested}",
            }
        )
    return pd.DataFrame(rows)


def code_differences_markdown(
    table: pd.DataFrame,
    profile: Profile,
    differences: tuple[CodeDifference, ...] = CODE_DIFFERENCES,
) -> str:
    """The differences as a Markdown table: each with what this profile's arms do and the rows
    of ``table`` that test it by their number on the page (from 1, ``table``'s order) and verdict
    (Holm's where the table has it), or why none does; what the paper's text and the released
    code do is in docs/protocol.md section 1.2 (and ``code_differences``' table)."""
    lines = ["| difference | this profile | tested by rows |", "|---|---|---|"]
    table = table.reset_index(drop=True)
    word = table["verdict_holm"] if "verdict_holm" in table else table["verdict"]
    for d in differences:
        rows = table.index[table["claim"].isin(d.claims)]
        tested = ", ".join(f"{i + 1} ({word[i]})" for i in rows)
        tested = tested or f"not tested here: {d.untested}"
        lines.append(f"| {d.what} | {d.here(profile)} | {tested} |")
    return "\n".join(lines)


CODE_INTRO = """\
The authors' released code (`baibizhe/psn_rlvr`, commit 6a27058) is not the method the paper's
text describes, and the paper's numbers come from the code ([docs/protocol.md section
1.2](../../docs/protocol.md) says what each does)."""


SLOPES_INTRO = """\
GRPO's pass@1 -> pass@256 slope read off its training path (`psnlib.replication.analysis.frontier`)
and across its seeds' final policies (the "at equal pass@1" rows), points per point of pass@1:"""


def slopes_markdown(slopes: pd.DataFrame) -> str:
    """GRPO's frontier slope along its training path and across its seeds' final policies
    (``psnlib.replication.analysis.frontier.slope_table``) as a Markdown table after
    ``SLOPES_INTRO``."""
    lines = ["| GRPO's frontier | slope | 95% interval | seeds |", "|---|---|---|---|"]
    for name, r in slopes.iterrows():
        interval = f"[{r['lo']:+.2f}, {r['hi']:+.2f}]" if np.isfinite(r["lo"]) else "none"
        lines.append(f"| {name} | {r['slope']:+.2f} | {interval} | {int(r['n'])} |")
    return SLOPES_INTRO + "\n\n" + "\n".join(lines)
