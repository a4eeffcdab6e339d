"""RESULTS.md from the claims table of ``psnlib.replication.results``: the table, the paper
against its released code (``psnlib.replication.code_differences.CODE_DIFFERENCES``, each with
the rows that test it), the run time and a discussion computed from the table's numbers (nothing
in it is written once for every profile).

Each value is shown in its statistic's unit with its decimals
(``psnlib.replication.claim_stats.number``); each row names the benchmarks it averages; a claim
whose policies the profile does not train shows the status ``NOT_RUN`` and the reason instead of
numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psnlib.io import atomic_write_text
from psnlib.replication.claim import EQUIVALENCE_SHARE, NOT_RUN
from psnlib.replication.claim_stats import number
from psnlib.replication.code_differences import CODE_DIFFERENCES, CodeDifference
from psnlib.replication.profiles import Profile
from psnlib.replication.verdicts import EQUIVALENT, NONINFERIOR, seeds_needed, standard_error


def _margin_text(r: Any) -> str:
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


def claims_markdown(table: pd.DataFrame) -> str:
    """The claims table as Markdown: paper beside ours, the benchmarks averaged, the difference
    and its interval; each claim links its notebook (from ``figures/<profile>/``). A claim the
    profile has no runs for says so, and why, in place of numbers."""
    lines = [
        "| claim | paper | ours vs theirs (statistic) | benchmarks | difference [95% CI] "
        "| paper effect | seeds | MDE | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        link = f"[{r.claim}](../../notebooks/{r.notebook}.ipynb)" if r.notebook else r.claim
        effect = "" if np.isnan(r.effect) else f"{r.effect:+.1f}"
        scaled = getattr(r, "effect_scaled", float("nan"))
        effect += "" if np.isnan(scaled) else f" ({scaled:+.1f} here)"
        if r.seeds == 0:
            lines.append(
                f"| {link} | {r.paper} | {r.ours} vs {r.theirs} ({r.statistic}): "
                f"{_note(r)} | | | {effect} | 0 | | *{r.verdict}* |"
            )
            continue
        st, unit = r.statistic, r.unit
        ours = f"{r.ours} {number(r.value_ours, unit)} vs {r.theirs} {number(r.value_theirs, unit)}"
        lo, hi = number(r.lo, unit, signed=True), number(r.hi, unit, signed=True)
        interval = f" [{lo}, {hi}]" if _has_interval(r) else ""
        mde = "" if np.isnan(r.mde) else number(r.mde, unit)
        margin = f" ({_margin_text(r)})" if _margin_text(r) else ""
        note = f"; *{_note(r)}*" if _note(r) else ""
        lines.append(
            f"| {link} | {r.paper} | {ours} ({st}){note} | {getattr(r, 'benchmarks', '')} | "
            f"{number(r.diff, unit, signed=True)}{interval} | {effect} | {r.seeds} | {mde} | "
            f"**{r.verdict}**{margin} |"
        )
    return "\n".join(lines)


def _is_notebook(entry: dict[str, Any]) -> bool:
    """Whether a ``reproduce_timing.json`` entry is a notebook's (its stage is ``NN_name``)."""
    return entry.get("stage", "")[:2].isdigit()


def timing_summary(path: str | Path) -> dict[str, float]:
    """What ``reproduce_timing.json`` (``psnlib.replication.reproduce``) recorded: per-task CPU and
    wall seconds of the prepare stage (tasks, workers), and the notebooks' wall seconds."""
    entries = json.loads(Path(path).read_text()) if Path(path).exists() else []
    tasks = [e for e in entries if "task" in e]
    notebooks = [e for e in entries if _is_notebook(e)]
    workers = max((e["workers"] for e in tasks), default=1)
    cpu = sum(e["cpu_seconds"] for e in tasks)
    prepares = [i for i, e in enumerate(entries) if e.get("stage") == "prepare"]
    last = entries[prepares[-1] :] if prepares else []  # the latest make reproduce
    first_runs = {}  # its notebooks, each at its first execution (a forced re-run not counted)
    for e in filter(_is_notebook, last):
        first_runs.setdefault(e["stage"], e["seconds"])
    return {
        "tasks": len(tasks),
        "task_cpu_seconds": cpu,
        "task_wall_seconds": sum(e["seconds"] for e in tasks),
        "workers": workers,
        "notebooks": len(notebooks),
        "notebook_seconds": sum(e["seconds"] for e in notebooks),
        "estimate_seconds": cpu / workers + sum(e["seconds"] for e in notebooks),
        # wall seconds of the latest prepare stage and of the notebooks that ran after it
        "last_prepare_seconds": last[0]["seconds"] if last else 0,
        "last_notebooks": len(first_runs),
        "last_notebook_seconds": sum(first_runs.values()),
    }


