"""``PSNGRPOConfig``: TRL's ``GRPOConfig`` plus the PSN-GRPO settings (noise, TIS, sigma
scheduler, advantages, rollout engine), each documented once and validated when the config is
built. ``PSNGRPOTrainer`` (``psnlib.trainer``) reads it; split from the trainer as TRL splits
``grpo_config.py`` from ``grpo_trainer.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig

from psnlib.noise import EVERY_PARAMETER, NoiseConfig, check_replicas
from psnlib.schedulers import SCHEDULERS, DiversitySigma, FixedSigma, KLTargetSigma, SigmaScheduler
from psnlib.similarity import check_similarity
from psnlib.tis import MAX_LOG_RATIO, check_tis
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


@dataclass
class PSNGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the PSN-GRPO settings; every GRPO setting keeps its meaning."""

    sigma: float = field(
        default=0.001,
        metadata={
            "help": "Noise scale of W~ = W + sigma * eps, in [0, 1] (paper: 0.001; 0 turns noise "
            "off)."
        },
    )
    noise_targets: list[str] = field(
        default_factory=lambda: ["mlp"],
        metadata={
            "help": "Perturbed weights: sites 'mlp' (the paper's choice), 'attn', 'all' (every "
            "decoder linear layer), 'every_parameter' (every floating-point parameter, as the "
            "released code; noise_scope='step', or any vLLM scope) or regexes searched in "
            "parameter names."
        },
    )
    noise_scope: str = field(
        default="step",
        metadata={
            "help": "One noise sample per 'step' (released code; noise_replicas: R per step), per "
            "'prompt' group, or per 'rollout' index (rollout k of every group gets sample k)."
        },
    )
    noise_replicas: int = field(
        default=1,
        metadata={
            "help": "R, noise_scope='step' only: independent noise draws per step, draw r for the "
            "r-th of R contiguous slices of the step's prompt groups (the released code's R "
            "rollout replicas, each with its own draw); 1..prompts per generation batch; 1: one "
            "draw for the whole step."
        },
    )
    noise_relative: bool = field(
        default=False,
        metadata={"help": "Scale sigma by each weight tensor's RMS (not in the paper)."},
    )
    noise_seed: int | None = field(
        default=None,
        metadata={"help": "Seed of the noise draws; None uses `seed`."},
    )
    sigma_scheduler: str = field(
        default="fixed",
        metadata={
            "help": "How sigma changes between steps: 'fixed', 'kl_target' (Variant I: steer the "
            "KL proxy to kl_target) or 'diversity' (Variant II: raise sigma when the clean "
            "policy's answers grow alike and certain). `sigma` is the starting value."
        },
    )
    sigma_min: float = field(
        default=1e-6,
        metadata={"help": "Lower bound of an adaptive sigma, in (0, 1] (released code: 1e-6)."},
    )
    sigma_max: float = field(
        default=0.5,
        metadata={"help": "Upper bound of an adaptive sigma, in (0, 1] (released code: 0.5)."},
    )
    kl_target: float = field(
        default=0.004,
        metadata={"help": "Variant I: target of the KL proxy (paper: 0.003-0.005)."},
    )
    kl_factor: float = field(
        default=1.01,
        metadata={"help": "Variant I: sigma is divided or multiplied by this factor (> 1)."},
    )
    kl_tolerance: float = field(
        default=1.1,
        metadata={
            "help": "Variant I: sigma falls when the proxy exceeds kl_tolerance * kl_target and "
            "rises below kl_target / kl_tolerance."
        },
    )
    div_lam: float = field(
        default=0.5,
        metadata={"help": "Variant II: lam of Ind = lam * d_sem + (1 - lam) * SC_norm, in [0, 1]."},
    )
    div_beta: float = field(
        default=0.99,
        metadata={"help": "Variant II: beta in (0, 1); sigma /= beta (collapse) or *= beta."},
    )
    div_fraction: float = field(
        default=1.0,
        metadata={
            "help": "Variant II: share of each step's prompts (rounded up) that the clean policy "
            "answers twice, in (0, 1]; 1 is the paper's every prompt."
        },
    )
    div_similarity: str = field(
        default="auto",
        metadata={
            "help": "Variant II: d_sem as 'semantic' (all-MiniLM-L6-v2 cosine, extra 'semantic'), "
            "'lexical' (difflib match ratio) or 'auto' (semantic where installed)."
        },
    )
    use_tis: bool = field(
        default=True,
        metadata={
            "help": "Multiply the per-token loss by min(pi_clean / pi_noisy, tis_cap). With "
            "use_vllm, TRL's vLLM importance-sampling correction does it: use_tis, tis_level and "
            "tis_cap set vllm_importance_sampling_{correction,mode,clip_max}."
        },
    )
    tis_cap: float = field(
        default=10.0,
        metadata={"help": "TIS truncation C, in (0, exp(20)] (paper: 10)."},
    )
    tis_level: str = field(
        default="token",
        metadata={
            "help": "'token' ratios, one 'sequence' ratio from summed log-probs, or "
            "'sequence_mask': that ratio, masked out of the loss outside [1/C, C] (psnlib.tis)."
        },
    )
    advantage_mode: str = field(
        default="grpo",
        metadata={"help": "'grpo' (TRL's advantages) or 'passk' (Pass@k training, Chen et al.)."},
    )
    passk_k: int = field(
        default=4,
        metadata={"help": "k of Pass@k training (advantage_mode='passk'); 1..num_generations."},
    )
    prefix_prob: float = field(
        default=0.0,
        metadata={
            "help": "Weak-model guidance: probability that a prompt group continues its weak "
            "prefix (train-dataset column `weak_prefix`, psnlib.weak_prefix.build_prefixes) "
            "instead of starting from the prompt; paper 0.2; 0 turns guidance off."
        },
    )
    loss_groups: int = field(
        default=4,
        metadata={
            "help": "The loss forward runs the batch's rollouts in this many groups of similar "
            "completion length, each cut to its longest completion (psnlib.trainer.length_groups): "
            "the padding is not computed; the same numbers up to rounding. 1: TRL's one "
            "forward over the padded batch."
        },
    )
    rollout_engine: str = field(
        default="psnlib",
        metadata={
            "help": "Sampler of the training rollouts: 'psnlib' (psnlib.sampling; Llama-layout "
            "models, plain temperature sampling) or 'generate' (TRL's transformers generate); "
            "unused with use_vllm (vLLM samples them, psnlib.trainer.vllm_rollouts)."
        },
    )

    def __post_init__(self) -> None:
        self.check_counts()
        self.check_numbers(TRAINING_RANGES)
        self.check_integers()
        self.check_precision()
        self.name_checkpointing()
        super().__post_init__()
        self.check_replicas()
        self.noise_config()  # validates sigma, noise_scope and noise_targets
        self.check_every_parameter()
        self.sigma_schedule()  # validates sigma_scheduler and its settings
        if self.sigma_scheduler == "diversity":
            check_similarity(self.div_similarity)
            if not 0 < self.div_fraction <= 1:
                raise ValueError(f"div_fraction must be in (0, 1], got {self.div_fraction}")
        check_tis(self.tis_cap, self.tis_level)
        if self.advantage_mode not in ADVANTAGE_MODES:
            raise ValueError(
                f"unknown advantage_mode {self.advantage_mode!r}; allowed: "
                f"{', '.join(ADVANTAGE_MODES)}"
            )
        if self.advantage_mode == "passk" and not 1 <= self.passk_k <= self.num_generations:
            raise ValueError(
                f"passk_k must be between 1 and num_generations={self.num_generations} (the group "
                f"size), got {self.passk_k}"
            )
        if not 0.0 <= self.prefix_prob <= 1.0:  # also rejects NaN
            raise ValueError(f"prefix_prob must be in [0, 1], got {self.prefix_prob}")
        self.check_numbers(PSN_RANGES)  # after the checks above, whose messages say more
        if self.sigma_scheduler != "fixed":
            self.check_numbers(ADAPTIVE_RANGES)
        self.check_rollout_engine()
        if self.use_transformers_continuous_batching:
            raise ValueError(
                "PSNGRPOTrainer perturbs the transformers model that `generate` runs; set "
                "use_transformers_continuous_batching=False (use_vllm=True is supported)"
            )
        if self.use_vllm:
            self.use_vllm_tis()

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

    def noise_config(self) -> NoiseConfig:
        """The ``NoiseConfig`` of these settings."""
        return NoiseConfig(
            sigma=self.sigma,
            targets=self.noise_targets,  # a site or regex string, or a list of them
            scope=self.noise_scope,
            relative=self.noise_relative,
            seed=self.seed if self.noise_seed is None else self.noise_seed,
            replicas=self.noise_replicas,
        )

    def sigma_schedule(self) -> SigmaScheduler:
        """A fresh scheduler of these settings, starting from ``sigma``."""
        if self.sigma_scheduler not in SCHEDULERS:
            raise ValueError(
                f"unknown sigma_scheduler {self.sigma_scheduler!r}; allowed: "
                f"{', '.join(SCHEDULERS)}"
            )
        bounds = {"sigma_min": self.sigma_min, "sigma_max": self.sigma_max}
        if self.sigma_scheduler == "kl_target":
            return KLTargetSigma(
                self.sigma,
                kl_target=self.kl_target,
                kl_factor=self.kl_factor,
                kl_tolerance=self.kl_tolerance,
                **bounds,
            )
        if self.sigma_scheduler == "diversity":
            return DiversitySigma(
                self.sigma, div_lam=self.div_lam, div_beta=self.div_beta, **bounds
            )
        return FixedSigma(self.sigma)
