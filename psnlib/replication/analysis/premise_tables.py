"""The premise's tables (its rule: ``psnlib.replication.plan.premise``) from the stored parts of
its checkpoints: one checkpoint's (``seed_tables``, per site ``site_tables``), a plan's
(``tables``: problems, matched, search, curves, summary), the same read from the ledger's records
only (``read``) and the paired interval of noise minus temperature over seeds
(``paired_interval``). The parts are computed by
``psnlib.replication.compute.premise_evaluation``, never here."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from psnlib.metrics import bootstrap_ci, pass_at_k
from psnlib.replication.analysis.summaries import summarize, with_average
from psnlib.replication.analysis.verdicts import paired_t_interval
from psnlib.replication.plan.experiments import GRPO, check_seeds
from psnlib.replication.plan.premise import (
    MLP,
    POLICIES,
    SITE_PARTS,
    SITES,
    STEPS,
    T_HI,
    T_LO,
    TIME,
    PremisePlan,
)
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import EVAL_SEED
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import require
from psnlib.replication.records.tables import premise_expectation


def tables(
    plan: PremisePlan, parts_by_seed: dict[int, dict[str, dict[str, pd.DataFrame]]]
) -> dict[str, pd.DataFrame]:
    """The premise's tables of ``plan`` from the stored parts of each seed's checkpoint
    (``parts_by_seed``: seed -> its ``PARTS``, as
    ``psnlib.replication.compute.premise_evaluation.compute`` or ``read`` gives them).

    Returns ``problems`` (per policy, seed and problem: its ``site`` and ``pool_draws``'
    columns, with ``sigma`` and ``temperature``), ``curves`` (per policy, seed and k:
    pass_at_k and its bootstrap interval over problems, lo / hi), ``summary``
    (``summaries.summarize``), ``logs`` (empty: nothing is trained here), ``matched`` (one
    row per seed and site) and ``search`` (every cheap estimate of the temperature searches:
    seed, site, temperature, pass@1).
    """
    out: dict[str, list[pd.DataFrame]] = {"problems": [], "matched": [], "search": []}
    for seed, parts in parts_by_seed.items():
        for name, table in seed_tables(plan, seed, parts).items():
            out[name].append(table)
    results = {name: pd.concat(tables, ignore_index=True) for name, tables in out.items()}
    results["curves"] = curves(results["problems"], plan.profile.ks)
    results["summary"] = summarize(with_average(results["curves"]))
    results["logs"] = pd.DataFrame()
    return results


def read(
    plan: PremisePlan, seeds: tuple[int, ...] | None = None, progress: bool = True
) -> dict[str, pd.DataFrame]:
    """``tables`` of ``plan`` at ``seeds`` (default: the plan's;
    ``psnlib.replication.plan.experiments.check_seeds``), read from the run ledger: each seed's
    usable record of the GRPO run with its premise (``premise_expectation``); nothing is trained
    or evaluated, a missing record is a ``MissingRecords`` naming it, before anything is read
    (``make reproduce`` computes them). ``progress`` says what it reads."""
    seeds = check_seeds(seeds) or plan.seeds  # before any work
    if progress:
        where = ledger.profile_dir(plan.profile.name)
        print(f"[psnlib] {plan.name}: {len(seeds)} checkpoints' premise from {where}")
    needed = {
        f"{GRPO.label} seed {seed}": premise_expectation(plan.profile, seed) for seed in seeds
    }
    records = require(plan.profile.name, needed, f"the premise on {list(plan.benchmarks)}")
    parts = {seed: ledger.premise_parts(records[f"{GRPO.label} seed {seed}"]) for seed in seeds}
    return tables(plan, parts)


def curves(problems: pd.DataFrame, ks: tuple[int, ...]) -> pd.DataFrame:
    """Per policy, seed and benchmark of a ``problems`` table, and each k of ``ks``: the mean
    unbiased pass@k over problems and its 95% bootstrap interval over problems (lo, hi)."""
    rows = []
    for (policy, seed, benchmark), table in problems.groupby(
        ["policy", "seed", "benchmark"], sort=False
    ):
        curve = bootstrap_ci(
            table["n"].to_numpy(), table["correct"].to_numpy(), list(ks), seed=EVAL_SEED
        )
        rows.append(curve.assign(policy=policy, seed=seed, benchmark=benchmark))
    table = pd.concat(rows, ignore_index=True)
    return table[["policy", "seed", "benchmark", "k", "pass_at_k", "lo", "hi"]]


def seed_tables(
    plan: PremisePlan, seed: int, parts: dict[str, dict[str, pd.DataFrame]]
) -> dict[str, pd.DataFrame]:
    """One checkpoint's tables from its stored parts (``PARTS``:
    ``psnlib.replication.compute.premise_evaluation.premise_parts``, or a ledger record's): per
    site, ``site_tables``, stacked.

    Returns ``problems`` (every policy's per-problem tables), ``matched`` (one row per site:
    site, sigma, draws, the matched temperature, whether it matched, pass@1 and pass@max of the
    site's two policies, the pass@1 gap temperature - noise, the wall and CPU seconds its parts
    took to compute and a note where no temperature matched) and ``search`` (the searches'
    cheap estimates).
    """
    tables = [site_tables(plan, seed, site, parts) for site in SITES]
    return {name: pd.concat([t[name] for t in tables], ignore_index=True) for name in tables[0]}


def site_tables(
    plan: PremisePlan, seed: int, site: str, parts: dict[str, dict[str, pd.DataFrame]]
) -> dict[str, pd.DataFrame]:
    """One site's ``problems`` (its two policies), ``matched`` (one row) and ``search`` tables
    from its three parts of one checkpoint (``SITE_PARTS[site]`` of ``parts``)."""
    run = GRPO.run_key(plan.profile, seed)
    noise, match, hot = (parts[SITE_PARTS[site][step]] for step in STEPS)
    p, K, sigma = plan.profile, plan.profile.ks[-1], plan.sigma_at(site)
    T = float(match["result"]["temperature"].iloc[0])
    matched = bool(match["result"]["matched"].iloc[0])
    row: dict[str, Any] = {"seed": seed, "run": run, "site": site, "sigma": sigma}
    row |= {"draws": plan.draws, "temperature": T, "matched": matched}
    problems = []
    policies = (
        ("noise", POLICIES[site][0], noise, sigma, p.eval_temperature),
        ("temperature", POLICIES[site][1], hot, 0.0, T),
    )
    for who, variant, tables, sigma_, temperature in policies:
        table = tables["problems"].assign(sigma=sigma_, temperature=temperature)
        front = pd.DataFrame(
            {"policy": variant.label, "seed": seed, "site": site}
            | {"benchmark": plan.benchmarks[0]},
            index=table.index,
        )
        problems.append(pd.concat([front, table], axis=1))
        n, c = table["n"].to_numpy(), table["correct"].to_numpy()  # (P,)
        row[f"{who} pass@1"] = float(pass_at_k(n, c, 1).mean())
        row[f"{who} pass@{K}"] = float(pass_at_k(n, c, K).mean())
    row["pass@1 gap"] = row["temperature pass@1"] - row["noise pass@1"]
    row["search evaluations"] = len(match["search"])
    for unit in TIME:  # of computing the site's three parts, where they were
        row[unit] = float(sum(part["time"][unit].iloc[0] for part in (noise, match, hot)))
    row["note"] = (
        ""
        if matched
        else (
            f"no T in [{T_LO:g}, {T_HI:g}] has the noise's pass@1: compared at T={T:g}, the "
            "searched T whose pass@1 is nearest"
        )
    )
    search = match["search"].assign(seed=seed, site=site)
    return {
        "problems": pd.concat(problems, ignore_index=True),
        "matched": pd.DataFrame([row]),
        "search": search[["seed", "site", "temperature", "pass@1"]],
    }


def paired_interval(matched: pd.DataFrame, profile: Profile, level: float = 0.95) -> pd.DataFrame:
    """Noise minus temperature over the seeds of ``matched`` (that of ``tables``, one row per seed
    and site), in points, per site (a table without ``site``: the MLP's): per statistic (pass@1,
    pass@K at the profile's largest K) and set of seeds (every seed, as the claim reads them;
    those whose temperature matched), the seeds' mean of each policy, the mean paired difference
    ``d_s = noise_s - temperature_s``, its SD over the S seeds and the paired-t interval
    ``mean(d) +/- t_{(1 + level) / 2, S - 1} sd(d) / sqrt(S)`` (``scipy.stats.t``; NaN with
    fewer than two seeds)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    sites = matched["site"] if "site" in matched else pd.Series(MLP, index=matched.index)
    rows = []
    for site in sites.unique():
        mine = matched[sites == site]
        for statistic in ("pass@1", f"pass@{profile.ks[-1]}"):
            for which, table in (("all", mine), ("matched", mine[mine["matched"]])):
                a, b = (
                    100 * table[f"{who} {statistic}"].to_numpy() for who in ("noise", "temperature")
                )
                d = a - b  # (S,) points
                S = len(d)
                sd = float(d.std(ddof=1)) if S > 1 else math.nan
                lo, hi = paired_t_interval(d, level)
                mean = float(d.mean()) if S else math.nan
                rows.append(
                    {"site": site, "statistic": statistic, "seeds": which, "S": S}
                    | {"noise": float(a.mean()) if S else math.nan}
                    | {"temperature": float(b.mean()) if S else math.nan}
                    | {"difference": mean, "sd": sd, "lo": lo, "hi": hi}
                )
    return pd.DataFrame(rows)
