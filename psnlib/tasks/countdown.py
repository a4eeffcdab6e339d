"""Countdown arithmetic: problems, exact verification, solution enumeration.

A problem is a list of numbers and a target. A solution is a chain of steps such as
``7*3=21,21+5=26,26-4=22``: each step ``a op b = c`` consumes two available values (original
numbers or earlier results, each usable once) and produces ``c``; after the last step exactly one
value remains and it equals the target. Values are non-negative integers: subtraction only when
``a >= b``, division only when exact with ``b != 0``.

The prompt is ``7 3 5 4->22:`` and the completion is the bare chain. A completion may also hold
several *attempts* separated by ``ATTEMPT_SEP`` (a space): ``7+3=10,10*5=50,50-4=46 7*3=21,...``.
Only the last attempt is judged; the earlier ones are search the policy abandoned, as in
Stream-of-Search traces. Every character of a prompt or a chain is in ``CHARSET`` (the character
tokenizer depends on it).

Where a chain could refer to two equal values (an original 7 and an earlier result 7), the
most recent unconsumed result is taken to be meant; this only matters to ``canonical_form`` and
``is_linear``, never to correctness.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

CHARSET: str = "0123456789 +-*/=,>:"
ALL_OPS: str = "+-*/"
TRAIN_OPS: str = "+-*"
MAX_ENUMERATED_NUMBERS: int = 4
REASONS: tuple[str, ...] = (
    "ok",
    "empty",
    "malformed",
    "bad_arithmetic",
    "unknown_operand",
    "unused_numbers",
    "wrong_target",
)
STYLES: tuple[str, ...] = ("uniform", "linear")
ATTEMPT_SEP: str = " "

Key = tuple[tuple[int, ...], int]


@dataclass(frozen=True)
class Problem:
    """Numbers (in prompt order) and a target."""

    numbers: tuple[int, ...]
    target: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "numbers", tuple(self.numbers))

    @property
    def prompt(self) -> str:
        """The model's prompt, e.g. ``7 3 5 4->22:``."""
        return " ".join(map(str, self.numbers)) + f"->{self.target}:"

    @property
    def key(self) -> Key:
        """Identity for disjointness: the sorted numbers and the target."""
        return tuple(sorted(self.numbers)), self.target


@dataclass(frozen=True)
class Step:
    """One step ``a op b = result`` as written (not necessarily right)."""

    a: int
    op: str
    b: int
    result: int

    def __str__(self) -> str:
        return f"{self.a}{self.op}{self.b}={self.result}"


@dataclass(frozen=True)
class Verdict:
    """The verifier's judgement of one completion.

    ``reason`` is one of ``REASONS``; ``first_error`` is the index of the first failing (or
    unparsable) step, None when no single step is to blame; ``n_valid_steps`` counts parsed steps
    whose arithmetic is right and whose operands were available.
    """

    correct: bool
    reason: str
    steps: tuple[Step, ...]
    first_error: int | None
    n_valid_steps: int


def apply_op(a: int, op: str, b: int) -> int | None:
    """The value of ``a op b``, or None where the step is not allowed."""
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a >= b else None
    if op == "/":
        return a // b if b != 0 and a % b == 0 else None
    raise ValueError(f"unknown op {op!r}: allowed are {ALL_OPS!r}")


# ----------------------------------------------------------------------------- parsing

_INT = r"(0|[1-9][0-9]*)"
_STEP_RE = re.compile(rf"{_INT}([-+*/]){_INT}={_INT}")


def _parse_prefix(text: str) -> tuple[list[Step], int | None]:
    """The steps parsed before the first malformed piece, and that piece's index (or None)."""
    steps = []
    for i, piece in enumerate(text.split(",")):
        m = _STEP_RE.fullmatch(piece)
        if m is None:
            return steps, i
        steps.append(Step(int(m[1]), m[2], int(m[3]), int(m[4])))
    return steps, None


def parse_chain(text: str) -> list[Step]:
    """Parse ``a op b=c,...`` (no spaces, no leading zeros); ValueError on malformed text."""
    steps, bad = _parse_prefix(text)
    if bad is not None:
        piece = text.split(",")[bad]
        raise ValueError(f"malformed chain: step {bad} is {piece!r}, expected like '7*3=21'")
    return steps


def format_chain(steps: Sequence[Step]) -> str:
    """The chain text of ``steps``."""
    return ",".join(map(str, steps))


# ----------------------------------------------------------------------------- verification


