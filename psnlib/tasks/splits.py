"""Countdown splits: SFT corpus, RL training set and the seven benchmarks, pairwise disjoint.

Every problem key (sorted numbers, target) hashes to a slot in 0..999 (blake2b, stable across
processes) and every split draws only from its own slot range, so no two splits share a key for
any sizes and seeds:

    SFT 0-599 | RL train 600-799 | ID levels 800-919 | div 920-979 | 5num 980-999

The five in-distribution levels share one range: a problem's level is a function of its key, so
the levels partition it (and each level gets five times the keys a private slice would give).

Levels grade the RL distribution (4 numbers 1..12, ops "+-*", targets 1..99) by the number of
distinct canonical solutions, fewer = harder, ties broken by the number of correct chains.
``LEVEL_BOUNDS`` are the cut points nearest to the quintiles of that score on 40,000 problems
drawn from the RL distribution (seed 12345), at which the levels 5..1 hold 18.6%, 22.6%, 18.5%,
20.3% and 20.0% of problems. Exactly equal shares on the solution count alone are impossible:
27.7% of problems have a single solution.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from dataclasses import dataclass

from datasets import Dataset, Features, List, Value

from psnlib.tasks.countdown import (
    STYLES,
    TRAIN_OPS,
    Key,
    Problem,
    count_solutions,
    distinct_solutions,
    random_forward_chain,
    random_solution,
    with_misses,
)
from psnlib.tasks.generate import generate_problems

N_SLOTS: int = 1000
SFT_SLOTS: tuple[int, int] = (0, 600)
RL_SLOTS: tuple[int, int] = (600, 800)
ID_SLOTS: tuple[int, int] = (800, 920)
DIV_SLOTS: tuple[int, int] = (920, 980)
FIVE_SLOTS: tuple[int, int] = (980, 1000)

LEVEL_BOUNDS: tuple[tuple[int, int], ...] = ((1, 4), (3, 8), (4, 11), (7, 52))
MAIN_BENCHMARK: str = "countdown-l3"
# A tuning benchmark (kind "tune", ``countdown-l<k>-tune``) draws level k's problems from the same
# slots as the reported level, skipping the first ``TUNE_EXCLUDED`` problems of the reported
# level's evaluation stream (seed 0): disjoint from it at every evaluation size up to this.
TUNE_EXCLUDED: int = 1000
DEFAULT_MIX: dict[str, float] = {"main": 0.8, "div": 0.1, "5num": 0.1}
DEFAULT_POOL_CAP: int = 20_000


def problem_slot(key: Key) -> int:
    """The key's hash slot in 0..999, stable across processes."""
    return int(hashlib.blake2b(repr(key).encode(), digest_size=8).hexdigest(), 16) % N_SLOTS


def in_slots(problem: Problem, slots: tuple[int, int]) -> bool:
    """Whether ``problem``'s slot lies in the half-open range ``slots``."""
    return slots[0] <= problem_slot(problem.key) < slots[1]


def difficulty_score(problem: Problem) -> tuple[int, int]:
    """(distinct canonical solutions, correct chains) with ops "+-*"; smaller is harder."""
    return distinct_solutions(problem, TRAIN_OPS), count_solutions(problem, TRAIN_OPS)


