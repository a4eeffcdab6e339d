"""psnlib: parameter-space noise and weak-model guidance for RLVR, replicated.

The public API is re-exported here; each name lives in the module that implements it.
"""

from psnlib.advantages import grpo_advantages, passk_advantages
from psnlib.evaluate import evaluate_answers, evaluate_benchmarks, evaluate_policy
from psnlib.io import atomic_write_json, data_dir
from psnlib.metrics import pass_at_k, pass_at_k_curve
from psnlib.models import build_tokenizer, load_policy, save_policy, tiny_policy
from psnlib.noise import CLEAN, NoiseConfig, noise_indices, perturbed, perturbed_rows
from psnlib.pretrain import base_policy, build_policy, weak_policy
from psnlib.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.runs import fit, train_policy
from psnlib.sampling import Samples, generate_samples, sample_prompts, sample_rows, sample_tokens
from psnlib.schedulers import DiversitySigma, FixedSigma, KLTargetSigma, SigmaScheduler
from psnlib.tasks import (
    BENCHMARKS,
    MAIN_BENCHMARK,
    countdown_reward,
    load_benchmark,
    load_real_benchmark,
    math_reward,
    rl_train_set,
    sft_corpus,
    task_reward,
    train_problems,
)
from psnlib.tis import kl_proxy, tis_diagnostics, tis_weights
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.variants import Variant, compare
from psnlib.vllm_rollouts import generate_noisy, noisy_weights
from psnlib.weak_prefix import (
    build_prefixes,
    choose_prefixed,
    entropy_cut,
    prefix_quality,
    prefix_train_set,
    split_steps,
)

__version__ = "0.1.0"

__all__ = [
    "CLEAN",
    "Samples",
    "Variant",
    "build_prefixes",
    "choose_prefixed",
    "compare",
    "entropy_cut",
    "evaluate_answers",
    "evaluate_benchmarks",
    "evaluate_policy",
    "prefix_quality",
    "prefix_train_set",
    "sample_prompts",
    "sample_rows",
    "sample_tokens",
    "split_steps",
    "DiversitySigma",
    "FixedSigma",
    "KLTargetSigma",
    "SigmaScheduler",
    "BENCHMARKS",
    "NoiseConfig",
    "PSNGRPOConfig",
    "PSNGRPOTrainer",
    "grpo_advantages",
    "kl_proxy",
    "noise_indices",
    "passk_advantages",
    "perturbed",
    "perturbed_rows",
    "tis_diagnostics",
    "tis_weights",
    "fit",
    "generate_noisy",
    "noisy_weights",
    "train_policy",
    "MAIN_BENCHMARK",
    "PROFILES",
    "PolicySpec",
    "Profile",
    "atomic_write_json",
    "base_policy",
    "build_policy",
    "build_tokenizer",
    "countdown_reward",
    "data_dir",
    "generate_samples",
    "get_profile",
    "load_benchmark",
    "load_real_benchmark",
    "math_reward",
    "load_policy",
    "pass_at_k",
    "pass_at_k_curve",
    "rl_train_set",
    "save_policy",
    "sft_corpus",
    "task_reward",
    "train_problems",
    "tiny_policy",
    "weak_policy",
]
