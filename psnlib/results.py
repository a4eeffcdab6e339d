"""RESULTS.md: claim by claim, the papers' numbers beside ours, with an interval and a verdict.

Each ``Claim`` names the experiment (``psnlib.experiments.PLANS``) that tests it, the policy the
paper says comes out ahead (``ours``), the one it is compared with (``theirs``) and a
statistic. ``evaluate_claims`` loads the experiments' cached runs and evaluations (what ``make
reproduce`` prepared), computes the statistic per training seed and the difference
``ours - theirs`` with a 95% interval:

- with two or more seeds, a t-interval over the per-seed differences (seeds are paired: the same
  seed gives both arms the same initial data order; a policy with one evaluation, the base
  policy, is compared with every seed of the other);
- with one seed, a paired bootstrap over problems (resampled within each benchmark). It covers
  problem sampling only, not seed-to-seed spread, and the verdict says so.

The verdict (``psnlib.verdicts``) follows from the interval: *reproduced*, *contradicted*,
*inconclusive*, or *exploratory* for one seed; beside it the minimum detectable effect at 80%
power from the observed spread. ``results_markdown`` renders the table and a discussion computed
from it (nothing in it is written once for every profile); notebook 15 writes it to
``figures/<profile>/RESULTS.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from psnlib.claims import CLAIMS, Claim
from psnlib.experiments import WEAK_PREFIX, benchmarks_of, run
from psnlib.io import atomic_write_text
from psnlib.metrics import pass_at_k
from psnlib.profiles import Profile, get_profile
from psnlib.summaries import AVERAGE, with_average
from psnlib.verdicts import minimum_detectable_effect, seeds_needed, standard_error, verdict

RESAMPLES = 2000  # bootstrap resamples of the one-seed intervals
LEVEL = 0.95


def _k(profile: Profile, statistic: str) -> int:
    """The k of a pass@k statistic; ``solved_only`` is pass@n > 0 (n the samples)."""
    ks = {"pass@1": profile.ks[0], "pass@max": profile.ks[-1]}
    return ks.get(statistic, profile.eval_samples)


def _per_problem(problems: pd.DataFrame, policy: str, statistic: str, k: int) -> pd.DataFrame:
    """One policy's per-problem values of a pass@k or step statistic: seed, benchmark, prompt,
    value."""
    mine = problems[problems["policy"] == policy]
    if mine.empty:
        raise ValueError(f"no evaluation of policy {policy!r}; have {sorted(set(problems.policy))}")
    if statistic == "step_validity":
        value = mine["step_validity"].to_numpy(dtype=float)
    else:
        value = pass_at_k(mine["n"].to_numpy(), mine["correct"].to_numpy(), k)
    return mine[["seed", "benchmark", "prompt"]].assign(value=value)


def _paired(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per-problem values of two policies side by side, seed by seed; a policy evaluated at one
    seed only (the base policy) is paired with every seed of the other."""
    keys = ["benchmark", "prompt"]
    if a["seed"].nunique() > 1 and b["seed"].nunique() > 1:
        keys = ["seed", *keys]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if "seed" not in keys:
        many = "seed_a" if a["seed"].nunique() > 1 else "seed_b"
        both = both.rename(columns={many: "seed"})
    if both.empty:
        raise ValueError("the two policies share no evaluated problem and seed")
    return both


