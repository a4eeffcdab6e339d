"""Seeded generation of Countdown problems: numbers, then a reachable target."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from psnlib.tasks.countdown import (
    MAX_ENUMERATED_NUMBERS,
    TRAIN_OPS,
    Key,
    Problem,
    _normalize_ops,
    _reachable,
    random_forward_chain,
)


def _check_settings(
    n: int,
    num_count: int,
    low: int,
    high: int,
    ops: str,
    target_range: tuple[int, int],
    require_op: str | None,
) -> None:
    if n < 0:
        raise ValueError(f"n={n} is not allowed: use n >= 0")
    if not 2 <= num_count <= 6:
        raise ValueError(f"num_count={num_count} is not allowed: use 2..6")
    if low < 0 or low > high:
        raise ValueError(f"low={low}, high={high} is not allowed: use 0 <= low <= high")
    _normalize_ops(ops)
    if len(target_range) != 2 or target_range[0] > target_range[1]:
        raise ValueError(f"target_range={target_range} is empty: use (lo, hi) with lo <= hi")
    if require_op is not None:
        if len(require_op) != 1 or require_op not in ops:
            raise ValueError(f"require_op={require_op!r} is not allowed: use one op of {ops!r}")
        if num_count > MAX_ENUMERATED_NUMBERS:
            raise ValueError(
                f"require_op={require_op!r} with num_count={num_count} is not allowed: "
                f"it needs enumeration, limited to {MAX_ENUMERATED_NUMBERS} numbers"
            )


@functools.cache
def _targets(
    state: tuple[int, ...], ops: str, require_op: str | None, lo: int, hi: int
) -> tuple[int, ...]:
    """The targets in [lo, hi] reachable on ``state`` with ``ops`` (and needing ``require_op``)."""
    reach = _reachable(state, ops)
    if require_op is not None:
        others = ops.replace(require_op, "")
        reach = reach - _reachable(state, others) if others else reach
    return tuple(sorted(t for t in reach if lo <= t <= hi))


def generate_problems(
    n: int,
    *,
    seed: int,
    num_count: int = 4,
    low: int = 1,
    high: int = 12,
    ops: str = TRAIN_OPS,
    target_range: tuple[int, int] = (1, 99),
    require_op: str | None = None,
    exclude: set[Key] | None = None,
    accept: Callable[[Problem], bool] | None = None,
) -> list[Problem]:
    """``n`` problems with distinct keys, deterministic from ``seed``.

    Numbers are uniform in [low, high]. For up to 4 numbers the target is uniform over the
    targets in ``target_range`` reachable with ``ops`` (with ``require_op``: reachable with
    ``ops`` but not without that op); for 5..6 numbers it is the value of a random forward chain,
    redrawn until in range. Keys in ``exclude`` and problems failing ``accept`` are skipped.
    Raises ValueError on impossible settings, and if 10,000 draws in a row find nothing new.
    """
    _check_settings(n, num_count, low, high, ops, target_range, require_op)
    ops, (lo, hi) = _normalize_ops(ops), target_range
    rng, exclude = random.Random(seed), exclude or set()
    problems: list[Problem] = []
    found: set[Key] = set()
    misses, patience = 0, 10_000
    while len(problems) < n:
        if misses >= patience:
            raise ValueError(
                f"found only {len(problems)} of n={n} problems ({patience} draws in a row gave "
                "nothing new): lower n, or widen low/high or target_range, or relax accept/exclude"
            )
        misses += 1
        numbers = tuple(rng.randint(low, high) for _ in range(num_count))
        if num_count <= MAX_ENUMERATED_NUMBERS:
            targets = _targets(tuple(sorted(numbers)), ops, require_op, lo, hi)
            if not targets:
                continue
            problem = Problem(numbers, rng.choice(targets))
        else:
            _, value = random_forward_chain(numbers, rng, ops)
            if not lo <= value <= hi:
                continue
            problem = Problem(numbers, value)
        key = problem.key
        if key in found or key in exclude or (accept is not None and not accept(problem)):
            continue
        found.add(key)
        problems.append(problem)
        misses = 0
    return problems
