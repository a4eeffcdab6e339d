"""Tasks: Countdown arithmetic problems, verification and the disjoint benchmark splits."""

from psnlib.tasks.countdown import CHARSET, Problem, countdown_reward, verify
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
    "load_benchmark",
    "rl_train_set",
    "sft_corpus",
    "verify",
]
