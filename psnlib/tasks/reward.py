"""The Countdown reward with TRL's reward-function signature."""

from __future__ import annotations

import re

from psnlib.tasks.countdown import Problem, verify


def _completion_text(completion: object, row: int) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content")
        if isinstance(content, str):
            return content
    raise ValueError(
        f"row {row}: field 'completions' must be a string or a list of messages "
        f"with string 'content', got {completion!r}"
    )


def countdown_reward(
    completions: list,
    numbers: list,
    target: list,
    prefix: list | None = None,
    **kwargs: object,
) -> list[float]:
    """TRL reward function: 1.0 for a correct chain, else 0.0.

    Completions are strings or conversations (the last message's content is judged). With
    ``prefix`` (one string per row, "" for a plain row) the judged trace is
    ``prefix[i] + completion``: a weak-model prefix the completion continued.
    """
    if not len(completions) == len(numbers) == len(target):
        raise ValueError(
            f"lengths differ: completions={len(completions)}, numbers={len(numbers)}, "
            f"target={len(target)}"
        )
    if prefix is None:
        prefix = [""] * len(completions)
    elif len(prefix) != len(completions):
        raise ValueError(f"lengths differ: completions={len(completions)}, prefix={len(prefix)}")
    rewards = []
    rows = zip(completions, numbers, target, prefix, strict=True)
    for row, (completion, nums, tgt, head) in enumerate(rows):
        if not isinstance(nums, list | tuple) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in nums
        ):
            raise ValueError(f"row {row}: field 'numbers' must be a list of ints, got {nums!r}")
        if not isinstance(tgt, int) or isinstance(tgt, bool):
            raise ValueError(f"row {row}: field 'target' must be an int, got {tgt!r}")
        if not isinstance(head, str):
            raise ValueError(f"row {row}: field 'prefix' must be a string, got {head!r}")
        text = head + _completion_text(completion, row)
        rewards.append(1.0 if verify(Problem(tuple(nums), tgt), text).correct else 0.0)
    return rewards


def countdown_dense_reward(
    completions: list,
    numbers: list,
    target: list,
    prefix: list | None = None,
    **kwargs: object,
) -> list[float]:
    """``countdown_reward`` with partial credit, for policies too small to solve anything (the
    smoke profile's): 1.0 for a correct chain, else half the share of the problem's numbers
    that the chain writes. Dense enough that a few RL steps visibly raise it."""
    exact = countdown_reward(completions, numbers, target, prefix)
    heads = [""] * len(completions) if prefix is None else prefix
    rewards = []
    for row, (correct, completion, nums, head) in enumerate(
        zip(exact, completions, numbers, heads, strict=True)
    ):
        written = {int(x) for x in re.findall(r"\d+", head + _completion_text(completion, row))}
        rewards.append(correct or 0.5 * len(set(nums) & written) / len(set(nums)))
    return rewards
