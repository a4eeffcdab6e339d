"""Tables derived from ``psnlib.replication.records.tables.compare``'s tidy results: averages over
benchmarks, means over seeds with their spread, paired differences between arms over seeds,
crossovers, coverage and per-response metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from psnlib.metrics import aggregate_seeds, solved_only_by
from psnlib.replication.analysis.claim_stats import PASS_AT_1, PASS_AT_MAX, Statistic, number
from psnlib.replication.analysis.verdicts import LEVEL, paired_t_interval  # LEVEL: 0.95
from psnlib.replication.plan.experiments import (
    WEAK_PREFIX,
    Plan,
    check_seeds,
    main_results,
    weak_prefix,
)
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.records import ledger
from psnlib.replication.records.tables import compare

AVERAGE = "average"  # the benchmark name of the mean over benchmarks
ONE_SEED = "one seed: exploratory, no interval"  # the note of a difference from a single seed
_RUN_ONLY = ("lo", "hi", "seconds")  # columns that describe a single evaluation


def _keys(table: pd.DataFrame, drop: tuple[str, ...]) -> list[str]:
    return [c for c in table.columns if c not in drop]


def with_average(curves: pd.DataFrame) -> pd.DataFrame:
    """``curves`` plus rows with benchmark ``AVERAGE``: per policy, seed and k, the mean pass@k
    over the benchmarks (as the papers average over their five math benchmarks)."""
    by = _keys(curves, ("benchmark", "pass_at_k", *_RUN_ONLY))
    mean = curves.groupby(by, dropna=False, sort=False)["pass_at_k"].mean().reset_index()
    return pd.concat([curves, mean.assign(benchmark=AVERAGE)], ignore_index=True)


def summarize(curves: pd.DataFrame, ks: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Across seeds, per policy x benchmark x k (only ``ks`` if given): mean, std, sem, min, max
    of pass@k and the number of seeds. The base policy has one seed, so no spread."""
    if ks is not None:
        curves = curves[curves["k"].isin(ks)]
    return aggregate_seeds(curves.drop(columns=[c for c in _RUN_ONLY if c in curves]))


def read(
    plan: Plan, seeds: tuple[int, ...] | None = None, progress: bool = True
) -> dict[str, pd.DataFrame]:
    """Every variant's tables of ``plan`` at ``seeds`` (default: the plan's;
    ``psnlib.replication.plan.experiments.check_seeds``), read from the run ledger
    (``psnlib.replication.records.tables.compare``: nothing is trained or evaluated, a missing
    record is a ``MissingRecords`` naming it); ``progress`` says what it reads.

    Returns ``compare``'s tables (curves, problems, logs) plus ``summary``: pass@k per policy x
    benchmark x k over seeds, with the benchmark average (``summarize``); empty tables for a
    plan with no variants at this profile.
    """
    seeds = check_seeds(seeds) or plan.seeds  # before any work
    if not plan.variants:  # a plan this profile does not run (e.g. no tuning): nothing to read
        return {name: pd.DataFrame() for name in ("curves", "problems", "logs")}
    if progress:
        where = ledger.profile_dir(plan.profile.name)
        print(f"[psnlib] {plan.name}: {len(plan.work(seeds))} policies from {where}")
    results = compare(plan.profile, plan.variants, seeds, plan.benchmarks)
    if len(results["curves"]):
        results["summary"] = summarize(with_average(results["curves"]))
    return results


