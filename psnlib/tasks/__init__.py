"""Tasks: Countdown arithmetic problems, verification and the disjoint benchmark splits."""

from psnlib.tasks.countdown import CHARSET, Problem, verify
from psnlib.tasks.generate import generate_problems
from psnlib.tasks.reward import countdown_reward
from psnlib.tasks.splits import (
    BENCHMARKS,
    MAIN_BENCHMARK,
    BenchmarkSpec,
    load_benchmark,
    rl_train_set,
    sft_corpus,
)

__all__ = [
    "BENCHMARKS",
    "CHARSET",
    "MAIN_BENCHMARK",
    "BenchmarkSpec",
    "Problem",
    "countdown_reward",
    "generate_problems",
    "load_benchmark",
    "rl_train_set",
    "sft_corpus",
    "verify",
]
