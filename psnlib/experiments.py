"""One function per paper experiment: takes a profile and seeds, returns tidy tables.

Each experiment is a ``Plan`` (which variants, at which seeds, on which benchmarks) run by
``psnlib.variants.compare``; runs and evaluations are cached by their settings, so the GRPO and
PSN runs that several notebooks compare against are trained and evaluated once.
``planned_runs(profile)`` lists every RL run the notebooks need: the compute budget.
Notebooks call these functions and only show what they return.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd

from psnlib.evaluate import evaluate_benchmarks
from psnlib.models import count_parameters
from psnlib.noise import NoiseConfig, perturbed
from psnlib.pretrain import base_policy, policy_meta, spec_hash, weak_policy
from psnlib.profiles import PolicySpec, Profile, get_profile
from psnlib.sampling import generate_samples
from psnlib.summaries import crossover, summarize, with_average
from psnlib.tasks import benchmark_kind
from psnlib.tasks.countdown import Problem, verify
from psnlib.variants import BASE, EVAL_SEED, Variant, compare, load_variant
from psnlib.weak_prefix import prefix_quality, prefix_train_set

BASE_POLICY = Variant("base", BASE)
GRPO = Variant("GRPO", "grpo")
PSN = Variant("PSN fixed", "psn")
PSN_KL = Variant("PSN adaptive I (KL)", "psn_kl")
PSN_ADAPTIVE = Variant("PSN adaptive II", "psn_div")  # the paper's proposal
WEAK_PREFIX = Variant("GRPO + weak prefix", "weak_prefix")  # p = 0.2, entropy cut, weak source


@dataclass(frozen=True)
class Plan:
    """What one experiment trains and evaluates."""

    variants: list[Variant]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]


def benchmarks_of(profile: Profile, kind: str) -> tuple[str, ...]:
    """The profile's benchmarks of one kind: "id" (the RL distribution) or "ood"."""
    return tuple(b for b in profile.benchmarks if benchmark_kind(b) == kind)


def _model_name(spec: PolicySpec) -> str:
    return spec.name_or_path or f"{spec.family}-{spec.size}"


def _across_models(p: Profile) -> Plan:
    variants = []
    for spec in (p.base, *p.other_policies):
        model = _model_name(spec)
        policy = None if spec == p.base else spec
        for v in (BASE_POLICY, GRPO, PSN):
            tags = {"model": model, "method": v.label}
            variants.append(Variant(f"{v.label} ({model})", v.arm, policy=policy, tags=tags))
    return Plan(variants, p.ablation_seeds, benchmarks_of(p, "id"))


def _sigma_sweep(p: Profile) -> Plan:
    variants = [GRPO]
    for sigma in p.sigma_sweep:
        tags = {"sweep": "absolute sigma", "value": sigma}
        variants.append(Variant(f"sigma={sigma:g}", "psn", {"sigma": sigma}, tags=tags))
    for sigma in p.relative_sigmas:
        settings = {"sigma": sigma, "noise_relative": True}
        tags = {"sweep": "relative sigma", "value": sigma}
        variants.append(Variant(f"sigma={sigma:g} x RMS", "psn", settings, tags=tags))
    for scope in ("step", "prompt", "rollout"):
        tags = {"sweep": "scope", "value": scope}
        variants.append(Variant(f"scope={scope}", "psn", {"noise_scope": scope}, tags=tags))
    return Plan(variants, p.ablation_seeds, p.ablation_benchmarks)


def _prefix_ablation(p: Profile) -> Plan:
    main = {"ablation": "none", "value": "p=0.2, entropy cut, weak source"}
    variants = [GRPO, Variant(WEAK_PREFIX.label, WEAK_PREFIX.arm, tags=main)]
    for ablation, value, settings in (
        ("truncation", "random", {"prefix_truncation": "random"}),
        ("p", "0.5", {"prefix_prob": 0.5}),
        ("p", "1.0", {"prefix_prob": 1.0}),
        ("source", "same family", {"prefix_source": "same_family"}),
    ):
        tags = {"ablation": ablation, "value": value}
        variants.append(
            Variant(f"weak prefix, {ablation}={value}", "weak_prefix", settings, tags=tags)
        )
    return Plan(variants, p.ablation_seeds, p.ablation_benchmarks)


