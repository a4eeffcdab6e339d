"""A math answer reward with TRL's reward-function signature, checked with math-verify.

The judged answer is the content of the completion's last ``\\boxed{...}`` (the prompts of
``psnlib.tasks.real`` ask for it); a completion without one scores 0.0, as in the SimpleRL-Zoo
and PSN-GRPO rule-based rewards. Math answers are compared with ``math_verify.verify(gold,
pred)`` (gold first), so equivalent forms match: ``\\frac{1}{2}`` and ``0.5``, ``2\\sqrt{2}`` and
``\\sqrt{8}``. Multiple-choice rows (``answer_type == "choice"``, or a gold answer that is a
single letter A-J when no ``answer_type`` column is given) compare the chosen letter instead.

A boxed answer is bounded before math-verify reads it (``too_costly``): one longer than
``MAX_ANSWER_CHARS``, nested deeper than ``MAX_NESTING`` braces, or holding a power of a number
whose exponent is a tower or ``MAX_EXPONENT_DIGITS`` digits long (``\\boxed{9^{9^{9^9}}}``)
scores 0.0 at once: math-verify would spend its 5 s timeout on each, and a batch of them would
stall training for minutes.

Needs the ``math`` extra (``pip install psnlib[math]``) for math rows.
"""

from __future__ import annotations

import re
import threading

from psnlib.tasks.reward import _completion_text

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LETTER = re.compile(r"^\s*(?:\\text\s*\{\s*)?\(?\s*([A-J])\s*\)?\s*\}?\s*[.:]?\s*$")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*\(?\s*([A-J])\b", re.IGNORECASE)
MAX_ANSWER_CHARS = 1000
MAX_NESTING = 16
MAX_EXPONENT_DIGITS = 6
# A power of a number whose exponent is a power again (``9^{9^9}``, ``9^9^9``) or a number of
# ``MAX_EXPONENT_DIGITS`` digits or more: sympy would compute it digit by digit.
_HUGE_POWER = re.compile(rf"\d\s*\^\s*\{{?\s*(?:\d+\s*\^|\d{{{MAX_EXPONENT_DIGITS},}})")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, else ``None``."""
    found = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for pos in range(start, len(text)):
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:pos]
                    break
    return found


def too_costly(boxed: str) -> bool:
    """Whether a boxed answer is too costly to give math-verify (see the module docstring): a
    linear scan of its length, brace nesting and powers."""
    if len(boxed) > MAX_ANSWER_CHARS or _HUGE_POWER.search(boxed):
        return True
    depth = 0
    for char in boxed:
        depth += char == "{"
        depth -= char == "}"
        if depth > MAX_NESTING:
            return True
    return False


def choice_letter(text: str) -> str | None:
    """The option letter a completion chose: its last boxed letter, else "answer is X"."""
    boxed = last_boxed(text)
    if boxed is not None:
        match = _LETTER.match(boxed)
        return match.group(1) if match else None
    matches = _ANSWER_IS.findall(text)
    return matches[-1].upper() if matches else None


def _math_verify():
    try:
        import math_verify
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "math_reward needs math-verify: pip install 'psnlib[math]' (or math-verify)"
        ) from err
    return math_verify


_IN_MATH_MODE = re.compile(r"\$\$?([^$]+)\$\$?|\\\((.+)\\\)|\\\[(.+)\\\]", re.S)


def gold_latex(gold: str) -> str:
    """The gold answer as math-verify reads a boxed answer: ``$\\boxed{gold}$``.

    Gold answers are written in text mode (``\\$18.90``, ``\\frac{1}{2}``, ``(0, 1]``), as a
    boxed answer's content is; a gold already boxed is kept, and one wholly inside math
    delimiters (``$...$``, ``\\(...\\)``, ``\\[...\\]``) is unwrapped first.
    """
    if "\\boxed" in gold:
        return gold if "$" in gold else f"${gold}$"
    match = _IN_MATH_MODE.fullmatch(gold.strip())
    inner = next(g for g in match.groups() if g is not None) if match else gold
    return f"$\\boxed{{{inner.strip()}}}$"


def math_equal(gold: str, boxed: str) -> bool:
    """Whether the boxed answer ``boxed`` equals the gold answer ``gold`` (math-verify)."""
    mv = _math_verify()
    # math-verify's timeouts use signals, which work only in the main thread.
    in_main = threading.current_thread() is threading.main_thread()
    timeout = 5 if in_main else None
    gold_parsed = mv.parse(gold_latex(gold), parsing_timeout=timeout)
    pred_parsed = mv.parse(f"$\\boxed{{{boxed}}}$", parsing_timeout=timeout)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(mv.verify(gold_parsed, pred_parsed, timeout_seconds=timeout))


def _is_choice(gold: str, answer_type: object) -> bool:
    if answer_type is not None:
        if answer_type not in ("math", "choice"):
            raise ValueError(f"answer_type must be 'math' or 'choice', got {answer_type!r}")
        return answer_type == "choice"
    return re.fullmatch(r"[A-J]", gold.strip()) is not None


def math_reward(
    completions: list,
    answer: list,
    prefix: list | None = None,
    answer_type: list | None = None,
    **kwargs: object,
) -> list[float]:
    """TRL reward function: 1.0 when the last boxed answer matches the gold ``answer``, else 0.0.

    Completions are strings or conversations (the last message's content is judged). With
    ``prefix`` (one string per row, "" for a plain row) the judged trace is
    ``prefix[i] + completion``, as in ``countdown_reward``. ``answer_type`` (a column of
    ``load_real_benchmark``) picks math-verify ("math") or a letter comparison ("choice").
    """
    if len(completions) != len(answer):
        raise ValueError(f"lengths differ: completions={len(completions)}, answer={len(answer)}")
    for column, values in (("prefix", prefix), ("answer_type", answer_type)):
        if values is not None and len(values) != len(completions):
            raise ValueError(
                f"lengths differ: completions={len(completions)}, {column}={len(values)}"
            )
    prefix = prefix if prefix is not None else [""] * len(completions)
    types = answer_type if answer_type is not None else [None] * len(completions)
    rewards = []
    rows = zip(completions, answer, prefix, types, strict=True)
    for row, (completion, gold, head, kind) in enumerate(rows):
        if not isinstance(gold, str):
            raise ValueError(f"row {row}: field 'answer' must be a string, got {gold!r}")
        if not isinstance(head, str):
            raise ValueError(f"row {row}: field 'prefix' must be a string, got {head!r}")
        text = head + _completion_text(completion, row)
        if _is_choice(gold, kind):
            rewards.append(1.0 if choice_letter(text) == gold.strip().upper() else 0.0)
            continue
        boxed = last_boxed(text)
        judged = boxed is not None and not too_costly(boxed)
        rewards.append(1.0 if judged and math_equal(gold, boxed) else 0.0)
    return rewards