def passk_metrics(summary: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """``{policy: {benchmark: {k: mean pass@k}}}`` for a metrics JSON."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in summary.sort_values("k").itertuples():
        out.setdefault(row.policy, {}).setdefault(row.benchmark, {})[str(row.k)] = float(row.mean)
    return out


def pass_table(summary: pd.DataFrame, ks: tuple[int, ...], index: str = "policy") -> pd.DataFrame:
    """A readable table: rows ``index``, columns "benchmark pass@k", cells "mean ± sem" in
    percent (just the mean where there is one seed)."""

    def cell(row: Any) -> str:
        sem = "" if np.isnan(row["sem"]) else f" ± {100 * row['sem']:.1f}"
        return f"{100 * row['mean']:.1f}{sem}"

    rows = summary[summary["k"].isin(ks)].assign(
        cell=lambda t: t.apply(cell, axis=1),
        column=lambda t: t["benchmark"] + " pass@" + t["k"].astype(str),
    )
    order = list(dict.fromkeys(rows.sort_values(["k"], kind="stable")["column"]))
    wide = rows.pivot(index=index, columns="column", values="cell")
    return wide.loc[list(dict.fromkeys(rows[index])), order]


def crossover(curves: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per benchmark and seed of ``b``: the smallest k at which ``a`` reaches ``b``'s pass@k
    (NaN if it never does up to n), and pass@1 and pass@n of both. ``a`` is usually the base
    policy, evaluated at one seed, and is compared with every seed of ``b``."""
    first = curves[curves["policy"] == a][["benchmark", "k", "pass_at_k"]]
    both = curves[curves["policy"] == b][["benchmark", "seed", "k", "pass_at_k"]].merge(
        first, on=["benchmark", "k"], suffixes=("_b", "_a")
    )
    rows = []
    for (benchmark, seed), t in both.sort_values("k").groupby(["benchmark", "seed"]):
        reached = t[t["pass_at_k_a"] >= t["pass_at_k_b"]]["k"]
        lo, hi = t.iloc[0], t.iloc[-1]
        rows.append(
            {
                "benchmark": benchmark,
                "seed": seed,
                "crossover_k": float(reached.min()) if len(reached) else float("nan"),
                f"{a} pass@1": lo["pass_at_k_a"],
                f"{b} pass@1": lo["pass_at_k_b"],
                f"{a} pass@{hi['k']}": hi["pass_at_k_a"],
                f"{b} pass@{hi['k']}": hi["pass_at_k_b"],
            }
        )
    return pd.DataFrame(rows)


def per_seed_means(
    problems: pd.DataFrame, columns: list[str], by_benchmark: bool = True
) -> pd.DataFrame:
    """Long table: per policy, seed, benchmark (unless ``by_benchmark`` is False: all problems
    pooled) and metric in ``columns``, the mean over problems (NaN-skipping). ``"solved"`` may be
    asked for: the share of problems with a correct sample."""
    table = problems.assign(solved=problems["correct"] > 0)
    columns_in_order = list(problems.columns)  # compare: policy, seed, tags..., benchmark, ...
    by = columns_in_order[: columns_in_order.index("benchmark") + by_benchmark]
    means = table.groupby(by, dropna=False, sort=False)[columns].mean().reset_index()
    return means.melt(id_vars=by, value_vars=columns, var_name="metric")


def headline(summary: pd.DataFrame, benchmark: str, ks: tuple[int, ...]) -> str:
    """One line per policy: its mean pass@k (percent, ± sem over seeds) at each of ``ks`` on
    ``benchmark`` -- for a notebook's "what we measured" without typing numbers into prose."""
    rows = summary[(summary["benchmark"] == benchmark) & summary["k"].isin(ks)]
    lines = []
    for policy, t in rows.groupby("policy", sort=False):
        cells = []
        for r in t.sort_values("k").itertuples():
            sem = "" if np.isnan(r.sem) else f" ± {100 * r.sem:.1f}"
            cells.append(f"pass@{r.k} {100 * r.mean:.1f}{sem}")
        lines.append(f"{policy} ({t['seeds'].iloc[0]} seed(s)): " + ", ".join(cells))
    return "\n".join(lines)


def solved_only_example(
    problems: pd.DataFrame, policy: str, reference: str, seed: int
) -> pd.Series | None:
    """A problem ``policy`` solves and ``reference`` never does at ``seed`` (the one ``policy``
    solves most often; ``psnlib.metrics.solved_only_by``'s row), or None if there is none."""
    at_seed = problems[problems["seed"] == seed]
    mine, theirs = (at_seed[at_seed["policy"] == p] for p in (policy, reference))
    found = solved_only_by(mine, theirs, on=["benchmark", "prompt"])
    return None if found.empty else found.sort_values("correct_a").iloc[-1]


def response_summary(problems: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``per_seed_means`` aggregated over seeds: mean, std, sem, min, max and seeds per policy,
    benchmark and metric."""
    return aggregate_seeds(per_seed_means(problems, columns), value="value")


def solved_only(problems: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per policy, seed and benchmark: how many problems the policy solves that ``reference``
    (at the same seed, or its first seed) never solves in its samples, and the reverse."""
    rows = []
    ref = problems[problems["policy"] == reference]
    for (policy, seed, benchmark), mine in problems.groupby(["policy", "seed", "benchmark"]):
        if policy == reference:
            continue
        theirs = ref[ref["benchmark"] == benchmark]
        same = theirs[theirs["seed"] == seed]
        theirs = same if len(same) else theirs[theirs["seed"] == theirs["seed"].min()]
        rows.append(
            {
                "policy": policy,
                "seed": seed,
                "benchmark": benchmark,
                "only_policy": len(solved_only_by(mine, theirs)),
                "only_reference": len(solved_only_by(theirs, mine)),
                "problems": len(mine),
            }
        )
    return pd.DataFrame(rows)


def last_steps(logs: pd.DataFrame, columns: list[str], steps: int = 10) -> pd.DataFrame:
    """Long table: per policy, seed and column, the mean over the last ``steps`` logged steps."""
    tail = logs.sort_values("step").groupby(["policy", "seed"], sort=False).tail(steps)
    means = tail.groupby(["policy", "seed"], sort=False)[columns].mean().reset_index()
    return means.melt(id_vars=["policy", "seed"], value_vars=columns, var_name="metric")


def _pairs(
    problems: pd.DataFrame,
    references: Sequence[str | tuple[str, str]],
    policies: Sequence[str] | None,
) -> list[tuple[str, str]]:
    """(arm, reference) pairs in order: an (arm, reference) tuple of ``references`` as it is; a
    policy name, paired as reference with each of ``policies`` (default: every policy of the
    table, in table order) but itself, leaving out a pair whose mirror came earlier (PSN fixed
    - GRPO, then not GRPO - PSN fixed)."""
    have = list(dict.fromkeys(problems["policy"]))
    named = [n for r in references for n in ((r,) if isinstance(r, str) else r)]
    for name in [*named, *(policies or [])]:
        if name not in have:
            raise ValueError(f"no evaluation of policy {name!r}; have {have}")
    pairs: list[tuple[str, str]] = []
    for reference in references:
        if not isinstance(reference, str):
            pairs.append(tuple(reference))
            continue
        for policy in policies or have:
            if policy != reference and (reference, policy) not in pairs:
                pairs.append((policy, reference))
    return list(dict.fromkeys(pairs))


def _paired_problems(
    arm: pd.DataFrame, ref: pd.DataFrame, policy: str, reference: str
) -> pd.DataFrame:
    """``arm``'s per-problem values beside ``ref``'s at the same seed, benchmark and prompt
    (value_a, value_b), on ``arm``'s seeds and problems; a ``ValueError`` where ``ref`` lacks a
    seed or a problem of ``arm``."""
    keys = ["seed", "benchmark", "prompt"]
    missing = sorted(set(arm["seed"]) - set(ref["seed"]))
    if missing:
        raise ValueError(
            f"cannot pair {policy!r} with {reference!r}: the reference lacks seed(s) {missing} "
            f"(it has {sorted(set(ref['seed']))}); a difference needs the same seeds on both sides"
        )
    both = arm.merge(ref, on=keys, how="left", suffixes=("_a", "_b"), indicator=True)
    unmatched = both["_merge"] == "left_only"
    if unmatched.any():
        example = both.loc[unmatched, keys].iloc[0].to_dict()
        raise ValueError(
            f"cannot pair {policy!r} with {reference!r}: the reference lacks "
            f"{int(unmatched.sum())} of its evaluated problems, e.g. {example}"
        )
    if len(both) != len(arm):
        raise ValueError(f"{reference!r} has more than one row per seed, benchmark and prompt")
    return both.drop(columns="_merge")


def paired_seed_differences(
    problems: pd.DataFrame,
    reference: str | Sequence[str | tuple[str, str]],
    profile: Profile,
    statistics: Sequence[Statistic] = (PASS_AT_1, PASS_AT_MAX),
    policies: Sequence[str] | None = None,
    common_seeds: bool = False,
) -> pd.DataFrame:
    """Per training seed, each arm's statistic minus the reference's, on the same seed and
    problems.

    ``problems`` is ``compare``'s per-problem table (columns policy, seed, benchmark, prompt, n,
    correct, ...). ``reference`` is one policy or several, each paired with every policy of
    ``policies`` (default: all in the table) but itself, or explicit (arm, reference) tuples, e.g.
    PSN and GRPO from the same base model (``_pairs``). A statistic
    (``psnlib.replication.analysis.claim_stats``; by default pass@1 and pass@K at the profile's
    largest K, each the unbiased ``pass@k = 1 - C(n - c, k) / C(n, k)`` of a problem with c of n
    samples correct) is averaged over a benchmark's problems, then over benchmarks:

        d_s = mean_b mean_q x(arm, s, b, q) - mean_b mean_q x(reference, s, b, q)

    at each of the arm's seeds s (the reference may have more). A reference that lacks one of
    the arm's seeds, or one of its problems, is a ``ValueError``: an arm is never set beside
    another seed of its reference. With ``common_seeds`` each pair is read at the seeds both
    sides have instead (an arm run at some seeds alone beside a full one), and a pair with none
    in common is left out (a ``ValueError`` where every pair is).

    Returns one row per pair, statistic and seed: policy, reference, statistic (its label at
    ``profile``, e.g. pass@256), unit, seed, value (the arm's), reference_value, difference.
    """
    references = [reference] if isinstance(reference, str) else list(reference)
    rows = []
    for stat in statistics:
        if stat.per_problem is None:
            raise ValueError(
                f"the {stat.name} statistic is not a mean of per-problem values (per run, or "
                "computed across seeds): paired_seed_differences needs one"
            )
        values = {}
        for policy, ref in _pairs(problems, references, policies):
            for name in (policy, ref):
                if name not in values:
                    values[name] = stat.problem_values(problems, name, profile)
            arm = values[policy]
            if common_seeds:
                arm = arm[arm["seed"].isin(values[ref]["seed"])]
                if arm.empty:
                    continue
            both = _paired_problems(arm, values[ref], policy, ref)
            per_seed = stat.per_seed(both) * stat.scale
            rows.append(
                pd.DataFrame(
                    {
                        "policy": policy,
                        "reference": ref,
                        "statistic": stat.label(profile),
                        "unit": stat.unit,
                        "seed": per_seed.index.to_numpy(),
                        "value": per_seed["value_a"].to_numpy(),
                        "reference_value": per_seed["value_b"].to_numpy(),
                    }
                )
            )
    if not rows:
        raise ValueError("no arm shares a seed with its reference: there is nothing to pair")
    table = pd.concat(rows, ignore_index=True)
    return table.assign(difference=table["value"] - table["reference_value"])


def difference_intervals(per_seed: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """``paired_seed_differences`` over seeds: per pair and statistic, the mean arm and
    reference values, the mean difference, its standard deviation over seeds and the paired-t
    interval

    ``mean(d) +/- t_{(1 + level) / 2, n - 1} * sd(d) / sqrt(n)``

    over the n seeds (scipy.stats.t), with a note: "paired t over n seeds", or, for one seed,
    ``ONE_SEED`` and lo = hi = NaN (one seed shows no training-seed variance: exploratory)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rows = []
    for (policy, ref, statistic), t in per_seed.groupby(
        ["policy", "reference", "statistic"], sort=False
    ):
        d = t["difference"].to_numpy(dtype=float)
        n = len(d)
        sd = float(d.std(ddof=1)) if n > 1 else float("nan")
        lo, hi = paired_t_interval(d, level)
        rows.append(
            {
                "policy": policy,
                "reference": ref,
                "statistic": statistic,
                "unit": t["unit"].iloc[0],
                "seeds": n,
                "value": float(t["value"].mean()),
                "reference_value": float(t["reference_value"].mean()),
                "mean": float(d.mean()),
                "sd": sd,
                "lo": lo,
                "hi": hi,
                "note": ONE_SEED if n == 1 else f"paired t over {n} seeds",
            }
        )
    return pd.DataFrame(rows)


def paired_differences(
    problems: pd.DataFrame,
    reference: str | Sequence[str | tuple[str, str]],
    profile: Profile,
    statistics: Sequence[Statistic] = (PASS_AT_1, PASS_AT_MAX),
    policies: Sequence[str] | None = None,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Each arm minus ``reference`` on the same seeds and problems, over seeds:
    ``difference_intervals`` of ``paired_seed_differences`` (which says how each seed's
    difference is computed, and refuses a reference without the arm's seeds)."""
    per_seed = paired_seed_differences(problems, reference, profile, statistics, policies)
    return difference_intervals(per_seed, level)


def paired_table(differences: pd.DataFrame) -> pd.DataFrame:
    """``difference_intervals``' rows as a readable table: one row per "arm - reference", a
    column per statistic with "arm - reference = difference [95% interval]" in the statistic's
    unit (no interval for one seed), then the seeds and the note."""

    def cell(row: Any) -> str:
        a, b = (number(row[c], row["unit"]) for c in ("value", "reference_value"))
        d = number(row["mean"], row["unit"], signed=True)
        lo, hi = (number(row[c], row["unit"], signed=True) for c in ("lo", "hi"))
        interval = "" if np.isnan(row["lo"]) else f" [{lo}, {hi}]"
        return f"{a} - {b} = {d}{interval}"

    table = differences.assign(
        pair=differences["policy"] + " - " + differences["reference"],
        cell=differences.apply(cell, axis=1),
    )
    order = list(dict.fromkeys(table["pair"]))
    wide = table.pivot(index="pair", columns="statistic", values="cell")
    wide = wide.loc[order, list(dict.fromkeys(table["statistic"]))]
    first = table.drop_duplicates("pair").set_index("pair").loc[order]
    wide = wide.assign(seeds=first["seeds"], note=first["note"])
    wide.index.name = "arm - reference"
    wide.columns.name = None
    return wide


def headline_curves(profile: Profile) -> pd.DataFrame:
    """pass@k averaged over the in-distribution benchmarks, per policy and seed: base, GRPO,
    PSN fixed and adaptive (notebook 03) and GRPO + weak prefix (notebook 09)."""
    main = read(main_results(profile), progress=False)["curves"]
    weak = read(weak_prefix(profile), progress=False)["curves"]
    curves = with_average(pd.concat([main, weak[weak.policy == WEAK_PREFIX.label]]))
    return curves[curves["benchmark"] == AVERAGE].reset_index(drop=True)