def difficulty_level(problem: Problem) -> int:
    """The level 1 (easiest) .. 5 (hardest) of a problem of the RL distribution."""
    return 5 - bisect.bisect_left(LEVEL_BOUNDS, difficulty_score(problem))


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark: the paper benchmark it plays, its generator settings and slot range."""

    name: str
    role: str
    kind: str
    level: int | None
    num_count: int
    low: int
    high: int
    ops: str
    target_range: tuple[int, int]
    require_op: str | None
    slots: tuple[int, int]
    description: str

    @property
    def generator_settings(self) -> dict:
        """Keyword arguments of ``generate_problems``."""
        return {
            "num_count": self.num_count,
            "low": self.low,
            "high": self.high,
            "ops": self.ops,
            "target_range": self.target_range,
            "require_op": self.require_op,
        }

    def accepts(self, problem: Problem) -> bool:
        """Whether a generated problem belongs to this benchmark (slot and level)."""
        return in_slots(problem, self.slots) and (
            self.level is None or difficulty_level(problem) == self.level
        )


_MAIN = {"num_count": 4, "low": 1, "high": 12, "ops": TRAIN_OPS, "target_range": (1, 99)}
_LEVEL_ROLES = ("AMC23", "Minerva", "OlympiadBench", "AIME25", "AIME24")
_LEVEL_WORDS = ("easiest", "easy", "medium (the main benchmark)", "hard", "hardest")


def _level_spec(level: int) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=f"countdown-l{level}",
        role=_LEVEL_ROLES[level - 1],
        kind="id",
        level=level,
        require_op=None,
        slots=ID_SLOTS,
        description=f"RL distribution, level {level} of 5: {_LEVEL_WORDS[level - 1]}",
        **_MAIN,
    )


def _tune_spec(level: int) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=f"countdown-l{level}-tune",
        role="tuning (no paper benchmark)",
        kind="tune",
        level=level,
        require_op=None,
        slots=ID_SLOTS,
        description=f"level {level}'s problems no reported evaluation draws: for tuning a knob",
        **_MAIN,
    )


BENCHMARKS: dict[str, BenchmarkSpec] = {
    **{f"countdown-l{level}": _level_spec(level) for level in range(1, 6)},
    **{f"countdown-l{level}-tune": _tune_spec(level) for level in range(1, 6)},
    "countdown-div": BenchmarkSpec(
        name="countdown-div",
        role="GPQA-Diamond",
        kind="ood",
        level=None,
        num_count=4,
        low=1,
        high=12,
        ops="+-*/",
        target_range=(1, 99),
        require_op="/",
        slots=DIV_SLOTS,
        description="4 numbers whose target needs division, an op absent from RL training",
    ),
    "countdown-5num": BenchmarkSpec(
        name="countdown-5num",
        role="LiveCodeBench",
        kind="ood",
        level=None,
        num_count=5,
        low=1,
        high=12,
        ops=TRAIN_OPS,
        target_range=(1, 99),
        require_op=None,
        slots=FIVE_SLOTS,
        description="5 numbers: longer chains than any RL training problem",
    ),
}

_PROBLEM_FEATURES = Features(
    {
        "prompt": Value("string"),
        "numbers": List(Value("int64")),
        "target": Value("int64"),
        "benchmark": Value("string"),
    }
)
_SFT_FEATURES = Features(
    {
        "prompt": Value("string"),
        "completion": Value("string"),
        "numbers": List(Value("int64")),
        "target": Value("int64"),
    }
)


def _seed(*parts: object) -> int:
    """A seed derived from ``parts``, so that splits sharing a user seed draw independently."""
    return int(hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest(), 16)


def _problem_dataset(problems: list[Problem], benchmark: str) -> Dataset:
    return Dataset.from_dict(
        {
            "prompt": [p.prompt for p in problems],
            "numbers": [list(p.numbers) for p in problems],
            "target": [p.target for p in problems],
            "benchmark": [benchmark] * len(problems),
        },
        features=_PROBLEM_FEATURES,
    )


def load_benchmark(name: str, n: int, seed: int = 0) -> Dataset:
    """``n`` problems of benchmark ``name``: columns prompt, numbers, target, benchmark."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}: known are {sorted(BENCHMARKS)}")
    spec = BENCHMARKS[name]
    exclude = None
    if spec.kind == "tune":  # the reported level's evaluation problems, at any size up to this
        reported = BENCHMARKS[f"countdown-l{spec.level}"]
        exclude = {
            p.key
            for p in generate_problems(
                TUNE_EXCLUDED, seed=_seed(reported.name, 0), accept=reported.accepts, **_MAIN
            )
        }
    problems = generate_problems(
        n, seed=_seed(name, seed), exclude=exclude, accept=spec.accepts, **spec.generator_settings
    )
    return _problem_dataset(problems, name)


def rl_train_set(n: int, seed: int = 0) -> Dataset:
    """``n`` RL training problems (the RL distribution, all levels), same columns."""
    problems = generate_problems(
        n, seed=_seed("rl-train", seed), accept=lambda p: in_slots(p, RL_SLOTS), **_MAIN
    )
    return _problem_dataset(problems, "rl-train")


