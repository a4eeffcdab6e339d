"""psnlib: parameter-space noise and weak-model guidance for RLVR, replicated.

The public API is re-exported here; each name lives in the module that implements it.
"""

from psnlib.io import atomic_write_json, data_dir
from psnlib.metrics import pass_at_k, pass_at_k_curve
from psnlib.models import build_tokenizer, load_policy, save_policy, tiny_policy
from psnlib.pretrain import base_policy, build_policy, weak_policy
from psnlib.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.sampling import generate_samples
from psnlib.tasks import (
    BENCHMARKS,
    MAIN_BENCHMARK,
    countdown_reward,
    load_benchmark,
    rl_train_set,
    sft_corpus,
)

__version__ = "0.1.0"

__all__ = [
    "BENCHMARKS",
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
    "load_policy",
    "pass_at_k",
    "pass_at_k_curve",
    "rl_train_set",
    "save_policy",
    "sft_corpus",
    "tiny_policy",
    "weak_policy",
]
