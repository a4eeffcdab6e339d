"""psnlib: parameter-space noise (PSN-GRPO) and weak-model guidance for RLVR, as a library.

``import psnlib`` is the method: the trainer and its config, noise injection, truncated
importance sampling, the sigma schedulers, Pass@k advantages, the weak-prefix functions,
sampling, pass@k and the rewards. Each name lives in the module that implements it. The
replication of the papers (profiles, runs, experiments, claims, notebooks) is the wing
``psnlib.replication``, which the library never imports.
"""

from psnlib.advantages import grpo_advantages, passk_advantages
from psnlib.metrics import pass_at_k, pass_at_k_curve
from psnlib.noise import NoiseConfig, noise_indices, perturbed
from psnlib.sampling import generate_samples, sample_prompts
from psnlib.schedulers import (
    DiversitySigma,
    FixedSigma,
    KLTargetSigma,
    SigmaScheduler,
    self_certainty,
)
from psnlib.tasks.math_reward import math_reward
from psnlib.tasks.reward import countdown_reward
from psnlib.tis import kl_proxy, tis_diagnostics, tis_weights
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.weak_prefix import build_prefixes, choose_prefixed, entropy_cut, split_steps

__version__ = "0.1.0"

__all__ = [
    "PSNGRPOConfig",
    "PSNGRPOTrainer",
    "NoiseConfig",
    "perturbed",
    "noise_indices",
    "tis_weights",
    "kl_proxy",
    "tis_diagnostics",
    "SigmaScheduler",
    "FixedSigma",
    "KLTargetSigma",
    "DiversitySigma",
    "self_certainty",
    "grpo_advantages",
    "passk_advantages",
    "split_steps",
    "entropy_cut",
    "build_prefixes",
    "choose_prefixed",
    "generate_samples",
    "sample_prompts",
    "pass_at_k",
    "pass_at_k_curve",
    "countdown_reward",
    "math_reward",
]