def final_attempt(completion: str) -> str:
    """The judged part of ``completion``: its last attempt (surrounding whitespace stripped)."""
    return completion.strip().rsplit(ATTEMPT_SEP, 1)[-1]


def verify(problem: Problem, completion: str) -> Verdict:
    """Judge the last attempt of ``completion`` (``final_attempt``) exactly against ``problem``.

    Steps are checked in order against the pool of available values (the numbers plus the stated
    results of earlier steps, each usable once). A failing step still consumes whichever of its
    operands are available and adds its stated result, so later steps are judged on their own.
    A step's arithmetic is checked before its operands' availability.
    """
    text = final_attempt(completion)
    if not text:
        return Verdict(False, "empty", (), None, 0)
    steps, bad_piece = _parse_prefix(text)
    pool = Counter(problem.numbers)
    first_error, reason, n_valid = None, "ok", 0
    for i, step in enumerate(steps):
        available = pool[step.a] >= 1 and pool[step.b] >= 1 + (step.a == step.b)
        if apply_op(step.a, step.op, step.b) != step.result:
            error = "bad_arithmetic"
        elif not available:
            error = "unknown_operand"
        else:
            error = None
            n_valid += 1
        if error is not None and first_error is None:
            first_error, reason = i, error
        for operand in (step.a, step.b):
            if pool[operand] > 0:
                pool[operand] -= 1
        pool[step.result] += 1
    if first_error is None and bad_piece is not None:
        first_error, reason = bad_piece, "malformed"
    if first_error is None:
        remaining = +pool
        if sum(remaining.values()) > 1:
            reason = "unused_numbers"
        elif next(iter(remaining)) != problem.target:
            reason = "wrong_target"
    return Verdict(reason == "ok", reason, tuple(steps), first_error, n_valid)


# ----------------------------------------------------------------------------- enumeration


def _normalize_ops(ops: str) -> str:
    """``ops`` in the canonical order ``+-*/``; ValueError on unknown or no ops."""
    unknown = sorted(set(ops) - set(ALL_OPS))
    if unknown or not ops:
        raise ValueError(f"ops={ops!r} is not allowed: use a non-empty subset of {ALL_OPS!r}")
    return "".join(op for op in ALL_OPS if op in ops)


def _enumerable_state(numbers: Sequence[int]) -> tuple[int, ...]:
    state = tuple(sorted(numbers))
    if len(state) > MAX_ENUMERATED_NUMBERS:
        raise ValueError(
            f"enumeration is limited to {MAX_ENUMERATED_NUMBERS} numbers, got {len(state)}; "
            "build larger problems with random_forward_chain"
        )
    if len(state) < 2 or any(not isinstance(x, int) or x < 0 for x in state):
        raise ValueError(f"numbers={list(numbers)} must be 2..4 non-negative integers")
    return state


def _steps_on(state: tuple[int, ...], ops: str) -> Iterator[tuple[int, str, int, int, tuple]]:
    """Every distinct step ``(a, op, b, c, rest)`` on a sorted state; ``rest`` is left sorted."""
    seen = set()
    for i, j in itertools.combinations(range(len(state)), 2):
        x, y = state[i], state[j]
        if (x, y) in seen:
            continue
        seen.add((x, y))
        rest = list(state[:i] + state[i + 1 : j] + state[j + 1 :])
        for a, b in ((y, x),) if x == y else ((y, x), (x, y)):
            for op in ops:
                c = apply_op(a, op, b)
                if c is not None:
                    after = rest.copy()
                    bisect.insort(after, c)
                    yield a, op, b, c, tuple(after)


@functools.lru_cache(maxsize=1 << 16)
def _last_steps(x: int, y: int, ops: str) -> tuple[tuple[int, str], ...]:
    """The final steps ``(value, text)`` on the two values ``x <= y``."""
    return tuple((c, f"{a}{op}{b}={c}") for a, op, b, c, _ in _steps_on((x, y), ops))


def _chains(state: tuple[int, ...], ops: str) -> Sequence[tuple[int, str]]:
    """All chains ``(final value, text)`` on a sorted state, distinct by construction."""
    if len(state) == 2:
        return _last_steps(*state, ops)
    out: list[tuple[int, str]] = []
    for a, op, b, c, rest in _steps_on(state, ops):
        prefix = f"{a}{op}{b}={c},"
        out.extend([(value, prefix + tail) for value, tail in _chains(rest, ops)])
    return out


