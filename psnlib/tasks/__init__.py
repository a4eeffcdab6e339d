"""Tasks: Countdown arithmetic problems, verification and the disjoint benchmark splits; real
benchmarks and their math reward; training sets by name."""

from psnlib.tasks.countdown import CHARSET, Problem, verify
from psnlib.tasks.datasets import (
    COUNTDOWN,
    benchmark_kind,
    check_dataset,
    dataset_names,
    task_reward,
    train_problems,
)
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
    "COUNTDOWN",
    "MAIN_BENCHMARK",
    "REAL_BENCHMARKS",
    "RealBenchmark",
    "benchmark_kind",
    "BenchmarkSpec",
    "Problem",
    "check_dataset",
    "countdown_reward",
    "dataset_names",
    "generate_problems",
    "load_benchmark",
    "load_real_benchmark",
    "math_reward",
    "real_benchmark_names",
    "rl_train_set",
    "sft_corpus",
    "task_reward",
    "train_problems",
    "verify",
]