INTRO = """\
Generated by `notebooks/15_results.ipynb` (`make reproduce PROFILE={name}`) from the run ledger's
records (`results/{name}/`, one per task of the plan): do not edit by hand. The papers trained 7B
models on competition math; we train a ~1M-parameter policy on Countdown ({steps} RL steps of
{prompts} prompts x {G}; evaluation on {problems} problems x {samples} samples per benchmark,
temperature {temperature}). Compare
directions, not values. The settings (learning rate {lr:g}, sigma {sigma:g}, TIS cap {cap:g}, the
step count and batch) were fixed from a prototype and the time budget; none was tuned on a reported
benchmark (`psnlib.replication.profiles` says why each size is what it is).

*Difference* is ours - theirs in the statistic's unit: percentage points for pass@k and for shares
(valid steps, pairwise diversity); "solved only": problems, each way; entropy: nats per token of the
trained policy's evaluation samples; throughput: training steps per minute of CPU time (the
trainer's step_cpu_time; a comparison whose logs predate it reads the wall clock and its row says
so), from the runs' logs. "pass@K at equal pass@1" is the papers' joint claim: ours' pass@K moved
along GRPO's least-squares pass@1 -> pass@K line across seeds to GRPO's pass@1, minus GRPO's, seed
by seed; its row's note gives the line's slope and the plain difference. *Benchmarks* names what
each row averages: the main comparisons ({main_seeds}) average the in-distribution levels
(out-of-distribution claims: the others), the exploration baselines ({baseline_seeds}) the same
levels, the ablations ({ablation_seeds}) evaluate {ablation_benchmarks} only. The interval is 95%: a
paired t-interval over the training seeds with two or more seeds (the arms of a seed share its data
order and evaluation streams; pass@K at equal pass@1: a jackknife over seeds that refits GRPO's line
each time); with one seed, a paired bootstrap over problems, which leaves out seed-to-seed spread.
*Reproduced*: the paper's direction with the interval clear of 0; *contradicted*: the interval clear
of 0 the other way; *smaller than reported*: the interval covers 0 but lies wholly below the paper's
own difference on this testbed's scale (the paper's size is excluded, its direction is not);
*inconclusive*: anything else. Beside a pass@k effect, in brackets, the same effect scaled to this
testbed's headroom: times (100 - theirs here) / (100 - theirs in the paper), since a difference in
points has less room nearer 100; *smaller than reported* is judged against this scaled effect (an
effect with no reference value of the paper's, as the paper gives it). Each arm carries the effect
the paper reports for its own configuration; a configuration the paper gives no number for (the
released code's Variant I) has no *paper effect* and no size word, only the direction words.
"About equal" claims are judged against one margin rule, equal within ±{share:.2%} of theirs' value
(half the smallest gain either paper reports for its method, relative to its reference: weak
prefixes' +1.30 on 67.76): reproduced inside it, contradicted wholly outside. "Costs at most"
claims are one-sided (non-inferiority) against the paper's stated cost: reproduced where the
interval's lower end lies above minus the margin, contradicted where its upper end lies below it.
*MDE*: the smallest difference that a paired t-test over these seeds detects with 80% power at the
observed spread. A verdict word is given only where the MDE is below the effect of interest: the
scaled paper effect; where the paper reports no number for the comparison, the smallest gain it
reports for its method over GRPO, scaled alike; the margin of an "about equal" or "costs at most"
claim. Otherwise the row is *exploratory*, its interval shown, as are one-seed rows (never a
verdict); counts, shares and entropies the papers give no size for keep their word. A claim framed
after seeing a seed's result is tested on the other seeds (its row's note names those left out). A
claim whose policies this profile does not train (e.g. a third base model) is listed as
*{not_run}*, with the reason.
"""


def _seeds_text(seeds: tuple[int, ...]) -> str:
    return f"{len(seeds)} seed" + ("s" if len(seeds) != 1 else "")


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
    """The row's effect of interest beside its MDE, and that the row is exploratory where the
    MDE is not below it; "" for a row without one."""
    interest = getattr(r, "interest", float("nan"))
    if not np.isfinite(interest):
        return ""
    text = f"; the effect of interest: {number(interest, r.unit)} {r.unit}"
    if r.mde < interest:
        return text
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
        if _margin_text(r):
            kind = "non-inferiority" if getattr(r, "direction", 0) == NONINFERIOR else "equivalence"
            text += f"; the {kind} margin: {_margin_text(r)}"
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
    """``code_differences`` as a Markdown table, each tested claim on a line of its own."""
    lines = [
        "| difference | the paper's text | the released code | this profile | tested by: result |",
        "|---|---|---|---|---|",
    ]
    for r in code_differences(table, profile, differences).itertuples(index=False):
        tested = r[4].replace("\n", "<br>")  # one line per tested claim
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {tested} |")
    return "\n".join(lines)