def _ablation(*variants: Variant, main: bool = False) -> Callable[[Profile], Plan]:
    """GRPO, PSN and ``variants`` on the ablation benchmarks; at the main seeds if ``main``."""
    return lambda p: Plan(
        [GRPO, PSN, *variants], p.seeds if main else p.ablation_seeds, p.ablation_benchmarks
    )


MAIN = [BASE_POLICY, GRPO, PSN, PSN_ADAPTIVE]
PLANS: dict[str, Callable[[Profile], Plan]] = {
    "rl_narrows_coverage": lambda p: Plan([BASE_POLICY, GRPO], p.seeds, benchmarks_of(p, "id")),
    "main_results": lambda p: Plan(MAIN, p.seeds, benchmarks_of(p, "id")),
    "across_models": _across_models,
    "tis_ablation": _ablation(
        Variant("PSN, no TIS", "psn_no_tis"),
        Variant("PSN, sequence-level TIS", "psn", {"tis_level": "sequence"}),
        Variant("PSN, TIS cap C=2", "psn", {"tis_cap": 2.0}),
    ),
    "noise_site": _ablation(
        Variant("PSN attention", "psn", {"noise_targets": ["attn"]}),
        Variant("PSN all layers", "psn", {"noise_targets": ["all"]}),
    ),
    "sigma_sweep": _sigma_sweep,
    "adaptive_scheduler": _ablation(PSN_KL, PSN_ADAPTIVE),
    "passk_training": _ablation(
        Variant("GRPO + Pass@k training", "grpo", {"advantage_mode": "passk"}),
        Variant("PSN + Pass@k training", "psn", {"advantage_mode": "passk"}),
        main=True,  # a main comparison of issue 8: at every seed
    ),
    "entropy_dynamics": lambda p: Plan([GRPO, PSN, PSN_ADAPTIVE], p.seeds, p.ablation_benchmarks),
    "coverage": lambda p: Plan(MAIN, p.seeds, benchmarks_of(p, "id")),
    "ood": lambda p: Plan(MAIN, p.seeds, benchmarks_of(p, "ood")),
    "weak_prefix": lambda p: Plan(
        [BASE_POLICY, GRPO, WEAK_PREFIX], p.seeds, benchmarks_of(p, "id")
    ),
    "weak_prefix_ablation": _prefix_ablation,
    "psn_with_weak_prefix": _ablation(WEAK_PREFIX, Variant("PSN + weak prefix", "psn_weak_prefix")),
}


def plan(name: str, profile: str | Profile) -> Plan:
    """The plan of experiment ``name`` (a key of ``PLANS``) at ``profile``."""
    if name not in PLANS:
        raise ValueError(f"unknown experiment {name!r}; allowed: {sorted(PLANS)}")
    return PLANS[name](get_profile(profile))


def run(
    name: str,
    profile: str | Profile = "cpu",
    seeds: tuple[int, ...] | None = None,
    progress: bool = True,
) -> dict[str, pd.DataFrame]:
    """Train and evaluate experiment ``name`` (at ``seeds``, default the plan's).

    Returns ``compare``'s tables (curves, problems, logs) plus ``summary``: pass@k per policy x
    benchmark x k over seeds, with the benchmark average (``psnlib.summaries.summarize``).
    """
    p = plan(name, profile)
    results = compare(profile, p.variants, tuple(seeds or p.seeds), p.benchmarks, progress)
    if len(results["curves"]):
        results["summary"] = summarize(with_average(results["curves"]))
    return results


def _experiment(name: str, doc: str) -> Callable[..., dict[str, pd.DataFrame]]:
    def experiment(
        profile: str | Profile = "cpu", seeds: tuple[int, ...] | None = None
    ) -> dict[str, pd.DataFrame]:
        return run(name, profile, seeds)

    experiment.__name__ = experiment.__qualname__ = name
    experiment.__doc__ = f"{doc} See ``run`` for the tables returned."
    return experiment


