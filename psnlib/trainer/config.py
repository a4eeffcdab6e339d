"""``PSNGRPOConfig``: TRL's ``GRPOConfig`` plus the PSN-GRPO settings (noise, TIS, sigma
scheduler, advantages, rollout engine), each documented once and validated when the config is
built. ``PSNGRPOTrainer`` (``psnlib.trainer``) reads it; split from the trainer as TRL splits
``grpo_config.py`` from ``grpo_trainer.py``. The checks of the settings, and the tables of
allowed values they read, are ``psnlib.trainer.config_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from psnlib.noise import NoiseConfig
from psnlib.schedulers import SCHEDULERS, DiversitySigma, FixedSigma, KLTargetSigma, SigmaScheduler
from psnlib.similarity import check_similarity
from psnlib.tis import check_tis
from psnlib.trainer.config_checks import (
    ADAPTIVE_RANGES,
    ADVANTAGE_MODES,
    PSN_RANGES,
    TRAINING_RANGES,
    ConfigChecks,
)


@dataclass
class PSNGRPOConfig(ConfigChecks, GRPOConfig):
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
