"""What a ``PSNGRPOConfig`` is checked against when it is built, and the checks.

The tables of allowed values (``ADVANTAGE_MODES``, ``ROLLOUT_ENGINES``, the counts that must be
>= 1, the ranges of TRL's and psnlib's numbers, the seeds' range ``MAX_SEED``), ``check_number``,
which raises a one-line ``ValueError`` naming a setting outside its range, and ``ConfigChecks``,
the mixin of ``PSNGRPOConfig`` (``psnlib.trainer.config``) whose methods check its counts,
numbers, seeds, precision on a CPU, rollout engine, noise replicas and site, and set TRL's vLLM
importance-sampling correction from the TIS settings. ``PSNGRPOConfig.__post_init__`` calls them.
"""

from __future__ import annotations

import math

import torch

from psnlib.noise import EVERY_PARAMETER, check_replicas
from psnlib.tis import MAX_LOG_RATIO
from psnlib.trainer.vllm_rollouts import check_tis_sampling

ADVANTAGE_MODES = ("grpo", "passk")
COUNTS = (  # settings that count something and must be >= 1
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_completion_length",
    "num_iterations",
    "loss_groups",
)
ROLLOUT_ENGINES = ("psnlib", "generate")
# Numbers that must be finite and in range: (low, high, low excluded, high excluded, why).
TRAINING_RANGES: dict[str, tuple[float, float, bool, bool, str]] = {  # TRL's and transformers'
    "learning_rate": (0, math.inf, True, True, ""),
    "temperature": (0, math.inf, True, True, ""),
    "beta": (0, math.inf, False, True, ""),
    "weight_decay": (0, math.inf, False, True, ""),
    "max_grad_norm": (0, math.inf, False, True, " (0 turns clipping off)"),
    "adam_beta1": (0, 1, False, True, ""),
    "adam_beta2": (0, 1, False, True, ""),
    "adam_epsilon": (0, math.inf, False, True, ""),
    "epsilon": (0, math.inf, False, True, ""),
    "epsilon_high": (0, math.inf, False, True, ""),
    "delta": (0, math.inf, True, True, ""),
    "top_entropy_quantile": (0, 1, False, False, ""),
    "top_p": (0, 1, True, False, ""),
    "min_p": (0, 1, False, False, ""),
    "repetition_penalty": (0, math.inf, True, True, ""),
    "num_train_epochs": (0, math.inf, True, True, ""),
    "warmup_steps": (0, math.inf, False, True, ""),
}
PSN_RANGES: dict[str, tuple[float, float, bool, bool, str]] = {
    "sigma": (0, 1, False, False, " (absolute noise, on weights of order 0.02; paper: 0.001)"),
    "tis_cap": (0, math.exp(MAX_LOG_RATIO), True, False, " (ratios stop at exp(20); paper: 10)"),
}
# An adaptive scheduler's bounds (its other settings are checked by the scheduler itself).
ADAPTIVE_RANGES: dict[str, tuple[float, float, bool, bool, str]] = {
    "sigma_min": (0, 1, True, False, ""),
    "sigma_max": (0, 1, True, False, ""),
}
# Integers in numpy's seed range; data_seed and noise_seed may be None.
SEEDS = ("seed", "data_seed", "noise_seed")
MAX_SEED = 2**32 - 1


