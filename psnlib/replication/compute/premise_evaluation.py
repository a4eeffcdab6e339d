"""The premise's computation (its rule: ``psnlib.replication.plan.premise``): one checkpoint's
stored parts evaluated where missing (``premise_parts``, sampled by ``premise_sampling``), what is
left to compute (``pending``, ``announcement``) and every checkpoint's parts of a plan, from the
ledger's record where a usable one exists, else computed (``compute``). The tables the claims
read are made from these parts by ``psnlib.replication.analysis.premise_tables``."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from psnlib.paths import data_dir
from psnlib.replication.compute.premise_sampling import (
    pass1,
    problems_of,
    sample_problems,
    site_parts,
)
from psnlib.replication.compute.runs import load_variant
from psnlib.replication.compute.store import ResultStore, weights_fingerprint
from psnlib.replication.plan.experiments import GRPO, check_seeds
from psnlib.replication.plan.premise import (
    PARTS,
    SITE_PARTS,
    SITES,
    PremisePlan,
    premise,
    premise_config,
)
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.records import ledger
from psnlib.replication.records.tables import premise_expectation


def pending(plan: PremisePlan, seeds: tuple[int, ...] | None = None) -> pd.DataFrame:
    """One row per seed with something left to compute: seed, run, ``train`` (the GRPO run
    is not cached) and ``premise`` (its premise evaluations are not all stored)."""
    rows = []
    for seed in check_seeds(seeds) or plan.seeds:
        run = GRPO.run_key(plan.profile, seed)
        recorded = ledger.usable(premise_expectation(plan.profile, seed)) is not None
        trained = recorded or GRPO.run_path(plan.profile, seed).exists()
        stored = recorded or _stored(plan.profile, run, premise_config(plan.profile, run, ""))
        if not trained or not stored:
            rows.append({"seed": seed, "run": run, "train": not trained, "premise": not stored})
    return pd.DataFrame(rows, columns=["seed", "run", "train", "premise"])


def announcement(plan: PremisePlan, seeds: tuple[int, ...] | None = None) -> str:
    """One line: how many GRPO runs are to train and how many checkpoints to evaluate."""
    todo, total = pending(plan, seeds), len(check_seeds(seeds) or plan.seeds)
    if todo.empty:
        return f"[psnlib] {plan.name}: all {total} checkpoints' evaluations are cached"
    return (
        f"[psnlib] {plan.name}: {int(todo['train'].sum())} of {total} GRPO runs to train, "
        f"{int(todo['premise'].sum())} checkpoints to evaluate (noise, search, temperature "
        f"at {len(SITES)} sites)"
    )


def compute(
    plan: PremisePlan, seeds: tuple[int, ...] | None = None, progress: bool = True
) -> dict[int, dict[str, dict[str, pd.DataFrame]]]:
    """Every checkpoint at ``seeds`` (default: the plan's; ``check_seeds``) evaluated under
    noise and at its matched temperature: per seed, the stored parts (``PARTS``) of the ledger's
    usable record of its premise, else ``premise_parts`` (cached).
    ``psnlib.replication.analysis.premise_tables.tables`` makes the premise's tables of them.
    """
    seeds = check_seeds(seeds) or plan.seeds  # before any work
    if progress:
        print(announcement(plan, seeds), flush=True)
    out: dict[int, dict[str, dict[str, pd.DataFrame]]] = {}
    for seed in tqdm(seeds, desc="checkpoints", unit="seed", disable=not progress):
        # the ledger's: no weights loaded
        record = ledger.usable(premise_expectation(plan.profile, seed))
        out[seed] = ledger.premise_parts(record) if record else premise_parts(plan.profile, seed)
    return out


def _stored(profile: Profile, run_key: str, config: dict[str, Any]) -> bool:
    """Whether a store of ``run_key`` with ``config`` (any weights) holds every part."""
    root = data_dir() / "results" / profile.name
    for path in root.glob(f"premise-{run_key}-*/config.json"):
        stored = json.loads(path.read_text())
        same = {k: v for k, v in stored.items() if k != "weights"} == {
            k: v for k, v in json.loads(json.dumps(config)).items() if k != "weights"
        }
        if same and all((path.parent / f"{part}.json").exists() for part in PARTS):
            return True
    return False


def premise_parts(profile: Profile, seed: int) -> dict[str, dict[str, pd.DataFrame]]:
    """The stored parts of one checkpoint's premise (``PARTS``; the premise module's steps 1-3
    at each site), computed where missing: per site (``SITE_PARTS``) its ``noise``
    (``problems`` and ``time``), ``match`` (``search``, ``result``: the matched temperature and
    whether it matched, ``time``) and ``temperature`` (``problems``, ``result``, ``time``)."""
    (seed,) = check_seeds([seed])  # an integer >= 0, or a ValueError naming it
    plan = premise(profile)
    p, benchmark = plan.profile, plan.benchmarks[0]
    model, tokenizer, _ = load_variant(p, GRPO, seed)
    run = GRPO.run_key(p, seed)
    store = ResultStore.for_run(
        p.name, f"premise-{run}", premise_config(p, run, weights_fingerprint(model))
    )
    dataset = problems_of(benchmark, p.eval_problems)
    draw = partial(
        sample_problems,
        model,
        tokenizer,
        dataset,
        benchmark,
        max_new_tokens=p.max_completion_length,
        noise_seed=seed,
    )
    estimates: dict[float, float] = {}  # T -> the cheap clean pass@1, shared by the sites

    def cheap(temperature: float) -> float:  # the search's estimate of the clean pass@1
        if temperature not in estimates:
            table = draw(samples=plan.search_samples, draws=1, temperature=temperature, sigma=0.0)
            estimates[temperature] = pass1(table)
        return estimates[temperature]

    parts: dict[str, dict[str, pd.DataFrame]] = {}
    for site in SITES:

        def full(temperature: float, sigma: float, site: str = site) -> pd.DataFrame:  # (P, ...)
            return draw(
                samples=p.eval_samples,
                draws=plan.draws,
                temperature=temperature,
                sigma=sigma,
                site=site,
            )

        parts |= site_parts(store, SITE_PARTS[site], full, cheap, plan.sigma_at(site), p)
    return parts