main_results = _experiment("main_results", "GRPO vs PSN fixed vs PSN adaptive (notebook 03).")
across_models = _experiment("across_models", "GRPO vs PSN fixed from other base policies (03).")
tis_ablation = _experiment("tis_ablation", "PSN without TIS, sequence-level, other caps (04).")
noise_site = _experiment("noise_site", "Noise on MLP vs attention vs all weights (05).")
sigma_sweep = _experiment("sigma_sweep", "Absolute and relative sigmas, noise scopes (06).")
adaptive_scheduler = _experiment("adaptive_scheduler", "Fixed sigma vs Variants I, II (07).")
passk_training = _experiment("passk_training", "Pass@k training with and without PSN (08).")
entropy_dynamics = _experiment("entropy_dynamics", "Training logs: entropy, reward (10).")
coverage = _experiment("coverage", "Solved sets, distinct solutions, diversity (11, 12).")
ood = _experiment("ood", "Transfer to the out-of-distribution benchmarks (13).")
weak_prefix = _experiment("weak_prefix", "GRPO with and without weak prefixes (09).")
weak_prefix_ablation = _experiment(
    "weak_prefix_ablation", "Weak prefixes: truncation, p, prefix source (09)."
)
psn_with_weak_prefix = _experiment("psn_with_weak_prefix", "PSN and weak prefixes together (14).")


def prefix_quality_table(profile: str | Profile = "cpu", seed: int = 0) -> pd.DataFrame:
    """How many training prefixes can still be completed to a correct chain, exactly (the weak
    paper's Figure 4 asked an LLM judge): one row per (truncation, source) the ablations use,
    with ``psnlib.weak_prefix.prefix_quality``'s shares and the mean prefix length in steps."""
    rows = []
    for truncation, source in (("entropy", "weak"), ("random", "weak"), ("entropy", "same_family")):
        data = prefix_train_set(profile, seed, truncation=truncation, source=source)
        steps = sum(data["prefix_steps"]) / max(len(data), 1)
        rows.append(
            {"truncation": truncation, "source": source, "mean_steps": steps} | prefix_quality(data)
        )
    return pd.DataFrame(rows)


def rl_narrows_coverage(
    profile: str | Profile = "cpu", seeds: tuple[int, ...] | None = None
) -> dict[str, pd.DataFrame]:
    """Base vs GRPO pass@k (notebook 02): ``run``'s tables plus ``crossover`` (per benchmark and
    seed, the smallest k at which the base policy catches up with GRPO)."""
    results = run("rl_narrows_coverage", profile, seeds)
    results["crossover"] = crossover(results["curves"], BASE_POLICY.label, GRPO.label)
    return results


def _plan_entries(profile: str | Profile) -> Iterator[tuple[str, Variant, int, tuple[str, ...]]]:
    """(experiment, variant, seed, benchmarks) of every plan, in plan order."""
    for name in PLANS:
        p = plan(name, profile)
        for v in p.variants:
            for seed in v.seeds(p.seeds):
                yield name, v, seed, p.benchmarks


def planned_work(profile: str | Profile = "cpu") -> list[tuple[Variant, int, tuple[str, ...]]]:
    """Every distinct (variant, seed) the experiments train or load, once, with the union of the
    benchmarks they evaluate it on, in plan order: what ``psnlib.reproduce --workers`` prepares
    in parallel before the notebooks run."""
    work: dict[str, tuple[Variant, int, dict[str, None]]] = {}
    for _, v, seed, benchmarks in _plan_entries(profile):
        work.setdefault(v.run_key(profile, seed), (v, seed, {}))[2].update(
            dict.fromkeys(benchmarks)
        )
    return [(v, seed, tuple(benchmarks)) for v, seed, benchmarks in work.values()]