def check_number(
    name: str, value: object, low: float, high: float, low_out: bool, high_out: bool, why: str
) -> None:
    """Raise a one-line ValueError naming ``name`` and ``value`` unless it is a finite number
    within the bounds (``low_out``/``high_out``: the bound itself is excluded)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and math.isfinite(value):
        above = low < value if low_out else low <= value
        if above and (value < high if high_out else value <= high):
            return
    if high == math.inf:
        allowed = f"a finite number {'>' if low_out else '>='} {low:g}"
    else:
        allowed = f"in {'(' if low_out else '['}{low:g}, {high:g}{')' if high_out else ']'}"
    raise ValueError(f"{name} must be {allowed}{why}, got {value!r}")


class ConfigChecks:
    """Mixin for ``PSNGRPOConfig`` (a TRL ``GRPOConfig``): the checks of its settings."""

    def check_counts(self) -> None:
        """Step, batch and length counts are positive (``max_steps`` -1: train epochs)."""
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(
                f"max_steps must be >= 1 (or -1 to train num_train_epochs), got {self.max_steps}"
            )
        for name in COUNTS:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")

    def check_numbers(self, ranges: dict[str, tuple[float, float, bool, bool, str]]) -> None:
        """Each setting of ``ranges`` that is not None is a finite number in its range."""
        for name, bounds in ranges.items():
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), *bounds)

    def check_integers(self) -> None:
        """Seeds are integers in [0, 2**32 - 1] (numpy's range); ``passk_k`` is an integer >= 1."""
        for name in SEEDS:
            value = getattr(self, name)
            if value is None and name != "seed":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
                raise ValueError(f"{name} must be an integer in [0, {MAX_SEED}], got {value!r}")
        if isinstance(self.passk_k, bool) or not isinstance(self.passk_k, int) or self.passk_k < 1:
            raise ValueError(f"passk_k must be an integer >= 1, got {self.passk_k!r}")

    def name_checkpointing(self) -> None:
        """TRL's ``gradient_checkpointing`` (default True), under the name transformers 5 reads,
        ``activation_checkpointing``, when that is not given: the same setting, without the
        FutureWarning that the old name raises at every config."""
        if getattr(self, "activation_checkpointing", False) is None:  # absent in older versions
            self.activation_checkpointing = self.gradient_checkpointing

    def check_precision(self) -> None:
        """On a CPU, TRL's default ``bf16=True`` (meant for GPUs) becomes False, and an explicit
        ``bf16=True`` is refused: psnlib's rollout sampler and TIS work in float32 there."""
        on_cpu = self.use_cpu or not (
            torch.cuda.is_available()
            or torch.backends.mps.is_available()
            or torch.xpu.is_available()
        )
        if not on_cpu:
            return
        if self.bf16 is None:  # not given: TRL would turn it on
            self.bf16 = False
        elif self.bf16:
            raise ValueError(
                "bf16=True (bf16 mixed precision) is not supported on a CPU: psnlib samples "
                "rollouts and compares log-probs in float32 there; set bf16=False (the default "
                "on a CPU when bf16 is not given)"
            )

    def use_vllm_tis(self) -> None:
        """With vLLM the behaviour log-probs come from the vLLM engine
        (``psnlib.trainer.vllm_rollouts``), and TRL's vLLM importance-sampling correction is the
        TIS: ``use_tis``, ``tis_level`` and ``tis_cap`` set its switch, mode (``token_truncate``,
        ``sequence_truncate``, or ``sequence_mask`` with the band ``[1/C, C]``: Eq. MIS of
        ``psnlib.tis``) and cap."""
        if self.noise_scope == "prompt":
            raise ValueError(
                "noise_scope='prompt' with use_vllm would sync the weights to vLLM once per prompt "
                "group; use noise_scope='step' or 'rollout'"
            )
        local = self.per_device_train_batch_size * self.steps_per_generation
        if local % self.num_generations:
            raise ValueError(
                f"with use_vllm each process's generation batch (per_device_train_batch_size x "
                f"steps_per_generation = {local}) must hold whole groups of num_generations="
                f"{self.num_generations}, so all processes make the same syncs and generate calls"
            )
        if self.use_tis:
            check_tis_sampling(
                {"top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p},
                self.generation_kwargs,
            )
        self.vllm_importance_sampling_correction = self.use_tis
        masked = self.tis_level == "sequence_mask"
        self.vllm_importance_sampling_mode = (
            self.tis_level if masked else f"{self.tis_level}_truncate"
        )
        self.vllm_importance_sampling_clip_max = self.tis_cap
        self.vllm_importance_sampling_clip_min = 1.0 / self.tis_cap if masked else None

    def check_rollout_engine(self) -> None:
        """``rollout_engine`` must be known; 'psnlib' samples softmax(logits / T) and no more."""
        if self.rollout_engine not in ROLLOUT_ENGINES:
            raise ValueError(
                f"unknown rollout_engine {self.rollout_engine!r}; allowed: "
                f"{', '.join(ROLLOUT_ENGINES)}"
            )
        if self.rollout_engine == "generate" or self.use_vllm:  # vLLM samples the rollouts
            return
        plain = {"top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}
        changed = {
            k: getattr(self, k) for k, v in plain.items() if getattr(self, k) not in (v, None)
        }
        if self.generation_kwargs:
            changed["generation_kwargs"] = self.generation_kwargs
        if self.temperature <= 0:
            changed["temperature"] = self.temperature
        if changed:
            raise ValueError(
                f"rollout_engine='psnlib' samples softmax(logits / temperature) with temperature "
                f"> 0 and nothing else, got {changed}; set rollout_engine='generate'"
            )

    def check_every_parameter(self) -> None:
        """The ``every_parameter`` site also perturbs embeddings and norms, which the
        transformers path perturbs in place, one draw for all rows: step scope only there (vLLM
        is sent whole noisy weights per noise sample, so it serves 'rollout' too)."""
        every = EVERY_PARAMETER in self.noise_config().targets
        if every and self.noise_scope != "step" and not self.use_vllm:
            raise ValueError(
                f"noise_targets {EVERY_PARAMETER!r} with noise_scope={self.noise_scope!r} needs "
                f"per-row noise on embeddings and norms, which runs on nn.Linear layers only; "
                f"allowed: noise_scope='step', or use_vllm=True (scope 'step' or 'rollout')"
            )

    def check_replicas(self) -> None:
        """``noise_replicas`` is an integer >= 1, above 1 only in step scope, and at most the
        prompts of a generation batch (every replica samples at least one prompt group)."""
        replicas = check_replicas(self.noise_replicas, self.noise_scope, "noise_replicas")
        if replicas == 1:  # one draw per step: nothing to slice (and the batch checked elsewhere)
            return
        prompts = self.generation_batch_size // self.num_generations  # over all processes
        if replicas > prompts:
            raise ValueError(
                f"noise_replicas={replicas} exceeds the {prompts} prompts of a generation batch "
                f"(generation_batch_size={self.generation_batch_size} / num_generations="
                f"{self.num_generations}); allowed: 1..{prompts}"
            )
