"""Tables derived from ``psnlib.replication.variants.compare``'s tidy results: averages over
benchmarks, means over seeds with their spread, crossovers, coverage and per-response metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from psnlib.metrics import aggregate_seeds, solved_only_by

AVERAGE = "average"  # the benchmark name of the mean over benchmarks
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