def _allocate(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split ``total`` by ``weights`` (largest remainders), deterministically."""
    norm = sum(weights.values())
    exact = {k: total * w / norm for k, w in weights.items()}
    counts = {k: int(x) for k, x in exact.items()}
    by_remainder = sorted(weights, key=lambda k: (counts[k] - exact[k], k))
    for k in by_remainder[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def _pool_examples(
    component: str, count: int, pool_size: int, seed: int, style: str, max_misses: int
) -> list[tuple[Problem, str]]:
    """``count`` examples cycling over a pool of ``pool_size`` distinct SFT-slot problems."""
    settings = dict(_MAIN, ops="+-*/", require_op="/") if component == "div" else _MAIN
    ops = settings["ops"]

    def accept(p: Problem) -> bool:
        return in_slots(p, SFT_SLOTS) and count_solutions(p, ops, style) > 0

    rng = random.Random(_seed("sft", component, style, seed))
    pool = generate_problems(pool_size, seed=rng.getrandbits(64), accept=accept, **settings)
    examples = []
    for problem in (pool[i % pool_size] for i in range(count)):
        solution = random_solution(problem, rng, ops, style)
        examples.append((problem, with_misses(problem, solution, rng, max_misses, ops, style)))
    return examples


def _five_number_examples(
    count: int, seed: int, style: str, max_misses: int
) -> list[tuple[Problem, str]]:
    """``count`` distinct SFT-slot 5-number problems, each with the forward chain that made it."""
    rng = random.Random(_seed("sft", "5num", style, seed))
    found: set[Key] = set()
    examples = []
    misses = 0
    while len(examples) < count:
        if misses >= 10_000:
            raise ValueError(f"found only {len(examples)} of {count} 5-number problems: lower it")
        misses += 1
        numbers = tuple(rng.randint(1, 12) for _ in range(5))
        chain, value = random_forward_chain(numbers, rng, TRAIN_OPS, style)
        problem = Problem(numbers, value)
        if 1 <= value <= 99 and problem.key not in found and in_slots(problem, SFT_SLOTS):
            found.add(problem.key)
            examples.append((problem, with_misses(problem, chain, rng, max_misses, style=style)))
            misses = 0
    return examples


def sft_corpus(
    n_examples: int,
    seed: int = 0,
    style: str = "uniform",
    mix: dict[str, float] | None = None,
    pool_cap: int = DEFAULT_POOL_CAP,
    max_misses: int = 0,
) -> Dataset:
    """SFT examples (prompt, completion, numbers, target) from SFT-slot problems.

    ``mix`` weighs "main" (the RL distribution), "div" (problems needing division) and "5num"
    (5-number problems). Main and div examples cycle over a pool of distinct problems, together
    at most ``pool_cap``, each time with a fresh ``random_solution(style)``: "uniform" over all
    correct chains (the base policy) or over linear chains only (the weak policy; problems
    without a linear chain are left out). Every 5-number example is a distinct problem with the
    random forward chain (linear with style "linear") that produced its target. With
    ``max_misses`` > 0 each completion is a search trace (``countdown.with_misses``): up to that
    many missed attempts before the chain.
    """
    mix = DEFAULT_MIX if mix is None else mix
    if style not in STYLES:
        raise ValueError(f"style={style!r} is not allowed: use one of {STYLES}")
    unknown = sorted(set(mix) - set(DEFAULT_MIX))
    if unknown or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
        raise ValueError(
            f"mix={mix} is not allowed: use non-negative weights over {sorted(DEFAULT_MIX)} "
            "with a positive sum"
        )
    if n_examples < 0 or pool_cap < 1:
        raise ValueError(f"n_examples={n_examples}, pool_cap={pool_cap}: use >= 0 and >= 1")
    if max_misses < 0:
        raise ValueError(f"max_misses={max_misses} is not allowed: use >= 0")
    counts = _allocate(n_examples, mix)
    examples = []
    pooled = {k: mix[k] for k in ("main", "div") if counts.get(k, 0)}
    if pooled:
        pools = _allocate(min(pool_cap, sum(counts[k] for k in pooled)), pooled)
        for component in pooled:
            pool_size = max(1, pools[component])
            examples += _pool_examples(
                component, counts[component], pool_size, seed, style, max_misses
            )
    if counts.get("5num", 0):
        examples += _five_number_examples(counts["5num"], seed, style, max_misses)
    random.Random(_seed("sft-order", style, seed)).shuffle(examples)
    return Dataset.from_dict(
        {
            "prompt": [p.prompt for p, _ in examples],
            "completion": [c for _, c in examples],
            "numbers": [list(p.numbers) for p, _ in examples],
            "target": [p.target for p, _ in examples],
        },
        features=_SFT_FEATURES,
    )
