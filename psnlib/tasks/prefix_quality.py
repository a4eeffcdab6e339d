"""Countdown prefix quality: whether a prefix of a chain can still be finished correctly.

``finish_attempt`` continues the prefix's current attempt, ``complete_prefix`` also may start a
new one (the verifier judges only the last attempt), and ``prefix_quality`` gives the shares of
a training set's weak prefixes that can be completed. Both agree with ``countdown.verify`` on
every prefix (tests/test_weak_prefix.py checks it against a brute-force enumeration).
"""

from __future__ import annotations

import itertools
from collections import Counter

from datasets import Dataset

from psnlib.tasks.countdown import (
    ALL_OPS,
    ATTEMPT_SEP,
    Problem,
    apply_op,
    chains_by_value,
    parse_chain,
)


def finish_attempt(problem: Problem, prefix: str) -> str | None:
    """A continuation ``c`` of the prefix's current attempt (the text after its last
    ``ATTEMPT_SEP``) such that ``prefix + c`` is correct without a new attempt, or None (the
    attempt is a dead end): None exactly where no such ``c`` passes ``countdown.verify``.

    The attempt is alive when its finished steps are well-formed, right and use available
    values, its unfinished last piece (the text after its last ",", often "") begins some
    allowed step on the values left, and the values left after that step can still reach the
    target (exhaustive enumeration, all four ops: the verifier accepts "/"). At most 4 values
    may be left (the enumerator's limit).
    """
    *done, partial = prefix.rsplit(ATTEMPT_SEP, 1)[-1].split(",")
    try:
        steps = parse_chain(",".join(done)) if done else []
    except ValueError:
        return None
    pool = Counter(problem.numbers)
    for step in steps:
        if apply_op(step.a, step.op, step.b) != step.result:
            return None
        pool.subtract([step.a, step.b])
        if pool[step.a] < 0 or pool[step.b] < 0:
            return None
        pool[step.result] += 1
    values = sorted((+pool).elements())
    if not partial:  # after a separator (or at the attempt's start) a whole chain must follow
        chains = chains_by_value(values, ALL_OPS).get(problem.target) if len(values) > 1 else None
        return chains[0] if chains else None
    for i, j in itertools.permutations(range(len(values)), 2):  # the step `partial` begins
        for op in ALL_OPS:
            result = apply_op(values[i], op, values[j])
            text = f"{values[i]}{op}{values[j]}={result}"
            if result is None or not text.startswith(partial):
                continue
            left = [v for k, v in enumerate(values) if k not in (i, j)] + [result]
            if left == [problem.target]:
                return text[len(partial) :]
            chains = (
                chains_by_value(sorted(left), ALL_OPS).get(problem.target) if left[1:] else None
            )
            if chains:
                return f"{text[len(partial) :]},{chains[0]}"
    return None


def complete_prefix(problem: Problem, prefix: str) -> str | None:
    """A completion ``c`` such that ``prefix + c`` is correct, or None (the problem is unsolvable).

    The prefix's current attempt is finished where it is alive (``finish_attempt``); otherwise
    the completion abandons it and starts a new attempt (``ATTEMPT_SEP`` + a correct chain):
    the verifier judges only the last attempt, so every prefix of a solvable problem (at most 4
    numbers) can be completed.
    """
    finish = finish_attempt(problem, prefix)
    if finish is not None:
        return finish
    restart = finish_attempt(problem, "")
    return None if restart is None else ATTEMPT_SEP + restart


def prefix_quality(dataset: Dataset | dict, column: str = "weak_prefix") -> dict[str, float]:
    """Shares of non-empty prefixes that can be completed correctly (``complete_prefix``: with
    a new attempt if need be) and whose current attempt is still alive (``finish_attempt``: the
    weak policy's own attempt can be finished), and dead ends (no completion at all).

    Needs the Countdown columns ``numbers`` and ``target``. Empty prefixes are counted apart.
    """
    completable = alive = scored = empty = 0
    for numbers, target, prefix in zip(
        dataset["numbers"], dataset["target"], dataset[column], strict=True
    ):
        if not prefix:
            empty += 1
            continue
        problem = Problem(tuple(numbers), target)
        scored += 1
        completable += complete_prefix(problem, prefix) is not None
        alive += finish_attempt(problem, prefix) is not None
    n, scored = scored + empty, max(1, scored)
    return {
        "completable": completable / scored,
        "alive": alive / scored,
        "dead_end": 1 - completable / scored,
        "empty": empty / max(1, n),
        "n": float(n),
    }
