"""The papers' premise, powered: sampling-time parameter noise reaches more problems than a raised
temperature at the same pass@1, tested on every GRPO checkpoint of the main seeds.

Per checkpoint (the plain GRPO run of one seed; nothing new is trained) on the main benchmark,
``eval_problems`` problems x ``eval_samples`` samples, at each of two noise *sites* (``SITES``):
PSN fixed's, the MLP at ``psn_sigma``, and the released code's, every floating-point parameter
(``psnlib.noise.EVERY_PARAMETER``) at the sigma of the ``psn_released_fixed`` arm
(``site_sigmas``: cpu 0.00558; ``psn_sigma`` where the profile states none), steps 1-3:

1. **Noise.** Sampled at the profile's ``eval_temperature`` under the site's noise,
   ``W~ = W + sigma * eps``, drawn afresh for each checkpoint (``noise_seed``: its training
   seed). The draws follow training (``draws_for``): PSN fixed at scope 'rollout' (the smoke and
   cpu profiles') gives rollout k of every group noise sample k, so a group's G rollouts see
   ``G = num_generations`` brains; here each problem's samples see as many, ``D =
   num_generations`` draws (8 at cpu; it must divide ``eval_samples``), draw d (noise index d)
   writing ``eval_samples / D`` samples of every problem with the sampling stream ``EVAL_SEED +
   d``, the weights perturbed in place (``perturbed``: every-parameter noise has no per-row
   form) and restored bit-exactly. The papers' reading, one brain per trajectory, does not fit
   the budget of about a minute per checkpoint and site; fewer brains than samples can only
   narrow what the noise reaches, so the test is conservative for the noise against that
   reading, no more than training is. Costs on a cpu GRPO checkpoint (one torch thread, 100
   problems x 256 samples, a loaded 2-core machine): with 4 pooled draws, as the premise drew
   them before, sampling took 11 CPU s in one draw, 17 s in 4, 24 s in 8 (the decoder shares a
   prompt's common prefixes only within a draw) and 96 s with a draw per sample
   (``perturbed_rows``), and a whole checkpoint (steps 1-3, the MLP site only) 62 CPU s: 22 s
   noise, 16 s search (4 estimates), 24 s temperature. With 8 draws and both sites
   (``premise_at_seed("cpu", 0)`` on the seed-0 checkpoint) it took 111 CPU s: the MLP site 25 s
   noise, 14 s search (4 estimates), 24 s temperature; every parameter 24 s noise, 0 s search
   (its 4 estimates were the MLP search's), 23 s temperature.
2. **The matched temperature** (``match_temperature``), per site: the T whose clean pass@1 on
   the same problems equals the site's noisy pass@1 ``p*``. Cheap estimates ``f(T)``, the clean
   pass@1 from ``eval_samples / SEARCH_SHARE`` samples per problem (one stream, ``EVAL_SEED``,
   the same at every T; one checkpoint's two searches share an estimate at a T both visit),
   bracket it: from ``T0 = eval_temperature`` upwards if ``f(T0) > p*`` (noise lowers pass@1,
   the usual case), else downwards, in steps ``STEP``, ``2 STEP``, ``4 STEP``, ... up to
   ``T_HI`` (down to ``T_LO``), until ``f`` crosses ``p*``; ``ITERATIONS`` bisection steps
   halve that bracket and T is where the chord between its ends crosses ``p*``. Where ``f``
   does not cross ``p*`` up to the bound, no temperature in ``[T_LO, T_HI]`` matches: the
   checkpoint is compared at the visited T whose ``f`` is nearest ``p*`` and its ``matched``
   row says ``False`` (with the pass@1 gap).
3. **Temperature**, per site: one full evaluation at its T, clean weights, in the same D groups
   with the same streams as the noise (common random numbers: sample j of group d of a problem
   draws the same uniforms in both, so the two differ only by what changes the next-token
   distributions).

Each sample is judged exactly (Countdown's verifier; ``math_reward`` on a real benchmark), and
only what the premise reads is kept per problem: ``n``, ``correct``, mean token entropy and length
(``psnlib.evaluate``'s pairwise diversity, a fifth of the CPU of an evaluation in 32 draws as
profiled there, is left out). The sampler is psnlib's decoder (no vLLM engine).

``premise(profile)`` is the experiment's plan; its ``run`` returns the tables the claims read
(``problems``: per policy, seed and problem ``n`` and ``correct``; ``psnlib.replication.
claim_stats``; the MLP site's policies are ``SAMPLING_NOISE`` and ``MATCHED_TEMPERATURE``, the
released site's ``SAMPLING_RELEASED_NOISE`` and ``RELEASED_MATCHED_TEMPERATURE``, each row with
its ``site``) and ``matched``, one row per seed and site. ``premise_at_seed`` computes one
checkpoint's evaluations (``python -m psnlib.replication.reproduce`` runs one task per seed) and
keeps them in the result store under ``data/results/<profile>/premise-<run>-<hash>/``
(``premise_config``: every setting that changes them), one part per site and step (``PARTS``),
each written atomically: a finished checkpoint is loaded in seconds, a killed one resumes at its
first missing part.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from psnlib.io import data_dir
from psnlib.metrics import pass_at_k
from psnlib.noise import EVERY_PARAMETER
from psnlib.replication import arms, ledger
from psnlib.replication.evaluation import EVAL_VERSION
from psnlib.replication.experiments import GRPO, Plan, check_seeds, main_benchmark
from psnlib.replication.premise_sampling import (
    ITERATIONS,
    MLP,
    NOISE_STEP,
    SEARCH_SHARE,
    SITES,
    STEP,
    T_HI,
    T_LO,
    TIME,
    curves,
    draws_for,
    pass1,
    problems_of,
    sample_problems,
    site_parts,
    site_sigmas,
)
from psnlib.replication.profiles import Profile, get_profile
from psnlib.replication.store import ResultStore, weights_fingerprint
from psnlib.replication.summaries import summarize, with_average
from psnlib.replication.variants import EVAL_SEED, Variant, expectation, load_variant
from psnlib.replication.verdicts import paired_t_interval

SAMPLING_NOISE = Variant("GRPO, sampled under noise", arms.GRPO)  # the MLP site
MATCHED_TEMPERATURE = Variant("GRPO, temperature at equal pass@1", arms.GRPO)
SAMPLING_RELEASED_NOISE = Variant("GRPO, sampled under the released noise", arms.GRPO)
RELEASED_MATCHED_TEMPERATURE = Variant(
    "GRPO, temperature at the released noise's pass@1", arms.GRPO
)
# Each site's two policies: sampled under its noise, and at its matched temperature
POLICIES = {
    MLP: (SAMPLING_NOISE, MATCHED_TEMPERATURE),
    EVERY_PARAMETER: (SAMPLING_RELEASED_NOISE, RELEASED_MATCHED_TEMPERATURE),
}

VERSION = 2  # bump when stored premise results change
STEPS = ("noise", "match", "temperature")  # one site's stored steps, in order
# The stored parts of one checkpoint, per site and step: the MLP site's keep the step's name,
# the released site's are prefixed with its own. ``PARTS``, every part in order, is what a ledger
# record's premise holds (``ledger.PREMISE_PARTS`` must equal it).
SITE_PARTS = {site: {s: s if site == MLP else f"{site}_{s}" for s in STEPS} for site in SITES}
PARTS = tuple(part for site in SITES for part in SITE_PARTS[site].values())


@dataclass(frozen=True)
class PremisePlan(Plan):
    """The ``Plan`` of the premise (the module's docstring): per site (``SITES``) the policies of
    ``POLICIES``, sampled under its noise and at its matched temperature, all the GRPO run of
    each seed, on the main benchmark; ``run`` evaluates them as the premise does (not through
    ``variants.compare``)."""

    sigma: float = 0.0  # the MLP noise's sigma: the profile's psn_sigma
    released_sigma: float = 0.0  # every parameter's: the released code's (site_sigmas)
    draws: int = 1  # noise draws per evaluation, one per rollout slot (draws_for)
    search_samples: int = 1  # samples per problem of the search's cheap estimates

    def sigma_at(self, site: str) -> float:
        """The sigma of the noise at ``site`` (one of ``SITES``)."""
        return {MLP: self.sigma, EVERY_PARAMETER: self.released_sigma}[site]

    def arms(self) -> pd.DataFrame:
        """The policies, their site and how each is sampled (all: the plain GRPO run)."""
        p, n = self.profile, self.profile.eval_samples
        rows = []
        for site in SITES:
            noise, temperature = POLICIES[site]
            sigma, share = self.sigma_at(site), n // self.draws
            how = f"under {site} noise sigma={sigma:g} ({self.draws} draws x {share} samples)"
            rows.append((noise.label, site, f"the GRPO run at T={p.eval_temperature:g} {how}"))
            hot = f"the GRPO run, clean weights, at the T whose pass@1 equals the {site} noise's"
            rows.append((temperature.label, site, hot))
        table = pd.DataFrame(rows, columns=["policy", "site", "sampling"])
        return table.assign(seeds=len(self.seeds)).set_index("policy")

    def pending(self, seeds: tuple[int, ...] | None = None) -> pd.DataFrame:
        """One row per seed with something left to compute: seed, run, ``train`` (the GRPO run
        is not cached) and ``premise`` (its premise evaluations are not all stored)."""
        rows = []
        for seed in check_seeds(seeds) or self.seeds:
            run = GRPO.run_key(self.profile, seed)
            recorded = ledger.usable(self.expectation(seed)) is not None
            trained = recorded or GRPO.run_path(self.profile, seed).exists()
            stored = recorded or _stored(self.profile, run, premise_config(self.profile, run, ""))
            if not trained or not stored:
                rows.append({"seed": seed, "run": run, "train": not trained, "premise": not stored})
        return pd.DataFrame(rows, columns=["seed", "run", "train", "premise"])

    def expectation(self, seed: int) -> ledger.Expected:
        """What the ledger record of the GRPO run at ``seed`` must match to stand for its
        premise (``psnlib.replication.variants.expectation``)."""
        return expectation(self.profile, GRPO, seed, (), premise=premise_settings(self.profile))

    def announcement(self, seeds: tuple[int, ...] | None = None) -> str:
        """One line: how many GRPO runs are to train and how many checkpoints to evaluate."""
        todo, total = self.pending(seeds), len(check_seeds(seeds) or self.seeds)
        if todo.empty:
            return f"[psnlib] {self.name}: all {total} checkpoints' evaluations are cached"
        return (
            f"[psnlib] {self.name}: {int(todo['train'].sum())} of {total} GRPO runs to train, "
            f"{int(todo['premise'].sum())} checkpoints to evaluate (noise, search, temperature "
            f"at {len(SITES)} sites)"
        )

    def run(
        self, seeds: tuple[int, ...] | None = None, progress: bool = True
    ) -> dict[str, pd.DataFrame]:
        """Every checkpoint at ``seeds`` (default: the plan's; ``check_seeds``) evaluated under
        noise and at its matched temperature (``premise_at_seed``; cached).

        Returns ``problems`` (per policy, seed and problem: its ``site`` and ``pool_draws``'
        columns, with ``sigma`` and ``temperature``), ``curves`` (per policy, seed and k:
        pass_at_k and its bootstrap interval over problems, lo / hi), ``summary``
        (``summaries.summarize``), ``logs`` (empty: nothing is trained here), ``matched`` (one
        row per seed and site) and ``search`` (every cheap estimate of the temperature searches:
        seed, site, temperature, pass@1).
        """
        seeds = check_seeds(seeds) or self.seeds  # before any work
        if progress:
            print(self.announcement(seeds), flush=True)
        out: dict[str, list[pd.DataFrame]] = {"problems": [], "matched": [], "search": []}
        for seed in tqdm(seeds, desc="checkpoints", unit="seed", disable=not progress):
            record = ledger.usable(self.expectation(seed))  # the ledger's: no weights loaded
            parts = ledger.premise_parts(record) if record else premise_parts(self.profile, seed)
            tables = seed_tables(self, seed, parts)
            for name, table in tables.items():
                out[name].append(table)
        results = {name: pd.concat(tables, ignore_index=True) for name, tables in out.items()}
        results["curves"] = curves(results["problems"], self.profile.ks)
        results["summary"] = summarize(with_average(results["curves"]))
        results["logs"] = pd.DataFrame()
        return results


def premise(profile: str | Profile) -> PremisePlan:
    """The premise at ``profile`` (a ``Profile`` or its name): noise against temperature at
    equal pass@1 on the GRPO run of every main seed, on the main benchmark, at each noise site
    (notebook 01b)."""

    p = get_profile(profile)
    search = p.eval_samples // SEARCH_SHARE
    if search < 1:
        raise ValueError(
            f"profile {p.name!r}: eval_samples must be >= {SEARCH_SHARE} for the temperature "
            f"search's estimates (eval_samples / {SEARCH_SHARE}), got {p.eval_samples}"
        )
    if not T_LO <= p.eval_temperature <= T_HI:
        raise ValueError(
            f"profile {p.name!r}: eval_temperature must lie in the searched [{T_LO}, {T_HI}], "
            f"got {p.eval_temperature}"
        )
    variants = [v for site in SITES for v in POLICIES[site]]
    sigmas = site_sigmas(p)
    return PremisePlan(
        "premise",
        p,
        variants,
        p.seeds,
        (main_benchmark(p),),
        sigma=sigmas[MLP],
        released_sigma=sigmas[EVERY_PARAMETER],
        draws=draws_for(p),
        search_samples=search,
    )


def premise_settings(profile: Profile) -> dict[str, Any]:
    """The settings of the premise at ``profile``: the benchmark and sizes, the noise (its draws
    and each site's sigma) and the rule (a run's ledger record keeps them,
    ``psnlib.replication.ledger``)."""
    plan = premise(profile)
    return {
        "benchmark": plan.benchmarks[0],
        "problems": profile.eval_problems,
        "samples": profile.eval_samples,
        "temperature": profile.eval_temperature,
        "max_new_tokens": profile.max_completion_length,
        "noise": {
            "sites": {site: plan.sigma_at(site) for site in SITES},  # targets -> sigma
            "draws": plan.draws,  # one per rollout slot: num_generations
            "step": NOISE_STEP,
        },
        "rule": {
            "bounds": [T_LO, T_HI],
            "step": STEP,
            "iterations": ITERATIONS,
            "search_samples": plan.search_samples,
        },
        "seed": EVAL_SEED,
        "version": [VERSION, EVAL_VERSION],
    }


def premise_config(profile: Profile, run_key: str, weights: str) -> dict[str, Any]:
    """Everything that determines one checkpoint's premise results (the store key covers it):
    the run and a ``weights`` fingerprint, and ``premise_settings``."""
    return {"run": run_key, "weights": weights, **premise_settings(profile)}


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


def premise_at_seed(profile: str | Profile, seed: int) -> dict[str, pd.DataFrame]:
    """One checkpoint's premise (the module's steps 1-3 at each site), loaded where stored.

    Returns ``problems`` (every policy's per-problem tables), ``matched`` (one row per site:
    site, sigma, draws, the matched temperature, whether it matched, pass@1 and pass@max of the
    site's two policies, the pass@1 gap temperature - noise, the wall and CPU seconds its parts
    took to compute and a note where no temperature matched) and ``search`` (the searches'
    cheap estimates).
    """
    plan = premise(profile)
    return seed_tables(plan, seed, premise_parts(plan.profile, seed))


def premise_parts(profile: Profile, seed: int) -> dict[str, dict[str, pd.DataFrame]]:
    """The stored parts of one checkpoint's premise (``PARTS``), computed where missing: per
    site (``SITE_PARTS``) its ``noise`` (``problems`` and ``time``), ``match`` (``search``,
    ``result``: the matched temperature and whether it matched, ``time``) and ``temperature``
    (``problems``, ``result``, ``time``)."""
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


def seed_tables(
    plan: PremisePlan, seed: int, parts: dict[str, dict[str, pd.DataFrame]]
) -> dict[str, pd.DataFrame]:
    """``premise_at_seed``'s tables from the stored parts of one checkpoint (``PARTS``:
    ``premise_parts``, or a ledger record's): per site, ``site_tables``, stacked."""
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
    """Noise minus temperature over the seeds of ``matched`` (``run``'s table, one row per seed
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
