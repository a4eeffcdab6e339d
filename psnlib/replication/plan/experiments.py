"""One documented function per paper experiment: given a profile, it returns the experiment's
``Plan`` (which variants, at which seeds, on which benchmarks).

``plan.arms()`` is the table of the compared policies with the settings each changes with
respect to plain GRPO; ``psnlib.replication.analysis.summaries.read(plan, seeds)`` reads every
variant's tables from the run ledger (nothing is trained: ``make reproduce`` computes the
records). A run shared by several plans is one task and one record; ``planned_runs(profile)``
lists every RL run the notebooks need: the compute budget. Notebooks call these functions and
only show what they return.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from psnlib.replication.plan import arms
from psnlib.replication.plan.profiles import PolicySpec, Profile, get_profile
from psnlib.replication.plan.variants import Variant, arms_table, model_name
from psnlib.tasks import benchmark_kind

BASE_POLICY = Variant("base", arms.BASE)
GRPO = Variant("GRPO", arms.GRPO)
PSN = Variant("PSN fixed", arms.PSN)
PSN_KL = Variant("PSN adaptive I (KL)", arms.PSN_KL)
PSN_DIV = Variant("PSN adaptive II", arms.PSN_DIV)  # Variant II, the paper's (DiversitySigma)
WEAK_PREFIX = Variant("GRPO + weak prefix", arms.WEAK_PREFIX)  # p = 0.2, entropy cut, weak source
MAIN = [BASE_POLICY, GRPO, PSN, PSN_DIV]
PSN_NO_TIS = Variant("PSN, no TIS", arms.PSN_NO_TIS)
PSN_MASKED_IS = Variant("PSN, masked sequence IS (3PO-style)", arms.PSN_MASKED_IS)
PSN_ATTENTION = Variant("PSN attention", arms.PSN, {"noise_targets": ["attn"]})
PSN_ALL_LAYERS = Variant("PSN all layers", arms.PSN, {"noise_targets": ["all"]})
PSN_RELEASED = Variant("PSN released code", arms.PSN_RELEASED)  # per step, every parameter, Var. I
# The released launcher's default: per step, every parameter, sigma fixed (profile's rule).
PSN_RELEASED_FIXED = Variant("PSN released code, fixed", arms.PSN_RELEASED_FIXED)
RELEASED_REPLICAS = 8  # the released launcher's rollout replicas, each its own draw per step
GRPO_PASSK = Variant("GRPO + Pass@k training", arms.GRPO, {"advantage_mode": "passk"})
PSN_PASSK = Variant("PSN + Pass@k training", arms.PSN, {"advantage_mode": "passk"})


def _prefix_ablation(ablation: str, value: str, settings: dict[str, Any]) -> Variant:
    tags = {"ablation": ablation, "value": value}
    return Variant(f"weak prefix, {ablation}={value}", arms.WEAK_PREFIX, settings, tags=tags)


PREFIX_RANDOM_CUT = _prefix_ablation("truncation", "random", {"prefix_truncation": "random"})
PREFIX_P05 = _prefix_ablation("p", "0.5", {"prefix_prob": 0.5})
PREFIX_P1 = _prefix_ablation("p", "1.0", {"prefix_prob": 1.0})
PREFIX_SAME_FAMILY = _prefix_ablation("source", "same family", {"prefix_source": "same_family"})


def check_seeds(seeds: Any) -> tuple[int, ...] | None:
    """``seeds`` as a tuple, or None (each plan's own); anything but None or a non-empty list or
    tuple of integers >= 0 is a ValueError naming it. A string, such as papermill's
    ``-p seeds '(0, 1)'``, is refused: never taken character by character."""
    if seeds is None:
        return None
    integers = isinstance(seeds, (list, tuple)) and all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in seeds
    )
    if not integers or not seeds:
        hint = '; with papermill pass a list: -y "seeds: [0, 1]"' if isinstance(seeds, str) else ""
        raise ValueError(
            f"seeds must be None or a non-empty list or tuple of integers >= 0, got {seeds!r}{hint}"
        )
    return tuple(int(s) for s in seeds)


@dataclass(frozen=True)
class Plan:
    """What one experiment trains and evaluates at one profile: ``variants`` at ``seeds`` (the
    base policy at the first only), each evaluated on ``benchmarks``. ``arms()`` shows what the
    variants change; ``psnlib.replication.analysis.summaries.read`` reads their tables from the
    run ledger."""

    name: str  # the experiment's function name, a key of PLANS
    profile: Profile
    variants: list[Variant]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]

    def arms(self) -> pd.DataFrame:
        """The compared policies and the settings each changes with respect to plain GRPO
        (``psnlib.replication.plan.variants.arms_table``)."""
        return arms_table(self.variants, self.profile, self.seeds)

    def work(self, seeds: tuple[int, ...] | None = None) -> list[tuple[Variant, int, tuple]]:
        """(variant, seed, benchmarks) of every policy it trains or loads (``seeds``: see
        ``check_seeds``)."""
        seeds = check_seeds(seeds) or self.seeds
        return [(v, s, self.benchmarks) for v in self.variants for s in v.seeds(seeds)]


def benchmarks_of(profile: Profile, kind: str) -> tuple[str, ...]:
    """The profile's benchmarks of one kind: "id" (the RL distribution) or "ood"."""
    return tuple(b for b in profile.benchmarks if benchmark_kind(b) == kind)


def main_benchmark(profile: Profile) -> str:
    """The profile's main benchmark: the first ablation benchmark (countdown-l3 on the testbed)."""
    return profile.ablation_benchmarks[0]


def _ablation(name: str, p: Profile, *variants: Variant, seeds: tuple[int, ...] = ()) -> Plan:
    """GRPO, PSN fixed and ``variants`` on the ablation benchmarks, at ``seeds`` (default: the
    ablation seeds)."""
    return Plan(name, p, [GRPO, PSN, *variants], seeds or p.ablation_seeds, p.ablation_benchmarks)


def rl_narrows_coverage(p: Profile) -> Plan:
    """Base vs GRPO on the in-distribution benchmarks at the main seeds (notebook 02): RLVR
    raises pass@1 and narrows pass@k at large k (both papers' motivation)."""
    return Plan("rl_narrows_coverage", p, [BASE_POLICY, GRPO], p.seeds, benchmarks_of(p, "id"))


def main_results(p: Profile) -> Plan:
    """Base, GRPO, PSN fixed and PSN adaptive II on the in-distribution benchmarks at the main
    seeds (notebook 03; the PSN paper's main table)."""
    return Plan("main_results", p, MAIN, p.seeds, benchmarks_of(p, "id"))


def on_model(v: Variant, profile: Profile, spec: PolicySpec) -> Variant:
    """``v`` trained from base policy ``spec`` (the profile's own or one of its
    ``other_policies``), labelled with the model, as ``across_models`` compares it."""
    model = model_name(spec)
    policy = None if spec == profile.base else spec
    tags = {"model": model, "method": v.label}
    return Variant(f"{v.label} ({model})", v.arm, policy=policy, tags=tags)


def across_models(p: Profile) -> Plan:
    """Base, GRPO and PSN fixed from the profile's base policy and each of its
    ``other_policies``, at the ablation seeds (notebook 03; the PSN paper's other models)."""
    specs = (p.base, *p.other_policies)
    variants = [on_model(v, p, spec) for spec in specs for v in (BASE_POLICY, GRPO, PSN)]
    return Plan("across_models", p, variants, p.ablation_seeds, benchmarks_of(p, "id"))


def tis_three_way(p: Profile) -> Plan:
    """Whether the gain is the noise or TIS (issue 41): GRPO, PSN without TIS, PSN fixed with
    token-level TIS and the released code's fixed configuration (with TIS), paired at the main
    seeds on the in-distribution benchmarks (notebook 04)."""
    variants = [GRPO, PSN_NO_TIS, PSN, PSN_RELEASED_FIXED]
    return Plan("tis_three_way", p, variants, p.seeds, benchmarks_of(p, "id"))


def tis_ablation(profile: Profile) -> Plan:
    """PSN without TIS, with one sequence-level ratio and with a tighter cap, beside GRPO and
    PSN with token-level TIS (notebook 04)."""
    return _ablation(
        "tis_ablation",
        profile,
        PSN_NO_TIS,
        Variant("PSN, sequence-level TIS", arms.PSN, {"tis_level": "sequence"}),
        Variant("PSN, TIS cap C=2", arms.PSN, {"tis_cap": 2.0}),
    )


def noise_site(profile: Profile) -> Plan:
    """The same sigma on the MLP weights (PSN fixed), on attention, on every linear layer
    (notebook 05)."""
    return _ablation(
        "noise_site",
        profile,
        PSN_ATTENTION,
        PSN_ALL_LAYERS,
    )


def swept_sigma(sigma: float) -> Variant:
    """PSN at absolute ``sigma``, as ``sigma_sweep`` compares it."""
    tags = {"sweep": "absolute sigma", "value": sigma}
    return Variant(f"sigma={sigma:g}", arms.PSN, {"sigma": sigma}, tags=tags)


def noise_scope(scope: str) -> Variant:
    """PSN with one noise sample per ``scope`` ("step", "prompt" or "rollout"), as
    ``sigma_sweep`` compares it."""
    tags = {"sweep": "scope", "value": scope}
    return Variant(f"scope={scope}", arms.PSN, {"noise_scope": scope}, tags=tags)


PSN_STEP = noise_scope("step")  # the released code's scope alone: per-step noise on the MLP


def sigma_sweep(p: Profile) -> Plan:
    """GRPO and PSN at the profile's absolute sigmas, sigmas relative to each weight's RMS, and
    each noise scope (notebook 06)."""
    variants = [GRPO, *map(swept_sigma, p.sigma_sweep)]
    for sigma in p.relative_sigmas:
        settings = {"sigma": sigma, "noise_relative": True}
        tags = {"sweep": "relative sigma", "value": sigma}
        variants.append(Variant(f"sigma={sigma:g} x RMS", arms.PSN, settings, tags=tags))
    variants += [noise_scope(scope) for scope in ("step", "prompt", "rollout")]
    return Plan("sigma_sweep", p, variants, p.ablation_seeds, p.ablation_benchmarks)


def released_code(p: Profile) -> Plan:
    """GRPO, the write-up's PSN fixed and the released code's two configurations (one draw per
    step on every parameter: its launcher's fixed sigma, and Variant I at KL 0.003, its README's
    adaptive example) on the in-distribution benchmarks at the main seeds (notebook 03)."""
    variants = [GRPO, PSN, PSN_RELEASED_FIXED, PSN_RELEASED]
    return Plan("released_code", p, variants, p.seeds, benchmarks_of(p, "id"))


def released_replicas(p: Profile) -> Variant:
    """The released fixed configuration with ``RELEASED_REPLICAS`` independent draws per step,
    each over one slice of the step's prompts (its launcher's rollout replicas; at most one
    per prompt of a step, so the smoke profile's 4)."""
    R = min(RELEASED_REPLICAS, p.rl_prompts_per_step)
    tags = {"ablation": "replicas", "value": R}
    return Variant(
        f"PSN released code, fixed, {R} replicas",
        arms.PSN_RELEASED_FIXED,
        {"noise_replicas": R},
        tags=tags,
    )


def released_code_ablation(profile: Profile) -> Plan:
    """From the write-up's PSN to the released code's one change at a time: per-step noise on the
    MLP (the scope alone), then every parameter at the released fixed sigma, then one draw per
    rollout replica, and Variant I (notebook 06)."""
    return _ablation(
        "released_code_ablation",
        profile,
        PSN_STEP,
        PSN_RELEASED_FIXED,
        released_replicas(profile),
        PSN_RELEASED,
        seeds=tuple(dict.fromkeys((*profile.ablation_seeds, *profile.chain_seeds))),
    )


def released_chain(p: Profile) -> Plan:
    """The chain's last link on the in-distribution benchmarks at its fresh seeds (``chain_seeds``,
    issue 51): per-step MLP noise against the released code's (every parameter, Variant I), with
    GRPO and the released fixed configuration, where round two's ablation seeds read it
    contradicted on one benchmark (notebook 06). Empty without chain seeds."""
    variants = [GRPO, PSN_STEP, PSN_RELEASED_FIXED, PSN_RELEASED] if p.chain_seeds else []
    return Plan("released_chain", p, variants, p.chain_seeds, benchmarks_of(p, "id"))


def temperature(T: float, tags: dict[str, Any] | None = None) -> Variant:
    """GRPO sampling its training rollouts at temperature ``T`` (TRL's ``temperature``: the
    loss's log-probabilities are tempered alike); evaluated at T = 1."""
    return Variant(f"GRPO, rollouts at T={T:g}", arms.GRPO, {"temperature": T}, tags=tags or {})


def rollout_temperature(p: Profile) -> Variant:
    """GRPO with its rollouts at the profile's ``baseline_temperature`` (``temperature``)."""
    return temperature(p.baseline_temperature)


def entropy_bonus(
    coef: float, only_seeds: tuple[int, ...] | None = None, tags: dict[str, Any] | None = None
) -> Variant:
    """GRPO with TRL's entropy bonus ``entropy_coef`` (the loss minus coef x mean token
    entropy), at ``only_seeds`` of a plan's seeds if given."""
    label = f"GRPO + entropy bonus {coef:g}"
    return Variant(label, arms.GRPO, {"entropy_coef": coef}, tags=tags or {}, only_seeds=only_seeds)


# What each tuned knob changes in which arm, and its label (``tuned``).
_TUNED = {
    "sigma": (arms.PSN, "PSN fixed, tuned sigma={:g}"),
    "temperature": (arms.GRPO, "GRPO, tuned rollouts at T={:g}"),
    "entropy_coef": (arms.GRPO, "GRPO + tuned entropy bonus {:g}"),
}


def tuned(p: Profile) -> dict[str, Variant]:
    """Knob -> its explorer at the value the equal-tuning rule chose (``tuned_values``: PSN fixed
    at that sigma, GRPO at that rollout temperature or entropy coefficient), at the
    ``tuned_seeds`` of a plan's seeds alone; empty where the profile states no tuned values."""
    variants = {}
    for knob, value in p.tuned_values:
        arm, label = _TUNED[knob]
        only = p.tuned_seeds
        variants[knob] = Variant(label.format(value), arm, {knob: value}, only_seeds=only)
    return variants


def exploration_baselines(p: Profile) -> Plan:
    """GRPO, the PSNs, and token-level exploration: a raised rollout temperature and each of
    the profile's entropy bonuses (a bonus of ``entropy_coef_seeds`` at its seeds alone), with
    each explorer at its tuned value (``tuned``), on the in-distribution benchmarks at the
    baseline seeds (notebook 16)."""
    variants = [GRPO, PSN, PSN_RELEASED_FIXED, PSN_RELEASED, rollout_temperature(p)]
    variants += [entropy_bonus(c, dict(p.entropy_coef_seeds).get(c)) for c in p.entropy_coefs]
    variants += tuned(p).values()
    return Plan("exploration_baselines", p, variants, p.baseline_seeds, benchmarks_of(p, "id"))


def tuning(p: Profile) -> Plan:
    """Equal tuning for every explorer (docs/protocol.md 2.13; notebook 16): PSN's sigma, the
    rollout temperature and the entropy coefficient, each at its grid's values, beside GRPO (its
    training path kept, the rule's reference) and the base policy, at the tuning seeds on the
    tuning benchmarks (problems no reported evaluation draws). Empty where the profile states no
    tuning seeds."""
    variants = [BASE_POLICY, GRPO]
    for sigma in p.tuning_sigmas:
        tags = {"knob": "sigma", "value": sigma}
        variants.append(Variant(f"PSN, sigma={sigma:g}", arms.PSN, {"sigma": sigma}, tags=tags))
    variants += [temperature(T, {"knob": "temperature", "value": T}) for T in p.tuning_temperatures]
    variants += [
        entropy_bonus(c, tags={"knob": "entropy_coef", "value": c}) for c in p.tuning_entropy_coefs
    ]
    seeds = p.tuning_seeds
    return Plan("tuning", p, variants if seeds else [], seeds, p.tuning_benchmarks)


def masked_is(p: Profile) -> Plan:
    """GRPO, PSN fixed and the 3PO-style arm (a noise draw per rollout, masked sequence-level
    importance sampling) on the in-distribution benchmarks at the main seeds (notebook 04)."""
    variants = [GRPO, PSN, PSN_MASKED_IS]
    return Plan("masked_is", p, variants, p.seeds, benchmarks_of(p, "id"))


def adaptive_scheduler(profile: Profile) -> Plan:
    """Fixed sigma vs the KL-target scheduler (Variant I) vs the diversity scheduler (Variant
    II) (notebook 07)."""
    return _ablation("adaptive_scheduler", profile, PSN_KL, PSN_DIV)


def passk_training(p: Profile) -> Plan:
    """GRPO and PSN with Pass@k-training advantages, at the ablation seeds (notebook 08): not one
    of the primary comparisons, which take the main seeds (issue 21)."""
    return _ablation(
        "passk_training",
        p,
        GRPO_PASSK,
        PSN_PASSK,
    )


def weak_prefix(p: Profile) -> Plan:
    """Base, GRPO and GRPO with weak prefixes (p = 0.2, entropy cut) on the in-distribution
    benchmarks at the main seeds (notebook 09; the weak-guidance paper's main table)."""
    variants = [BASE_POLICY, GRPO, WEAK_PREFIX]
    return Plan("weak_prefix", p, variants, p.seeds, benchmarks_of(p, "id"))


def weak_prefix_ablation(p: Profile) -> Plan:
    """Weak prefixes with random truncation, p = 0.5 and 1.0, and same-family prefixes, beside
    GRPO and the main setting (notebook 09; the weak-guidance paper's ablations)."""
    main = {"ablation": "none", "value": "p=0.2, entropy cut, weak source"}
    variants = [GRPO, Variant(WEAK_PREFIX.label, WEAK_PREFIX.arm, tags=main)]
    variants += [PREFIX_RANDOM_CUT, PREFIX_P05, PREFIX_P1, PREFIX_SAME_FAMILY]
    return Plan("weak_prefix_ablation", p, variants, p.ablation_seeds, p.ablation_benchmarks)


def entropy_dynamics(p: Profile) -> Plan:
    """GRPO, PSN fixed and PSN adaptive II at the main seeds, for their training logs (entropy,
    reward) and pass@k on the ablation benchmarks (notebook 10)."""
    variants = [GRPO, PSN, PSN_DIV]
    return Plan("entropy_dynamics", p, variants, p.seeds, p.ablation_benchmarks)


def coverage(profile: Profile) -> Plan:
    """The main comparison's runs, for solved sets, distinct solutions, diversity and step
    validity per problem (notebooks 11, 12)."""
    return dataclasses.replace(main_results(profile), name="coverage")


def ood(p: Profile) -> Plan:
    """The main comparison's runs at the ood seeds (some of the main ones) on the
    out-of-distribution benchmarks (notebook 13)."""
    return dataclasses.replace(
        main_results(p),
        name="ood",
        seeds=p.ood_seeds or p.seeds,
        benchmarks=benchmarks_of(p, "ood"),
    )


def psn_with_weak_prefix(profile: Profile) -> Plan:
    """GRPO and PSN, each with and without weak prefixes (notebook 14; in neither paper)."""
    return _ablation(
        "psn_with_weak_prefix",
        profile,
        WEAK_PREFIX,
        Variant("PSN + weak prefix", arms.PSN_WEAK_PREFIX),
    )


PLANS: dict[str, Callable[[Profile], Plan]] = {
    f.__name__: f
    for f in (
        rl_narrows_coverage,
        main_results,
        released_code,
        across_models,
        tis_three_way,
        tis_ablation,
        noise_site,
        sigma_sweep,
        released_code_ablation,
        released_chain,
        adaptive_scheduler,
        passk_training,
        entropy_dynamics,
        coverage,
        ood,
        weak_prefix,
        weak_prefix_ablation,
        psn_with_weak_prefix,
        exploration_baselines,
        masked_is,
        tuning,
    )
}


def plan(name: str, profile: str | Profile) -> Plan:
    """The plan of experiment ``name`` (a key of ``PLANS``) at ``profile`` (a ``Profile`` or its
    name, resolved here once)."""
    if name not in PLANS:
        raise ValueError(f"unknown experiment {name!r}; allowed: {sorted(PLANS)}")
    return PLANS[name](get_profile(profile))
