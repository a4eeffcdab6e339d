"""RL training sets and their rewards by name: the Countdown testbed or a real data set; and
the kind of any benchmark name, Countdown split or real.

``"countdown"`` is the CPU testbed (``rl_train_set``, judged by ``countdown_reward``); any other
name is a key of ``REAL_BENCHMARKS`` (``load_real_benchmark``, judged by ``math_reward``): the
``paper`` profile trains on ``"simplerl-math-l3to5"``. A profile names its training set in
``Profile.rl_dataset``; ``psnlib.replication.compute.runs`` and the command line read it through
these functions.
"""

from __future__ import annotations

from collections.abc import Callable

from datasets import Dataset

from psnlib.tasks.math_reward import math_reward
from psnlib.tasks.real import REAL_BENCHMARKS, get_real_benchmark, load_real_benchmark
from psnlib.tasks.reward import countdown_dense_reward, countdown_reward
from psnlib.tasks.splits import BENCHMARKS, rl_train_set

COUNTDOWN = "countdown"
# The testbed's problems judged with partial credit (countdown_dense_reward): the smoke profile's
# training set, so that its tiny policy, which solves nothing, still learns in a few steps.
COUNTDOWN_DENSE = "countdown-dense"
TESTBED = (COUNTDOWN, COUNTDOWN_DENSE)


def dataset_names() -> list[str]:
    """The training sets and benchmarks a run can use: the testbed, then the loadable real ones."""
    return [*TESTBED, *(name for name, s in REAL_BENCHMARKS.items() if not s.unsupported)]


def check_dataset(name: str) -> str:
    """Return ``name`` if ``dataset_names`` has it, else raise a ValueError listing them."""
    if name not in dataset_names():
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(dataset_names())}")
    return name


def train_problems(name: str, n: int, seed: int = 0) -> Dataset:
    """``n`` training problems of ``name`` (a real data set: ``n`` drawn with ``seed``, 0 = all)."""
    if check_dataset(name) in TESTBED:
        return rl_train_set(n, seed=seed)
    return load_real_benchmark(name, n, seed=seed)


def task_reward(name: str) -> Callable[..., list[float]]:
    """The reward function (TRL's signature) that judges completions of ``name``."""
    rewards = {COUNTDOWN: countdown_reward, COUNTDOWN_DENSE: countdown_dense_reward}
    return rewards.get(check_dataset(name), math_reward)


def step_task(name: str) -> str:
    """How ``psnlib.weak_prefix.split_steps`` splits solutions of ``name`` into steps."""
    return "countdown" if check_dataset(name) in TESTBED else "math"


def benchmark_kind(name: str) -> str:
    """``"id"`` (the RL distribution) or ``"ood"``, of a Countdown split (``BENCHMARKS``) or of
    a real benchmark (its ``role``: math benchmarks are in distribution for math training)."""
    if name in BENCHMARKS:
        return BENCHMARKS[name].kind
    return "ood" if get_real_benchmark(name).role == "ood" else "id"
