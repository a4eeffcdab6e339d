"""Tasks: Countdown arithmetic problems, verification and the disjoint benchmark splits."""

from psnlib.tasks.countdown import CHARSET, Problem, verify
from psnlib.tasks.generate import generate_problems
from psnlib.tasks.math_reward import math_reward
from psnlib.tasks.real import (
    REAL_BENCHMARKS,
    RealBenchmark,
    load_real_benchmark,
    real_benchmark_names,
)
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
    "REAL_BENCHMARKS",
    "RealBenchmark",
    "BenchmarkSpec",
    "Problem",
    "countdown_reward",
    "generate_problems",
    "load_benchmark",
    "load_real_benchmark",
    "math_reward",
    "real_benchmark_names",
    "rl_train_set",
    "sft_corpus",
    "verify",
]