def _pack(chains: Iterable[tuple[int, str]]) -> dict[int, str]:
    """Sorted chains by final value, packed into one newline-joined string per value.

    Packing keeps the per-multiset caches small: ~50 kB instead of ~150 kB for 4 numbers.
    """
    grouped: dict[int, list[str]] = defaultdict(list)
    for value, text in chains:
        grouped[value].append(text)
    return {v: "\n".join(sorted(cs)) for v, cs in sorted(grouped.items())}


@functools.lru_cache(maxsize=2048)
def _packed_chains(state: tuple[int, ...], ops: str) -> dict[int, str]:
    return _pack(_chains(state, ops))


def chains_by_value(numbers: Sequence[int], ops: str = TRAIN_OPS) -> dict[int, tuple[str, ...]]:
    """Every correct chain using all ``numbers`` (at most 4), keyed by its final value.

    Chains are sorted and distinct; both operand orders of ``+`` and ``*`` count as distinct
    chains. The enumeration is cached per (sorted numbers, ops).
    """
    packed = _packed_chains(_enumerable_state(numbers), _normalize_ops(ops))
    return {v: tuple(chains.split("\n")) for v, chains in packed.items()}


def enumerate_solutions(problem: Problem, ops: str = TRAIN_OPS) -> list[str]:
    """All correct chains for ``problem`` (sorted, distinct)."""
    return _solutions(problem, ops, "uniform")


@functools.cache
def _reachable(state: tuple[int, ...], ops: str) -> frozenset[int]:
    """The final values of all chains on a sorted state (cheap: no chain texts)."""
    if len(state) == 1:
        return frozenset(state)
    out: set[int] = set()
    for *_, rest in _steps_on(state, ops):
        out |= _reachable(rest, ops)
    return frozenset(out)


def canonical_form(chain: str) -> str:
    """A canonical expression-tree string of ``chain``.

    Commutative operands are sorted and the order of independent steps is irrelevant, so
    mathematically identical chains (``7*3=21,5-4=1,21+1=22`` and ``5-4=1,3*7=21,1+21=22``)
    share one form. Operands that are no earlier result are leaves. Raises ValueError if
    ``chain`` is malformed.
    """
    results: list[tuple[int, str]] = []

    def take(value: int) -> str:
        for k in range(len(results) - 1, -1, -1):
            if results[k][0] == value:
                return results.pop(k)[1]
        return str(value)

    for step in parse_chain(chain):
        left, right = take(step.a), take(step.b)
        if step.op in "+*" or step.a == step.b:  # equal values: either subtree could come first
            left, right = sorted((left, right))
        results.append((step.result, f"({left}{step.op}{right})"))
    return ",".join(sorted(expr for _, expr in results))


@functools.cache
def _distinct_count(key: Key, ops: str) -> int:
    numbers, target = key
    return len({canonical_form(c) for c in _solutions(Problem(numbers, target), ops, "uniform")})


def distinct_solutions(problem: Problem, ops: str = TRAIN_OPS) -> int:
    """The number of distinct canonical forms among the correct chains of ``problem``."""
    key = (_enumerable_state(problem.numbers), problem.target)
    return _distinct_count(key, _normalize_ops(ops))


def is_linear(chain: str) -> bool:
    """Whether every step after the first uses the previous result, larger operand first."""
    steps = parse_chain(chain)
    return all(s.a >= s.b for s in steps) and all(
        prev.result in (s.a, s.b) for prev, s in itertools.pairwise(steps)
    )


def _linear_tails(prev: int, rest: tuple[int, ...], ops: str) -> list[tuple[int, str]]:
    """Linear continuations ``(final value, text)`` from result ``prev`` with ``rest`` unused."""
    if not rest:
        return [(prev, "")]
    out: list[tuple[int, str]] = []
    for k, x in enumerate(rest):
        if k > 0 and rest[k - 1] == x:
            continue
        a, b = max(prev, x), min(prev, x)
        others = rest[:k] + rest[k + 1 :]
        for op in ops:
            if (c := apply_op(a, op, b)) is not None:
                step = f",{a}{op}{b}={c}"
                out.extend((value, step + tail) for value, tail in _linear_tails(c, others, ops))
    return out


@functools.lru_cache(maxsize=2048)
def _packed_linear_chains(state: tuple[int, ...], ops: str) -> dict[int, str]:
    """The linear chains (see ``is_linear``) on a sorted state, packed by final value."""
    return _pack(
        (value, f"{a}{op}{b}={c}{tail}")
        for a, op, b, c, rest in _steps_on(state, ops)
        if a >= b
        for value, tail in _linear_tails(c, _without(rest, c), ops)
    )


def _without(state: tuple[int, ...], value: int) -> tuple[int, ...]:
    k = state.index(value)
    return state[:k] + state[k + 1 :]


