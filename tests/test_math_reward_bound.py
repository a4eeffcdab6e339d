"""math_reward bounds a boxed answer before math-verify reads it (issue 50, item 9): a power
tower or 5,000 nested braces score 0.0 at once instead of spending math-verify's 5 s timeout
(measured on the old code: 5.2 s and 5.1 s per completion), and ordinary answers are judged as
before."""

import time

import pytest

pytest.importorskip("math_verify")

from psnlib.tasks.math_reward import math_reward, too_costly  # noqa: E402

COSTLY = {
    "a power tower": r"The answer is \boxed{9^{9^{9^9}}}",
    "5,000 nested braces": "\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}",
    "a 7-digit exponent": r"\boxed{9^{1000000}}",
    "a very long answer": "\\boxed{" + "1+" * 2000 + "1}",
}


@pytest.mark.parametrize("name", COSTLY)
def test_a_pathological_answer_scores_zero_at_once(name):
    started = time.perf_counter()
    assert math_reward([COSTLY[name]] * 4, ["0.5"] * 4) == [0.0] * 4
    assert time.perf_counter() - started < 1.0  # four completions, not 4 x 5 s


@pytest.mark.parametrize(
    ("boxed", "gold"),
    [
        (r"\frac{1}{2}", "0.5"),
        (r"2^{10}", "1024"),
        (r"10^{2}", "100"),
        (r"e^{x^2}", r"e^{x^2}"),
        (r"\frac{\sqrt{\frac{1}{4}}}{1}", "0.5"),
    ],
)
def test_an_ordinary_answer_is_judged_as_before(boxed, gold):
    assert not too_costly(boxed)
    assert math_reward([f"so \\boxed{{{boxed}}}"], [gold]) == [1.0]
