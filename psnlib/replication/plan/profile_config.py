"""The ``Profile`` and ``PolicySpec`` dataclasses: every size knob of the replication, validated.

``psnlib.replication.plan.profiles`` holds the four profiles made of them (smoke, cpu, gpu, paper),
with why each size is what it is; this module holds what a profile may say and what it may not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from psnlib.replication.plan.arms import Arm

# The knobs equal tuning tunes (docs/protocol.md 2.13), in the order of their grids: PSN's sigma,
# GRPO's rollout temperature and TRL's entropy coefficient.
KNOBS = ("sigma", "temperature", "entropy_coef")


@dataclass(frozen=True)
class PolicySpec:
    """How to obtain a policy: a hub name / local path, or a tiny model built by SFT."""

    name_or_path: str | None = None  # hub id or directory; None means "build by SFT here"
    family: str = "qwen2"  # tiny model family: "qwen2" | "llama"
    size: str = "base"  # tiny model size: see psnlib.models.TINY_SIZES
    sft_steps: int = 0  # optimisation steps of SFT pre-training
    sft_batch_size: int = 128  # examples per SFT step
    sft_lr: float = 3e-3  # peak learning rate (linear warm-up, cosine decay)
    sft_style: str = "uniform"  # "uniform" over all correct chains, or "linear" chains only
    sft_examples: int = 100_000  # size of the SFT corpus drawn from the SFT split
    seed: int = 0
    # search traces: up to this many missed attempts before the chain (countdown.with_misses)
    sft_max_misses: int = 0


# Profile fields that count something: each an integer >= 1.
COUNTS = (
    "rl_steps",
    "rl_prompts_per_step",
    "num_generations",
    "max_completion_length",
    "passk_k",
    "eval_samples",
    "example_responses",
)


@dataclass(frozen=True)
class Profile:
    """Every size knob of the replication, for one scale."""

    name: str
    base: PolicySpec  # the target policy RL starts from
    weak: PolicySpec  # the weak, different-family policy that writes prefixes
    # RL training (GRPO / PSN-GRPO)
    rl_steps: int = 80
    rl_prompts_per_step: int = 32
    num_generations: int = 8  # G, rollouts per prompt
    max_completion_length: int = 48
    learning_rate: float = 2e-4
    rl_dataset: str = "countdown"  # training set: the testbed or a real one (psnlib.tasks.datasets)
    rl_train_problems: int = 4096  # drawn from rl_dataset; 0 = all of a real data set
    psn_sigma: float = 0.003  # fixed sigma of the PSN arm (~10% of the tiny model's MLP RMS)
    psn_scope: str = "rollout"  # noise scope of the PSN arm: step | prompt | rollout
    tis_cap: float = 10.0  # TIS truncation C
    passk_k: int = 4  # k of Pass@k training (notebook 08), at most num_generations
    # Recompute activations in the backward pass (TRL's default): saves memory on large models,
    # costs a forward pass. Speed only: it does not enter a run's cache key.
    gradient_checkpointing: bool = True
    # Evaluation
    eval_problems: int = 100  # problems per benchmark
    eval_samples: int = 256  # samples per problem (n of pass@k)
    eval_temperature: float = 1.0
    ks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    eval_engine: str = "psnlib"  # sampler of `python -m psnlib eval`: "psnlib" or "vllm"
    benchmarks: tuple[str, ...] = (
        "countdown-l1",
        "countdown-l2",
        "countdown-l3",
        "countdown-l4",
        "countdown-l5",
        "countdown-div",
        "countdown-5num",
    )
    # Experiments (psnlib.replication.plan.experiments). Runs with the same arm, seed and settings
    # are shared by every notebook, so a seed of GRPO or PSN trains once.
    seeds: tuple[int, ...] = (0, 1, 2)  # training seeds of the main comparisons (02, 03, 10-13)
    ablation_seeds: tuple[int, ...] = (0,)  # training seeds of the ablations (04-08)
    # Training seeds of the exploration baselines (notebook 16: raised rollout temperature,
    # entropy bonus), and the main seeds also evaluated out of distribution (13; None: all).
    baseline_seeds: tuple[int, ...] = (0, 1)
    ood_seeds: tuple[int, ...] | None = None
    # The exploration baselines' settings, each chosen by a rule stated before the runs (cpu:
    # profiles.py, the comment above _CPU): GRPO's rollout temperature, and TRL's entropy_coef
    # values.
    baseline_temperature: float = 1.2
    entropy_coefs: tuple[float, ...] = (0.001, 0.01)
    # An entropy coefficient run at only some of the baseline seeds (coefficient, its seeds).
    entropy_coef_seeds: tuple[tuple[float, tuple[int, ...]], ...] = ()
    # The premise's GRPO checkpoints (None: every main seed).
    premise_seeds: tuple[int, ...] | None = None
    # Extra seeds of the released-code ablation chain, whose direction was framed on seed 0:
    # its re-test on fresh seeds (issue 51), on the ablation benchmarks and, for per-step noise
    # and the released code's, on the in-distribution ones.
    chain_seeds: tuple[int, ...] = ()
    # Equal tuning for every explorer (docs/protocol.md 2.13): each knob's grid, trained at the
    # tuning seeds (disjoint from every reported seed) and evaluated on the tuning benchmarks
    # (problems no reported evaluation draws), with GRPO and its training path as the reference.
    tuning_seeds: tuple[int, ...] = ()
    tuning_benchmarks: tuple[str, ...] = ()
    tuning_sigmas: tuple[float, ...] = ()
    tuning_temperatures: tuple[float, ...] = ()
    tuning_entropy_coefs: tuple[float, ...] = ()
    # The value the tuning rule chose for each knob (KNOBS; psnlib.replication.analysis.tuning,
    # from the tuning records), a reviewed change once those records are in: each runs at the
    # tuned_seeds (some of baseline_seeds, fresh ones) beside the exploration baselines.
    tuned_values: tuple[tuple[str, float], ...] = ()
    tuned_seeds: tuple[int, ...] = ()
    ablation_benchmarks: tuple[str, ...] = ("countdown-l3",)  # what the ablations evaluate on
    # Where GRPO's runs at the main seeds keep their policy, as shares of rl_steps (path_steps),
    # evaluated like the final one: the training path from the base policy to the end, the
    # frontier "GRPO trained less" of pass@k at equal pass@1 (issue 41). () keeps none.
    path_fractions: tuple[float, ...] = ()
    sigma_sweep: tuple[float, ...] = (0.001, 0.003, 0.01)  # absolute sigmas (06)
    relative_sigmas: tuple[float, ...] = (0.1,)  # sigmas as a share of each weight's RMS (06)
    other_policies: tuple[PolicySpec, ...] = ()  # further base policies, "across models" (03)
    example_responses: int = 6  # responses per policy shown side by side (11)
    # PSNGRPOConfig settings the profile adds to every run (after its sizes, before the arm's)
    # and to one arm's runs (after the arm's): a real recipe's, where it differs from the
    # testbed's. Pairs keep the profile hashable; empty on the testbed (they enter run keys).
    rl_settings: tuple[tuple[str, Any], ...] = ()
    arm_settings: tuple[tuple[Arm, tuple[tuple[str, Any], ...]], ...] = ()

    def __post_init__(self) -> None:
        counts = {name: getattr(self, name) for name in COUNTS}
        counts |= {name: getattr(self, name) for name in ("rl_train_problems", "eval_problems")}
        for name, value in counts.items():
            least = 1 if name in COUNTS else 0  # 0 problems: all of a real data set
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(
                    f"profile {self.name!r}: {name} must be an integer >= {least}, got {value!r}"
                )
        if not self.ks or any(not isinstance(k, int) or k < 1 for k in self.ks):
            raise ValueError(f"profile {self.name!r}: ks must be integers >= 1, got {self.ks}")
        if self.ood_seeds is not None and not (
            self.ood_seeds and set(self.ood_seeds) <= set(self.seeds)
        ):
            raise ValueError(
                f"profile {self.name!r}: ood_seeds must be some of the main seeds {self.seeds} "
                f"(their runs are the ones evaluated out of distribution), got {self.ood_seeds}"
            )
        if not 0 < self.baseline_temperature < math.inf:
            raise ValueError(
                f"profile {self.name!r}: baseline_temperature must be a finite number > 0, "
                f"got {self.baseline_temperature!r}"
            )
        if any(
            not isinstance(f, float | int) or isinstance(f, bool) or not 0 < f < 1
            for f in self.path_fractions
        ):
            raise ValueError(
                f"profile {self.name!r}: path_fractions must be numbers strictly between 0 and 1 "
                f"(shares of rl_steps), got {self.path_fractions}"
            )
        if any(not 0 <= c < math.inf for c in self.entropy_coefs):
            raise ValueError(
                f"profile {self.name!r}: entropy_coefs must be finite numbers >= 0, "
                f"got {self.entropy_coefs}"
            )
        for coef, seeds in self.entropy_coef_seeds:
            if coef not in self.entropy_coefs or not set(seeds) <= set(self.baseline_seeds):
                raise ValueError(
                    f"profile {self.name!r}: entropy_coef_seeds must pair one of entropy_coefs "
                    f"{self.entropy_coefs} with some of baseline_seeds, got {(coef, seeds)}"
                )
        if self.premise_seeds is not None and not (
            self.premise_seeds and set(self.premise_seeds) <= set(self.seeds)
        ):
            raise ValueError(
                f"profile {self.name!r}: premise_seeds must be some of the main seeds "
                f"{self.seeds}, got {self.premise_seeds}"
            )
        reported = {*self.seeds, *self.ablation_seeds, *self.baseline_seeds, *self.chain_seeds}
        if set(self.tuning_seeds) & reported:
            raise ValueError(
                f"profile {self.name!r}: tuning_seeds must be disjoint from every reported seed, "
                f"got {sorted(set(self.tuning_seeds) & reported)} in both"
            )
        grids = (self.tuning_sigmas, self.tuning_temperatures, self.tuning_entropy_coefs)
        if self.tuning_seeds and not (self.tuning_benchmarks and all(grids)):
            raise ValueError(
                f"profile {self.name!r}: tuning_seeds need tuning_benchmarks and a grid for each "
                "knob (tuning_sigmas, tuning_temperatures, tuning_entropy_coefs)"
            )
        grid = dict(zip(KNOBS, grids, strict=True))
        for knob, value in self.tuned_values:
            if value not in grid.get(knob, ()):
                raise ValueError(
                    f"profile {self.name!r}: tuned_values must pair a knob of {KNOBS} with a "
                    f"value of its tuning grid {grid.get(knob, ())}, got {(knob, value)}"
                )
        if bool(self.tuned_values) != bool(self.tuned_seeds) or not set(self.tuned_seeds) <= set(
            self.baseline_seeds
        ):
            raise ValueError(
                f"profile {self.name!r}: tuned_seeds must be some of baseline_seeds "
                f"{self.baseline_seeds}, given with tuned_values and only with them, got "
                f"{self.tuned_seeds} for {self.tuned_values}"
            )
        if any(b in self.benchmarks for b in self.tuning_benchmarks):
            raise ValueError(
                f"profile {self.name!r}: tuning_benchmarks must be none of the reported "
                f"benchmarks {self.benchmarks}, got {self.tuning_benchmarks}"
            )

    @property
    def path_steps(self) -> tuple[int, ...]:
        """The steps at which GRPO's main runs keep their policy: each of ``path_fractions`` times
        ``rl_steps``, rounded, in 1 .. rl_steps - 1, once each, in order."""
        steps = {
            min(max(1, round(f * self.rl_steps)), self.rl_steps - 1) for f in self.path_fractions
        }
        return tuple(sorted(s for s in steps if self.rl_steps > 1))

    def with_overrides(self, **changes) -> Profile:
        """A copy with some fields changed (for sweeps), validated like the original."""
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"unknown profile field(s) {unknown}; allowed: {sorted(self.__dataclass_fields__)}"
            )
        return replace(self, **changes)