CODE_INTRO = """\
The authors' released code (`baibizhe/psn_rlvr`, commit 6a27058; docs/protocol.md section 1.2) is
not the method the paper's text describes, and the paper's numbers come from the code. Each
difference, what this profile's arms do, and the claims above that test it, with their verdicts."""


def results_markdown(
    table: pd.DataFrame,
    profile: Profile,
    timing: dict,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
) -> str:
    """RESULTS.md: how it was made, the headline figure, the claims table, the paper against its
    released code (``code_differences_markdown``) and the run time (``timing_summary``, and
    ``psnlib.replication.jobs.measured_compute``'s table if given)."""
    intro = INTRO.format(
        name=profile.name,
        steps=profile.rl_steps,
        prompts=profile.rl_prompts_per_step,
        G=profile.num_generations,
        problems=profile.eval_problems,
        samples=profile.eval_samples,
        temperature=profile.eval_temperature,
        lr=profile.learning_rate,
        sigma=profile.psn_sigma,
        cap=profile.tis_cap,
        main_seeds=_seeds_text(profile.seeds),
        baseline_seeds=_seeds_text(profile.baseline_seeds),
        ablation_seeds=_seeds_text(profile.ablation_seeds),
        ablation_benchmarks=", ".join(profile.ablation_benchmarks),
        not_run=NOT_RUN,
        share=EQUIVALENCE_SHARE,
    )
    parts = [f"# Results at the `{profile.name}` profile", intro]
    if figure:
        parts.append(f"![pass@k, average of the in-distribution benchmarks]({figure})")
    parts += ["## Claim by claim", claims_markdown(table)]
    parts += [
        "## The paper vs the released code",
        CODE_INTRO,
        code_differences_markdown(table, profile),
    ]
    parts += ["## Run time", _timing_text(timing)]
    if compute is not None:
        parts.append(_compute_text(compute, timing))
    parts += ["## Discussion", discussion(table)]
    return "\n\n".join(parts) + "\n"


def _timing_text(t: dict) -> str:
    if not t["tasks"]:
        return "`reproduce_timing.json` holds no per-task timing yet."
    return (
        f"`reproduce_timing.json` records {t['tasks']} prepare tasks (policies, weak prefixes, "
        f"runs with their evaluations) taking {t['task_cpu_seconds'] / 3600:.2f} CPU hours, one "
        f"thread each, on {t['workers']} workers, and {t['notebooks']} notebook executions "
        f"taking {t['notebook_seconds'] / 60:.0f} minutes: "
        f"{t['estimate_seconds'] / 3600:.2f} hours on {t['workers']} cores. A task that an "
        "earlier, interrupted run had finished is loaded and counts ~0 s, so after a resumed "
        "run this is a lower bound of a run from scratch."
    ) + (
        f" The latest `make reproduce` prepared in {t['last_prepare_seconds'] / 3600:.2f} hours "
        f"of wall time on {t['workers']} workers, then ran {t['last_notebooks']} notebooks in "
        f"{t['last_notebook_seconds'] / 60:.0f} minutes."
        if t["last_prepare_seconds"]
        else ""
    )


def _compute_text(compute: pd.DataFrame, timing: dict) -> str:
    done = compute.dropna()
    train, evaluate = done["train_seconds"].sum() / 3600, done["eval_seconds"].sum() / 3600
    return (
        f"The run ledger's records (`psnlib.replication.jobs.measured_compute`): {len(done)} "
        f"of {len(compute)} planned tasks finished, their training took {train:.2f} CPU hours and "
        f"their evaluations {evaluate:.2f}, each task on one thread (so about its wall time on a "
        f"quiet machine): "
        f"{(train + evaluate) / timing['workers']:.2f} hours on {timing['workers']} cores, "
        "before building the policies and the notebooks."
    )


def write_results(
    table: pd.DataFrame,
    path: str | Path,
    profile: Profile,
    timing_path: str | Path,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
) -> Path:
    """Write ``results_markdown`` to ``path`` atomically."""
    text = results_markdown(table, profile, timing_summary(timing_path), compute, figure)
    return atomic_write_text(path, text)