def planned_runs(profile: str | Profile = "cpu") -> pd.DataFrame:
    """Every policy the experiments train or evaluate, one row per distinct run (arm, seed and
    settings; base policies have arm ``base`` and train nothing), with the experiments that share
    it and how many benchmarks it is evaluated on: the compute budget of ``make reproduce``."""
    rows: dict[str, dict] = {}
    for name, v, seed, benchmarks in _plan_entries(profile):
        key = v.run_key(profile, seed)
        row = rows.setdefault(
            key,
            {"run": key, "arm": v.arm, "seed": seed, "policy": v.label}
            | {"used_by": [], "benchmarks": set()},
        )
        row["used_by"] += [name] if name not in row["used_by"] else []
        row["benchmarks"] |= set(benchmarks)
    table = pd.DataFrame(list(rows.values()))
    return table.assign(
        used_by=table["used_by"].map(", ".join), benchmarks=table["benchmarks"].map(len)
    )


def noise_frontier(
    profile: str | Profile = "cpu", sigmas: tuple[float, ...] | None = None, seed: int = 0
) -> pd.DataFrame:
    """pass@k of the base policy with its MLP weights perturbed once by noise of each sigma
    (default: 0 and the profile's sweep) on the ablation benchmarks (notebook 00).

    Returns curves with columns policy, sigma, benchmark, k, pass_at_k, lo, hi.
    """
    profile = get_profile(profile)
    model, tokenizer, _ = base_policy(profile)
    curves = []
    for sigma in (0.0, *profile.sigma_sweep) if sigmas is None else sigmas:
        key = BASE_POLICY.run_key(profile, seed) + (f"-sigma{sigma:g}" if sigma else "")
        with perturbed(model, NoiseConfig(sigma=sigma, seed=seed)):
            tables = evaluate_benchmarks(
                model, tokenizer, profile, profile.ablation_benchmarks, run_key=key, seed=EVAL_SEED
            )
        curve = tables["curves"].drop(columns=["run", "seed", "seconds"])
        curves.append(curve.assign(policy=f"sigma={sigma:g}", sigma=sigma))
    return pd.concat(curves, ignore_index=True)


def side_by_side(
    profile: str | Profile, variants: list[Variant], problem: Problem, seed: int = 0
) -> pd.DataFrame:
    """Fresh samples of each variant (at training seed ``seed``) on one problem, as many as an
    evaluation draws; keeps ``profile.example_responses`` per variant, correct ones first.

    Returns columns policy, response, correct, correct_in_draw (how many of the draw were)."""
    profile = get_profile(profile)
    rows = []
    for v in variants:
        model, tokenizer, _ = load_variant(profile, v, seed)
        (texts,) = generate_samples(
            model,
            tokenizer,
            [problem.prompt],
            profile.eval_samples,
            temperature=profile.eval_temperature,
            max_new_tokens=profile.max_completion_length,
            seed=EVAL_SEED,
            progress=False,
        )
        graded = sorted(((verify(problem, t).correct, t) for t in texts), key=lambda x: not x[0])
        hits = sum(ok for ok, _ in graded)
        for ok, text in graded[: profile.example_responses]:
            rows.append(
                {"policy": v.label, "response": text, "correct": ok, "correct_in_draw": hits}
            )
    return pd.DataFrame(rows)


def testbed(profile: str | Profile = "cpu", benchmarks: tuple[str, ...] = ()) -> dict:
    """The testbed's base and weak policies and their pass@k (notebook 01), on ``benchmarks``
    (default: the ablation benchmarks).

    Returns ``{"curves": policy x benchmark x k, "policies": one row per policy}``.
    """
    profile = get_profile(profile)
    curves, policies = [], []
    for name, spec, build in (
        ("base", profile.base, base_policy),
        ("weak", profile.weak, weak_policy),
    ):
        start = time.perf_counter()
        model, tokenizer, path = build(profile)
        meta = policy_meta(path)
        tables = evaluate_benchmarks(
            model,
            tokenizer,
            profile,
            benchmarks or profile.ablation_benchmarks,
            run_key=f"{name}-{spec_hash(spec)}",
            seed=EVAL_SEED,
        )
        curves.append(tables["curves"].drop(columns=["run", "seed"]).assign(policy=name))
        policies.append(
            {
                "policy": name,
                "path": str(path),
                "parameters": count_parameters(model),
                "build_seconds": meta["train_seconds"],
                "final_sft_loss": meta["final_loss"],
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    return {"curves": pd.concat(curves, ignore_index=True), "policies": pd.DataFrame(policies)}