def _packed_solutions(problem: Problem, ops: str, style: str) -> str | None:
    state, ops = _enumerable_state(problem.numbers), _normalize_ops(ops)
    if style == "uniform":
        return _packed_chains(state, ops).get(problem.target)
    if style == "linear":
        return _packed_linear_chains(state, ops).get(problem.target)
    raise ValueError(f"style={style!r} is not allowed: use one of {STYLES}")


def _solutions(problem: Problem, ops: str, style: str) -> list[str]:
    packed = _packed_solutions(problem, ops, style)
    return packed.split("\n") if packed else []


def count_solutions(problem: Problem, ops: str = TRAIN_OPS, style: str = "uniform") -> int:
    """The number of correct chains (all, or linear only with style "linear")."""
    packed = _packed_solutions(problem, ops, style)
    return packed.count("\n") + 1 if packed else 0


def random_solution(
    problem: Problem, rng: random.Random, ops: str = TRAIN_OPS, style: str = "uniform"
) -> str | None:
    """A random correct chain: uniform over all chains ("uniform") or over linear ones only
    ("linear", see ``is_linear``); None if there is none."""
    chains = _solutions(problem, ops, style)
    return rng.choice(chains) if chains else None


def random_forward_chain(
    numbers: Sequence[int], rng: random.Random, ops: str = TRAIN_OPS, style: str = "uniform"
) -> tuple[str, int]:
    """A random chain using all ``numbers`` (any count >= 2) and its final value.

    Each step takes a random pair of values (with style "linear": the previous result and a
    random unused value, larger operand first) and a random allowed step on it.
    """
    if style not in STYLES:
        raise ValueError(f"style={style!r} is not allowed: use one of {STYLES}")
    if len(numbers) < 2:
        raise ValueError(f"numbers={list(numbers)} must hold at least 2 values")
    ops = _normalize_ops(ops)
    values, steps = list(numbers), []
    while len(values) > 1:
        if style == "linear" and steps:  # the previous result is kept last
            pairs = [(j, len(values) - 1) for j in range(len(values) - 1)]
        else:
            pairs = list(itertools.combinations(range(len(values)), 2))
        rng.shuffle(pairs)
        for i, j in pairs:  # the first pair with an allowed step; all pairs allow "+", "-", "*"
            x, y = sorted((values[i], values[j]))
            orders = ((y, x), (x, y)) if style == "uniform" and x != y else ((y, x),)
            candidates = [
                Step(a, op, b, c)
                for a, b in orders
                for op in ops
                if (c := apply_op(a, op, b)) is not None
            ]
            if candidates:
                break
        else:
            raise ValueError(f"no step is possible on {values} with ops={ops!r}")
        step = rng.choice(candidates)
        values = [v for k, v in enumerate(values) if k not in (i, j)] + [step.result]
        steps.append(step)
    return format_chain(steps), values[0]


def _last_pair_misses(chain: str, target: int) -> bool:
    """Whether no step on the last step's two operands (any op, either order) makes ``target``."""
    last = parse_chain(chain)[-1]
    return all(
        apply_op(a, op, b) != target
        for a, b in ((last.a, last.b), (last.b, last.a))
        for op in ALL_OPS
    )


def with_misses(
    problem: Problem,
    solution: str,
    rng: random.Random,
    max_misses: int,
    ops: str = TRAIN_OPS,
    style: str = "uniform",
) -> str:
    """A search trace: ``m`` missed attempts, then ``solution``, joined by ``ATTEMPT_SEP``.

    ``m`` is uniform in ``0..max_misses``. Each miss is a random forward chain of ``style`` on
    the problem's numbers (arithmetic right) whose last two values cannot make the target with
    any op: a dead end the policy could not have finished, so the trace teaches one rule at an
    attempt's last step: make the target and stop where the two values allow it, else write a
    step and start again. ``max_misses=0`` returns ``solution`` and draws nothing from ``rng``.
    """
    if max_misses < 0:
        raise ValueError(f"max_misses={max_misses} is not allowed: use >= 0")
    if max_misses == 0:
        return solution
    misses = []
    for _ in range(rng.randint(0, max_misses)):
        for _ in range(1000):
            chain, _value = random_forward_chain(problem.numbers, rng, ops, style)
            if _last_pair_misses(chain, problem.target):
                misses.append(chain)
                break
        else:
            raise ValueError(f"no dead-end chain found for {problem} in 1000 draws")
    return ATTEMPT_SEP.join([*misses, solution])
