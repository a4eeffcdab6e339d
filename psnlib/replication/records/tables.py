"""A plan's records as tables: what the ledger record of a policy must match (``expectation``,
``premise_expectation``, ``task_expectation``), and every variant's curves, problems and
training logs read from the records (``compare``, ``labelled``). Nothing here trains or
evaluates: a variant without a usable record is a
``psnlib.replication.records.missing.MissingRecords`` naming it."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from psnlib.replication.plan.arms import BASE
from psnlib.replication.plan.evaluation import eval_settings
from psnlib.replication.plan.experiments import GRPO
from psnlib.replication.plan.policies import starting_fingerprint
from psnlib.replication.plan.premise import premise_settings
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.plan.schedule import Task
from psnlib.replication.plan.variants import EVAL_SEED, Variant
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import require


def labelled(
    parts: dict[str, dict[str, pd.DataFrame]], run_key: str, seed: int
) -> dict[str, pd.DataFrame]:
    """Per-benchmark tables (``{benchmark: {"problems": ..., "curves": ...}}``, as stored) as one
    ``problems`` and one ``curves`` table, with columns run, seed, benchmark first."""
    out: dict[str, list[pd.DataFrame]] = {"problems": [], "curves": []}
    for benchmark, tables in parts.items():
        for name in out:
            table = tables[name]
            keys = pd.DataFrame(
                {"run": run_key, "seed": seed, "benchmark": benchmark}, index=table.index
            )
            out[name].append(pd.concat([keys, table], axis=1))
    return {name: pd.concat(tables, ignore_index=True) for name, tables in out.items()}


def expectation(
    profile: Profile,
    variant: Variant,
    seed: int,
    benchmarks: tuple[str, ...],
    premise: dict[str, Any] | None = None,
    probes: tuple[str, ...] = (),
    path: tuple[int, ...] = (),
) -> ledger.Expected:
    """What the ledger record of ``variant`` at ``seed`` must match to stand for its training and
    its evaluations on ``benchmarks`` (and its premise, with ``premise``'s settings, ``probes``,
    and the policies its run kept at the steps of ``path``, evaluated on ``benchmarks``) at
    ``profile``: ``psnlib.replication.records.ledger.Expected``."""
    p = variant.profile(profile)
    kinds = ("base",) if variant.arm == BASE else ("run",)
    as_json = json.loads(json.dumps(eval_settings(p, EVAL_SEED)))
    return ledger.Expected(
        profile=p.name,
        key=variant.run_key(profile, seed),
        kinds=kinds
        + (("premise",) if premise is not None else ())
        + (("probes",) if probes else ()),
        evaluation=as_json,
        benchmarks=tuple(benchmarks),
        start=starting_fingerprint(p.base),
        premise=json.loads(json.dumps(premise)) if premise is not None else None,
        probes=probes,
        path=tuple(path),
    )


def _label(table: pd.DataFrame, variant: Variant, seed: int, tags: list[str]) -> pd.DataFrame:
    keys = {"policy": variant.label, "seed": seed, **{t: variant.tags.get(t) for t in tags}}
    front = pd.DataFrame(keys, index=table.index)
    return pd.concat([front, table.drop(columns=[c for c in keys if c in table])], axis=1)


def compare(
    profile: str | Profile,
    variants: list[Variant],
    seeds: tuple[int, ...],
    benchmarks: tuple[str, ...] = (),
) -> dict[str, pd.DataFrame]:
    """Every variant at every seed, evaluated on ``benchmarks``, read from the run ledger's records
    (``expectation``); nothing is trained or evaluated: a variant and seed without a usable record
    is a ``psnlib.replication.records.missing.MissingRecords`` that names every missing one, before
    anything is read (``make reproduce`` computes them).

    Returns tidy tables, each with columns policy, seed and the variants' tags (None where a
    variant lacks one) first:
    ``curves`` (x benchmark x k: pass_at_k and its bootstrap interval over problems, lo/hi),
    ``problems`` (x benchmark x problem: ``psnlib.evaluate.evaluate_policy``'s columns) and
    ``logs`` (x training step: reward, entropy, psn/*, tis/*). ``profile`` is a ``Profile`` or
    its name, resolved here once.
    """
    profile = get_profile(profile)
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ValueError(f"variant labels must be distinct, got {labels}")
    if not seeds:
        raise ValueError("compare needs at least one seed")
    tags = list(dict.fromkeys(t for v in variants for t in v.tags))  # every table has them all
    work = {
        f"{variant.label} seed {seed}": (variant, seed)
        for variant in variants
        for seed in variant.seeds(seeds)
    }
    needed = {name: expectation(profile, v, seed, benchmarks) for name, (v, seed) in work.items()}
    records = require(profile.name, needed, f"{', '.join(labels)} on {list(benchmarks)}")
    out: dict[str, list[pd.DataFrame]] = {"curves": [], "problems": [], "logs": []}
    for name, (variant, seed) in work.items():
        record = records[name]
        out["logs"].append(_label(ledger.log_table(record), variant, seed, tags))
        if benchmarks:
            parts = ledger.benchmark_tables(record, benchmarks)
            tables = labelled(parts, variant.run_key(profile, seed), EVAL_SEED)
            for kind in ("curves", "problems"):
                out[kind].append(_label(tables[kind].drop(columns="run"), variant, seed, tags))
    ledger.one_start(list(records.values()))
    return {
        name: pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
        for name, tables in out.items()
    }


def premise_expectation(profile: Profile, seed: int) -> ledger.Expected:
    """What the ledger record of the GRPO run at ``seed`` must match to stand for its premise
    (``expectation`` with ``psnlib.replication.plan.premise.premise_settings``)."""
    return expectation(profile, GRPO, seed, (), premise=premise_settings(profile))


def task_expectation(profile: Profile, task: Task) -> ledger.Expected:
    """What the record of ``task`` (``psnlib.replication.plan.schedule.Task``) must match: its
    variant's ``expectation`` with its benchmarks, its premise's settings where it runs the
    premise, its probes and its training path."""
    settings = premise_settings(profile) if task.premise else None
    return expectation(
        profile, task.variant, task.seed, task.benchmarks, settings, task.probes, task.path
    )