def _seed_values(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: each policy's mean over problems within a benchmark, then over benchmarks."""
    per_benchmark = both.groupby(["seed", "benchmark"])[["value_a", "value_b"]].mean()
    return per_benchmark.groupby("seed").mean()


def _solved_only(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: problems solved (pass@n > 0) by one policy and by the other in none of its
    samples, each way."""
    solved_a, solved_b = both["value_a"] > 0, both["value_b"] > 0
    counts = both.assign(value_a=solved_a & ~solved_b, value_b=solved_b & ~solved_a)
    return counts.groupby("seed")[["value_a", "value_b"]].sum().astype(float)


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
    """The columns that follow from a claim's interval (``psnlib.verdicts``): the paper's
    effect, the equivalence margin (points; "about equal" claims only), the minimum detectable
    effect at 80% power and the verdict."""
    margin = claim.margin * abs(theirs) if claim.direction == 0 else float("nan")
    se = standard_error(lo, hi, seeds) if seeds > 1 else float("nan")
    return {
        "effect": float("nan") if claim.effect is None else claim.effect,
        "margin": margin,
        "mde": minimum_detectable_effect(se, seeds),
        "verdict": verdict(lo, hi, claim.direction, seeds, claim.effect, margin),
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


def check_claim(claim: Claim, problems: pd.DataFrame, profile: Profile) -> dict:
    """Our side of one claim from the experiment's per-problem table: each policy's statistic
    (mean over seeds; for ``solved_only``, problems solved only by it), the difference, its
    interval and the verdict. Percent for pass@k, a count for ``solved_only``."""
    names = profile.benchmarks if claim.kind == "all" else benchmarks_of(profile, claim.kind)
    problems = problems[problems["benchmark"].isin(names)]
    k = _k(profile, claim.statistic)
    a, b = (_per_problem(problems, p, claim.statistic, k) for p in (claim.ours, claim.theirs))
    both = _paired(a, b)
    values = _solved_only(both) if claim.statistic == "solved_only" else _seed_values(both)
    scale = 1.0 if claim.statistic == "solved_only" else 100.0  # else percent
    d = (values["value_a"] - values["value_b"]).to_numpy() * scale  # (seeds,)
    if len(d) > 1:
        lo, hi = _t_interval(d)
    elif claim.statistic == "solved_only":
        lo = hi = float("nan")
    else:
        lo, hi = (scale * x for x in _bootstrap(both))
    seeds = len(d)
    theirs = float(values["value_b"].mean() * scale)
    return {
        "claim": claim.name,
        "paper": claim.paper,
        "ours": claim.ours,
        "theirs": claim.theirs,
        "statistic": claim.statistic.replace("max", str(k)),
        "seeds": seeds,
        "value_ours": float(values["value_a"].mean() * scale),
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
    one row per claim, the columns of ``check_claim``."""
    profile = get_profile(profile)
    problems: dict[str, pd.DataFrame] = {}
    rows = []
    for claim in claims:
        if claim.experiment not in problems:
            problems[claim.experiment] = run(claim.experiment, profile, progress=False)["problems"]
        rows.append(check_claim(claim, problems[claim.experiment], profile))
    return pd.DataFrame(rows)


def _number(x: float, statistic: str) -> str:
    return f"{x:.0f}" if statistic == "solved_only" else f"{x:.1f}"


def claims_markdown(table: pd.DataFrame) -> str:
    """The claims table as Markdown: paper beside ours, the difference and its interval; each
    claim links its notebook (from ``figures/<profile>/``)."""
    lines = [
        "| claim | paper | ours vs theirs (statistic) | difference [95% CI] | paper effect | seeds "
        "| MDE | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        ours = (
            f"{r.ours} {_number(r.value_ours, r.statistic)} vs {r.theirs} "
            f"{_number(r.value_theirs, r.statistic)} ({r.statistic})"
        )
        interval = "" if np.isnan(r.lo) else f" [{r.lo:+.1f}, {r.hi:+.1f}]"
        link = f"[{r.claim}](../../notebooks/{r.notebook}.ipynb)" if r.notebook else r.claim
        effect = "" if np.isnan(r.effect) else f"{r.effect:+.1f}"
        mde = "" if np.isnan(r.mde) else f"{r.mde:.1f}"
        margin = "" if np.isnan(r.margin) else f" (equal within ±{r.margin:.2f})"
        lines.append(
            f"| {link} | {r.paper} | {ours} | {r.diff:+.1f}{interval} | {effect} | {r.seeds} | "
            f"{mde} | **{r.verdict}**{margin} |"
        )
    return "\n".join(lines)


def _is_notebook(entry: dict[str, Any]) -> bool:
    """Whether a ``reproduce_timing.json`` entry is a notebook's (its stage is ``NN_name``)."""
    return entry.get("stage", "")[:2].isdigit()


def timing_summary(path: str | Path) -> dict[str, float]:
    """What ``reproduce_timing.json`` (``psnlib.reproduce``) recorded: per-task CPU and wall
    seconds of the prepare stage (tasks, workers), and the notebooks' wall seconds."""
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


def headline_curves(profile: str | Profile = "cpu") -> pd.DataFrame:
    """pass@k averaged over the in-distribution benchmarks, per policy and seed: base, GRPO,
    PSN fixed and adaptive (notebook 03) and GRPO + weak prefix (notebook 09)."""
    main = run("main_results", profile, progress=False)["curves"]
    weak = run("weak_prefix", profile, progress=False)["curves"]
    curves = with_average(pd.concat([main, weak[weak.policy == WEAK_PREFIX.label]]))
    return curves[curves["benchmark"] == AVERAGE].reset_index(drop=True)


INTRO = """\
Generated by `notebooks/15_results.ipynb` (`make reproduce PROFILE={name}`) from the cached runs
of notebooks 02-14: do not edit by hand. The papers trained 7B models on competition math; we
train a ~1M-parameter policy on Countdown ({steps} RL steps of {prompts} prompts x {G}; evaluation
on {problems} problems x {samples} samples per benchmark, temperature {temperature}). Compare
directions, not values. The settings (learning rate {lr:g}, sigma {sigma:g}, TIS cap {cap:g}, the
step count and batch) were fixed from a prototype and the time budget; none was tuned on a
reported benchmark (`psnlib.profiles` says why each size is what it is).

*Difference* is ours - theirs in percentage points (pass@k, and the share of valid steps for
self-consistency; for "solved only": problems, each way). The
interval is 95%: a paired t-interval over the training seeds with two or more seeds (the arms of
a seed share its data order and evaluation streams); with one seed, a paired bootstrap over
problems, which leaves out seed-to-seed spread. *Reproduced*: the paper's direction with the
interval clear of 0; *contradicted*: the interval clear of 0 the other way, or below the paper's
own difference (*paper effect*); *inconclusive*: anything else. "About equal" claims are judged
against the equivalence margin in their row: reproduced inside it, contradicted wholly outside.
One-seed rows are *exploratory*, never a verdict. *MDE*: the smallest difference that a paired
t-test over these seeds detects with 80% power at the observed spread.
"""


def discussion(table: pd.DataFrame) -> str:
    """What the claims table says, claim by claim, in words computed from its numbers: each
    multi-seed claim's verdict, difference, MDE and the seeds the paper's effect would need; the
    one-seed claims listed as exploratory."""
    lines, exploratory = [], []
    for r in table.itertuples():
        unit = "problems" if r.statistic == "solved_only" else "points"
        if r.seeds < 2:
            exploratory.append(f"{r.claim} ({r.diff:+.1f} {unit})")
            continue
        text = (
            f"- **{r.claim}** ({r.statistic}, {r.seeds} seeds): *{r.verdict}*; ours - theirs "
            f"{r.diff:+.1f} {unit} [{r.lo:+.1f}, {r.hi:+.1f}]. At this spread, {r.seeds} seeds "
            f"detect {r.mde:.1f} {unit} with 80% power"
        )
        if not np.isnan(r.margin):
            text += f"; the equivalence margin is ±{r.margin:.2f}"
        if not np.isnan(r.effect):
            sd = standard_error(r.lo, r.hi, r.seeds) * np.sqrt(r.seeds)
            need = seeds_needed(sd, r.effect) if sd > 0 else 2
            text += f"; the paper's {r.effect:+.1f} would need " + (
                f"about {need} seeds" if need else "more than 1000 seeds"
            )
        lines.append(text + ".")
    if exploratory:
        lines.append(
            "- **Exploratory** (one seed; the interval leaves out seed-to-seed spread): "
            + "; ".join(exploratory)
            + "."
        )
    return "\n".join(lines)


def results_markdown(
    table: pd.DataFrame,
    profile: str | Profile,
    timing: dict,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
) -> str:
    """RESULTS.md: how it was made, the headline figure, the claims table and the run time
    (``timing_summary``, and ``psnlib.reproduce.measured_compute``'s table if given)."""
    p = get_profile(profile)
    intro = INTRO.format(
        name=p.name,
        steps=p.rl_steps,
        prompts=p.rl_prompts_per_step,
        G=p.num_generations,
        problems=p.eval_problems,
        samples=p.eval_samples,
        temperature=p.eval_temperature,
        lr=p.learning_rate,
        sigma=p.psn_sigma,
        cap=p.tis_cap,
    )
    parts = [f"# Results at the `{p.name}` profile", intro]
    if figure:
        parts.append(f"![pass@k, average of the in-distribution benchmarks]({figure})")
    parts += ["## Claim by claim", claims_markdown(table), "## Run time", _timing_text(timing)]
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
        f"The runs' own records (`psnlib.reproduce.measured_compute`): {len(done)} of "
        f"{len(compute)} planned runs finished, their training steps took {train:.2f} hours and "
        f"their evaluations {evaluate:.2f} hours, each on one core (wall time of the worker, so "
        f"including whatever shared the machine or paused it, so an upper bound): "
        f"{(train + evaluate) / timing['workers']:.2f} hours on {timing['workers']} cores, "
        "before building the policies and the notebooks."
    )


def write_results(
    table: pd.DataFrame,
    path: str | Path,
    profile: str | Profile,
    timing_path: str | Path,
    compute: pd.DataFrame | None = None,
    figure: str | None = None,
) -> Path:
    """Write ``results_markdown`` to ``path`` atomically."""
    text = results_markdown(table, profile, timing_summary(timing_path), compute, figure)
    return atomic_write_text(path, text)
