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
   (``premise_parts(cpu, 0)`` on the seed-0 checkpoint) it took 111 CPU s: the MLP site 25 s
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

This module is the premise's plan, as values: ``premise(profile)`` (a ``PremisePlan``), what a
record of it must match (``premise_settings``) and the constants of the rule.
``psnlib.replication.compute.premise_evaluation.premise_parts`` computes one checkpoint's
evaluations (``python -m psnlib.replication.reproduce`` runs one task per seed; the sampling and
``match_temperature`` are ``psnlib.replication.compute.premise_sampling``'s) and keeps them in
the result store under ``data/results/<profile>/premise-<run>-<hash>/`` (``premise_config``:
every setting that changes them), one part per site and step (``PARTS``), each written
atomically: a finished checkpoint is loaded in seconds, a killed one resumes at its first missing
part. ``psnlib.replication.analysis.premise_tables.read`` makes the tables the claims read from
the ledger's records: ``problems`` (per policy, seed and problem ``n`` and ``correct``;
``psnlib.replication.analysis.claim_stats``; the MLP site's policies are ``SAMPLING_NOISE`` and
``MATCHED_TEMPERATURE``, the released site's ``SAMPLING_RELEASED_NOISE`` and
``RELEASED_MATCHED_TEMPERATURE``, each row with its ``site``) and ``matched``, one row per seed
and site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from psnlib.noise import EVERY_PARAMETER
from psnlib.replication.plan import arms
from psnlib.replication.plan.evaluation import EVAL_VERSION
from psnlib.replication.plan.experiments import Plan, main_benchmark
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.plan.variants import EVAL_SEED, Variant

MLP = "mlp"  # PSN fixed's noise site
# The premise's noise sites: PSN fixed's (the profile's psn_sigma) and the released code's (every
# floating-point parameter at the sigma of the psn_released_fixed arm: ``site_sigmas``).
SITES = (MLP, EVERY_PARAMETER)
SEARCH_SHARE = 8  # the search's cheap estimates take eval_samples / SEARCH_SHARE samples
T_LO, T_HI = 0.5, 2.0  # the searched temperatures
STEP = 0.25  # the search's first step from T0; each further one doubles
ITERATIONS = 2  # bisection steps: a first bracket of width STEP narrowed to STEP / 4
NOISE_STEP = -1  # the noise's step index: apart from every training step's draws (0, 1, ...)
TIME = ("seconds", "cpu_seconds")

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


def draws_for(profile: Profile) -> int:
    """Noise draws of the premise's evaluations at ``profile``: one per rollout slot, as PSN
    fixed draws them in training at scope 'rollout' (rollout k of every group runs noise sample
    k): ``D = num_generations`` draws, each writing ``eval_samples / D`` samples of every problem.
    A ValueError where ``num_generations`` does not divide ``eval_samples``."""
    D = profile.num_generations
    if profile.eval_samples % D:
        raise ValueError(
            f"profile {profile.name!r}: the premise draws its noise once per rollout slot "
            f"(num_generations={D} draws, each an equal share of every problem's samples), so "
            f"num_generations must divide eval_samples, got eval_samples={profile.eval_samples}"
        )
    return D


def site_sigmas(profile: Profile) -> dict[str, float]:
    """The sigma of each of the premise's noise sites (``SITES``) at ``profile``: the MLP's is
    PSN fixed's ``psn_sigma``; every parameter's is the released code's, the profile's sigma for
    the ``psn_released_fixed`` arm (``Profile.arm_settings``), else ``psn_sigma`` where the
    profile states none."""
    released = dict(dict(profile.arm_settings).get(arms.PSN_RELEASED_FIXED, ()))
    return {MLP: profile.psn_sigma, EVERY_PARAMETER: released.get("sigma", profile.psn_sigma)}


@dataclass(frozen=True)
class PremisePlan(Plan):
    """The ``Plan`` of the premise (the module's docstring): per site (``SITES``) the policies of
    ``POLICIES``, sampled under its noise and at its matched temperature, all the GRPO run of
    each seed, on the main benchmark; ``psnlib.replication.compute.premise_evaluation.compute``
    evaluates them as the premise does (not through ``records.tables.compare``) and
    ``psnlib.replication.analysis.premise_tables`` makes their tables."""

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
        p.seeds if p.premise_seeds is None else p.premise_seeds,
        (main_benchmark(p),),
        sigma=sigmas[MLP],
        released_sigma=sigmas[EVERY_PARAMETER],
        draws=draws_for(p),
        search_samples=search,
    )


def premise_settings(profile: Profile) -> dict[str, Any]:
    """The settings of the premise at ``profile``: the benchmark and sizes, the noise (its draws
    and each site's sigma) and the rule (a run's ledger record keeps them,
    ``psnlib.replication.records.ledger``)."""
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
