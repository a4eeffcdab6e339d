"""Countdown: verifier, enumerator (against brute force), canonical forms, sampling, generator."""

import itertools
import os
import random
import time

import pytest
from conftest import hypothesis_profile
from hypothesis import example, given, settings
from hypothesis import strategies as st

from psnlib.tasks.countdown import (
    ATTEMPT_SEP,
    CHARSET,
    Problem,
    Step,
    canonical_form,
    chains_by_value,
    count_solutions,
    distinct_solutions,
    enumerate_solutions,
    format_chain,
    is_linear,
    parse_chain,
    random_forward_chain,
    random_solution,
    verify,
    with_misses,
)
from psnlib.tasks.generate import generate_problems
from psnlib.tasks.prefix_quality import finish_attempt
from psnlib.tasks.reward import countdown_reward

FAST = settings(max_examples=40, deadline=None)
numbers_st = st.lists(st.integers(0, 12), min_size=2, max_size=4)
ops_st = st.sampled_from(["+-*", "+-*/"])


def solved(numbers, ops, data):
    """A (problem, correct chain) drawn from the enumeration."""
    by_value = chains_by_value(numbers, ops)
    target = data.draw(st.sampled_from(sorted(by_value)))
    chain = data.draw(st.sampled_from(by_value[target]))
    return Problem(tuple(numbers), target), chain


def brute_force(numbers, ops):
    """All chain texts by final value, by trying every ordered pair of indices and op."""
    out = {}

    def walk(values, steps):
        if len(values) == 1:
            out.setdefault(values[0], set()).add(",".join(steps))
            return
        for i, j in itertools.permutations(range(len(values)), 2):
            a, b = values[i], values[j]
            for op in ops:
                if op == "+":
                    c = a + b
                elif op == "*":
                    c = a * b
                elif op == "-" and a >= b:
                    c = a - b
                elif op == "/" and b != 0 and a % b == 0:
                    c = a // b
                else:
                    continue
                rest = [v for k, v in enumerate(values) if k not in (i, j)]
                walk([*rest, c], [*steps, f"{a}{op}{b}={c}"])

    walk(list(numbers), [])
    return out


def test_problem_prompt_key_and_charset():
    p = Problem((7, 3, 5, 4), 22)
    assert p.prompt == "7 3 5 4->22:"
    assert p.key == ((3, 4, 5, 7), 22) == Problem([4, 5, 3, 7], 22).key
    assert set(CHARSET) == set("0123456789 +-*/=,>:") and len(CHARSET) == 19
    chains = enumerate_solutions(p)
    assert "7*3=21,21+5=26,26-4=22" in chains
    assert set(p.prompt + "".join(chains)) <= set(CHARSET)


def test_parse_and_format_roundtrip():
    steps = parse_chain("7*3=21,21+5=26,26-4=22")
    assert steps[0] == Step(7, "*", 3, 21)
    assert format_chain(steps) == "7*3=21,21+5=26,26-4=22"
    for bad in ["", "7*3=21,", "7x3=21", "7*3=021", "7 * 3=21", "7*3=21,,1+1=2", "-1+2=1"]:
        with pytest.raises(ValueError):
            parse_chain(bad)


@FAST
@given(numbers=numbers_st, ops=ops_st)
def test_verifier_accepts_every_enumerated_chain(numbers, ops):
    for target, chains in chains_by_value(numbers, ops).items():
        for chain in chains[:50]:
            verdict = verify(Problem(tuple(numbers), target), f" {chain}\n")
            assert verdict.correct and verdict.reason == "ok"
            assert verdict.first_error is None and verdict.n_valid_steps == len(numbers) - 1


@FAST
@given(numbers=numbers_st, data=st.data())
def test_verifier_rejects_wrong_arithmetic(numbers, data):
    problem, chain = solved(numbers, "+-*", data)
    steps = parse_chain(chain)
    k = data.draw(st.integers(0, len(steps) - 1))
    bump = data.draw(st.integers(1, 5))
    steps[k] = Step(steps[k].a, steps[k].op, steps[k].b, steps[k].result + bump)
    verdict = verify(problem, format_chain(steps))
    assert not verdict.correct and verdict.reason == "bad_arithmetic"
    assert verdict.first_error == k and verdict.n_valid_steps < len(steps)


@FAST
@given(values=st.lists(st.integers(1, 30), min_size=3, max_size=4, unique=True))
def test_verifier_rejects_a_number_used_twice(values):
    x, y = values[:2]
    verdict = verify(Problem(tuple(values), 0), f"{x}+{y}={x + y},{x + y}+{x}={2 * x + y}")
    assert verdict.reason == "unknown_operand" and verdict.first_error == 1
    assert verdict.n_valid_steps == 1


@FAST
@given(numbers=st.lists(st.integers(0, 12), min_size=2, max_size=3), extra=st.integers(0, 12))
def test_verifier_rejects_unused_numbers_and_wrong_target(numbers, extra):
    for value, chains in chains_by_value(numbers).items():
        chain = chains[0]
        verdict = verify(Problem((*numbers, extra), value), chain)
        assert verdict.reason == "unused_numbers" and verdict.first_error is None
        assert verdict.n_valid_steps == len(numbers) - 1
        assert verify(Problem(tuple(numbers), value + 1), chain).reason == "wrong_target"


@FAST
@given(
    numbers=numbers_st,
    data=st.data(),
    mutation=st.sampled_from(["insert_bad", "drop_equals", "double_comma"]),
)
def test_verifier_rejects_malformed_text(numbers, data, mutation):
    problem, chain = solved(numbers, "+-*", data)
    at = data.draw(st.integers(1, len(chain) - 1))
    if mutation == "insert_bad":
        bad = chain[:at] + data.draw(st.sampled_from("xa.()=+-*/")) + chain[at:]
    elif mutation == "drop_equals":
        bad = chain.replace("=", "", 1)
    elif mutation == "double_comma":
        bad = chain + "," if "," not in chain else chain.replace(",", ",,", 1)
    verdict = verify(problem, bad)
    assert not verdict.correct and verdict.reason == "malformed"
    assert verdict.first_error is not None and verdict.first_error == len(verdict.steps)


@FAST
@given(numbers=numbers_st, data=st.data())
def test_verifier_judges_the_last_attempt_only(numbers, data):
    problem, chain = solved(numbers, "+-*", data)
    at = data.draw(st.integers(1, len(chain) - 1))
    split = chain[:at] + ATTEMPT_SEP + chain[at:]  # the tail alone misses a consumed number
    assert not verify(problem, split).correct
    assert verify(problem, split) == verify(problem, chain[at:])
    assert verify(problem, f"{chain[:at]}{ATTEMPT_SEP}{chain}").correct  # abandoned, then solved
    assert not verify(problem, f"{chain}{ATTEMPT_SEP}{chain[:at]}").correct  # solved, then not


@pytest.mark.parametrize("max_misses", [0, 1, 4])
def test_with_misses_writes_honest_misses_then_the_solution(max_misses):
    rng = random.Random(max_misses)
    seen = set()
    for _ in range(200):
        numbers = tuple(rng.randint(1, 12) for _ in range(4))
        problem = Problem(numbers, rng.choice(sorted(chains_by_value(numbers))))
        solution = random_solution(problem, rng)
        trace = with_misses(problem, solution, rng, max_misses)
        *misses, last = trace.split(ATTEMPT_SEP)
        seen.add(len(misses))
        assert last == solution and verify(problem, trace).correct
        for miss in misses:  # a whole chain on the numbers, arithmetic right, value not the target
            verdict = verify(Problem(numbers, problem.target), miss)
            assert verdict.reason == "wrong_target", miss
            head = miss.rsplit(",", 1)[0] + ","  # and dead before its last step
            assert finish_attempt(problem, head) is None, miss
    assert seen == set(range(max_misses + 1))  # every count 0..max_misses occurs
    state = rng.getstate()
    assert with_misses(problem, solution, rng, 0) == solution and rng.getstate() == state
    with pytest.raises(ValueError, match="max_misses=-1"):
        with_misses(problem, solution, rng, -1)


def test_verifier_hand_examples():
    p = Problem((7, 3, 5, 4), 22)
    assert verify(p, "").reason == verify(p, " \n").reason == "empty"
    v = verify(p, "7*3=21,21+5=26,26-4=22")
    assert v.correct and v.steps == tuple(parse_chain("7*3=21,21+5=26,26-4=22"))
    v = verify(p, "7*3=20,20+5=25,25-4=21")
    assert (v.reason, v.first_error, v.n_valid_steps) == ("bad_arithmetic", 0, 2)
    v = verify(p, "7*3=21,21+5=26,26-4=")
    assert (v.reason, v.first_error, v.n_valid_steps, len(v.steps)) == ("malformed", 2, 2, 2)
    v = verify(p, "7*3=21,21+9=30,30-5=25")
    assert (v.reason, v.first_error, v.n_valid_steps) == ("unknown_operand", 1, 2)
    assert verify(p, "3-7=-4,7+5=12").reason == "malformed"
    assert verify(Problem((8, 2), 4), "8/2=4").correct
    assert verify(Problem((7, 2), 3), "7/2=3").reason == "bad_arithmetic"
    assert verify(Problem((2, 7), 0), "2-7=0").reason == "bad_arithmetic"


@pytest.mark.parametrize("numbers", [(1, 2), (3, 3), (0, 5), (2, 3, 4), (2, 2, 2), (0, 1, 6)])
@pytest.mark.parametrize("ops", ["+-*", "+-*/", "-/"])
def test_enumerator_matches_brute_force(numbers, ops):
    got = {v: set(cs) for v, cs in chains_by_value(numbers, ops).items()}
    assert got == brute_force(numbers, ops)
    for chains in chains_by_value(numbers, ops).values():
        assert list(chains) == sorted(set(chains))


@settings(max_examples=6, deadline=None)
@given(numbers=st.lists(st.integers(0, 9), min_size=4, max_size=4))
def test_enumerator_matches_brute_force_on_four_numbers(numbers):
    got = {v: set(cs) for v, cs in chains_by_value(numbers, "+-*").items()}
    assert got == brute_force(numbers, "+-*")


def test_enumerator_limits_and_speed():
    with pytest.raises(ValueError, match="limited to 4 numbers"):
        chains_by_value([1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="ops="):
        chains_by_value([1, 2], "+x")
    start = time.perf_counter()
    chains = chains_by_value([97, 89, 83, 79], "+-*/")  # distinct numbers: the most chains
    assert time.perf_counter() - start < 0.05
    assert sum(map(len, chains.values())) > 2000


def test_canonical_form_dedupes_identical_chains():
    a = canonical_form("7*3=21,5-4=1,21+1=22")
    assert a == canonical_form("5-4=1,3*7=21,1+21=22") == canonical_form("5-4=1,7*3=21,21+1=22")
    assert a != canonical_form("7*3=21,21+5=26,26-4=22")
    assert canonical_form("3+4=7,5+2=7,7-7=0") == canonical_form("5+2=7,3+4=7,7-7=0")
    with pytest.raises(ValueError):
        canonical_form("7*3")
    problem = Problem((7, 3, 5, 4), 22)
    forms = {canonical_form(c) for c in enumerate_solutions(problem)}
    assert distinct_solutions(problem) == len(forms) < count_solutions(problem)


@st.composite
def distinct_solved(draw: st.DrawFn) -> tuple[Problem, str]:
    """A (problem, correct chain) of four distinct numbers in [20, 60], with + - * only."""
    values = draw(st.lists(st.integers(20, 60), min_size=4, max_size=4, unique=True))
    by_value = chains_by_value(values, "+-*")
    target = draw(st.sampled_from(sorted(by_value)))
    chain = draw(st.sampled_from(by_value[target]))
    return Problem(tuple(values), target), chain


def independent(first: Step, second: Step) -> bool:
    """Whether consecutive steps ``first``, ``second`` can swap places and keep the chain's
    expression tree. ``canonical_form`` reads an operand as the latest earlier result of its
    value, else as a number: neither step may read a value the other one results in (in the
    swapped order ``first`` would read ``second``'s result), and the two results differ."""
    second_reads_first = first.result in (second.a, second.b)
    first_reads_second = second.result in (first.a, first.b)  # once swapped
    return not (second_reads_first or first_reads_second or first.result == second.result)


# Step 2's result 21 is also the number step 1 reads (issue 39); hypothesis drew it.
RESULT_EQUALS_EARLIER_OPERAND = (Problem((34, 21, 55, 36), 1197), "21+36=57,55-34=21,21*57=1197")


@FAST
@example(case=RESULT_EQUALS_EARLIER_OPERAND)
@given(case=distinct_solved())
def test_canonical_form_ignores_operand_and_independent_step_order(
    case: tuple[Problem, str],
) -> None:
    """Swap + and * operands, and reorder two independent steps (numbers all distinct)."""
    problem, chain = case
    steps = parse_chain(chain)
    swapped = [Step(s.b, s.op, s.a, s.result) if s.op in "+*" else s for s in steps]
    assert canonical_form(format_chain(swapped)) == canonical_form(chain)
    if independent(steps[0], steps[1]):
        reordered = format_chain([steps[1], steps[0], *steps[2:]])
        assert verify(problem, reordered).correct
        assert canonical_form(reordered) == canonical_form(chain)


def test_canonical_form_reads_a_repeated_value_as_the_latest_result() -> None:
    """Swapping the first two steps of 21+36=57,55-34=21,21*57=1197 is no independent reorder:
    in 55-34=21,21+36=57,21*57=1197 the 21 of step 2 reads as step 1's result, and the 21 of
    step 3 as the number: (55-34+36)*21, another of the problem's solutions, not
    (21+36)*(55-34)."""
    problem, chain = RESULT_EQUALS_EARLIER_OPERAND
    steps = parse_chain(chain)
    assert not independent(steps[0], steps[1])
    swapped = format_chain([steps[1], steps[0], steps[2]])
    assert verify(problem, chain).correct and verify(problem, swapped).correct
    assert canonical_form(chain) == "((21+36)*(55-34))"
    assert canonical_form(swapped) == "(((55-34)+36)*21)"
    forms = {canonical_form(c) for c in enumerate_solutions(problem, "+-*")}
    assert {canonical_form(chain), canonical_form(swapped)} <= forms  # two distinct solutions


def test_ci_runs_property_tests_derandomized() -> None:
    """CI=true loads the derandomized profile without a database; locally hypothesis' default
    one stays. Under the CI profile two runs of a property test draw the same examples."""
    assert hypothesis_profile({"CI": "true"}) == "ci"
    assert hypothesis_profile({"CI": "false"}) is hypothesis_profile({}) is None
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None
    assert not settings.get_profile("default").derandomize
    if os.environ.get("CI") == "true":
        assert settings.default.derandomize and settings.default.database is None

    def drawn() -> list[int]:
        seen: list[int] = []

        @settings(ci, max_examples=20)
        @given(st.integers())
        def record(x: int) -> None:
            seen.append(x)

        record()
        return seen

    assert drawn() == drawn()


@FAST
@given(numbers=numbers_st, ops=ops_st, seed=st.integers(0, 2**32), data=st.data())
def test_random_solution_verifies_and_linear_is_linear(numbers, ops, seed, data):
    problem, _ = solved(numbers, ops, data)
    rng = random.Random(seed)
    assert verify(problem, random_solution(problem, rng, ops)).correct
    linear = [c for c in enumerate_solutions(problem, ops) if is_linear(c)]
    assert count_solutions(problem, ops, "linear") == len(linear)
    chain = random_solution(problem, rng, ops, style="linear")
    if linear:
        assert chain in linear and verify(problem, chain).correct
    else:
        assert chain is None


def test_random_solution_is_uniform_and_handles_unsolvable():
    problem = Problem((2, 3, 4), 24)
    chains = enumerate_solutions(problem)
    rng = random.Random(0)
    draws = [random_solution(problem, rng) for _ in range(50 * len(chains))]
    counts = [draws.count(c) for c in chains]
    assert min(counts) > 20 and max(counts) < 85
    assert random_solution(Problem((1, 1), 5), rng) is None
    assert random_solution(Problem((1, 1), 5), rng, style="linear") is None
    with pytest.raises(ValueError, match="style"):
        random_solution(problem, rng, style="greedy")
    assert is_linear("4*3=12,12*2=24") and not is_linear("3*4=12,12*2=24")
    assert not is_linear("4*3=12,2*1=2,12*2=24")


@FAST
@given(
    numbers=st.lists(st.integers(1, 12), min_size=2, max_size=6),
    seed=st.integers(0, 2**32),
    ops=ops_st,
    style=st.sampled_from(["uniform", "linear"]),
)
def test_random_forward_chain_is_correct(numbers, seed, ops, style):
    chain, value = random_forward_chain(numbers, random.Random(seed), ops, style)
    verdict = verify(Problem(tuple(numbers), value), chain)
    assert verdict.correct and len(verdict.steps) == len(numbers) - 1
    if style == "linear":
        assert is_linear(chain)


def test_generator_is_deterministic_and_respects_settings():
    kwargs = {"seed": 3, "num_count": 3, "low": 2, "high": 9, "target_range": (10, 40)}
    problems = generate_problems(200, **kwargs)
    assert problems == generate_problems(200, **kwargs)
    assert problems != generate_problems(200, **{**kwargs, "seed": 4})
    assert len({p.key for p in problems}) == 200
    for p in problems:
        assert len(p.numbers) == 3 and all(2 <= x <= 9 for x in p.numbers)
        assert 10 <= p.target <= 40 and count_solutions(p) > 0
    exclude = {p.key for p in problems[:100]}
    again = generate_problems(100, **kwargs, exclude=exclude, accept=lambda p: p.target % 2 == 0)
    assert not exclude & {p.key for p in again} and all(p.target % 2 == 0 for p in again)
    five = generate_problems(30, seed=0, num_count=5)
    assert all(len(p.numbers) == 5 and 1 <= p.target <= 99 for p in five)
    assert generate_problems(0, seed=0) == []


def test_generator_require_division():
    problems = generate_problems(60, seed=1, ops="+-*/", require_op="/")
    for p in problems:
        assert count_solutions(p, "+-*") == 0 < count_solutions(p, "+-*/")
        assert all("/" in c for c in enumerate_solutions(p, "+-*/"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": -1}, "n=-1"),
        ({"num_count": 7}, "num_count=7"),
        ({"num_count": 1}, "num_count=1"),
        ({"low": -1}, "low=-1"),
        ({"low": 9, "high": 3}, "low=9, high=3"),
        ({"ops": "+^"}, "ops='\\+\\^'"),
        ({"ops": ""}, "ops=''"),
        ({"target_range": (50, 10)}, "target_range=\\(50, 10\\)"),
        ({"require_op": "/"}, "require_op='/'"),
        ({"require_op": "/", "ops": "+/", "num_count": 5}, "require_op='/' with num_count=5"),
        ({"n": 50, "num_count": 2, "low": 1, "high": 2}, "found only .* of n=50"),
    ],
)
def test_generator_rejects_bad_settings(kwargs, match):
    settings_ = {"n": 5, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        generate_problems(settings_.pop("n"), **settings_)


def test_countdown_reward():
    completions = [
        "7*3=21,21+5=26,26-4=22",
        " 7*3=21,21+5=26,26-4=22 ",
        "7*3=21,21+5=26",
        "garbage",
        [{"role": "user", "content": "7 3 5 4->22:"}, {"role": "assistant", "content": "8/2=4"}],
    ]
    numbers = [[7, 3, 5, 4]] * 4 + [[8, 2]]
    target = [22, 22, 22, 22, 4]
    rewards = countdown_reward(completions, numbers, target, prompts=["x"] * 5)
    assert rewards == [1.0, 1.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="row 1: field 'numbers'"):
        countdown_reward(["1+1=2"] * 2, [[1, 1], [1, "1"]], [2, 2])
    with pytest.raises(ValueError, match="row 0: field 'numbers'"):
        countdown_reward(["1+1=2"], [7], [2])
    with pytest.raises(ValueError, match="row 1: field 'target'"):
        countdown_reward(["1+1=2"] * 2, [[1, 1]] * 2, [2, 2.0])
    with pytest.raises(ValueError, match="row 0: field 'completions'"):
        countdown_reward([None], [[1, 1]], [2])
    with pytest.raises(ValueError, match="lengths differ"):
        countdown_reward(["1+1=2"], [[1, 1]] * 2, [2, 2])
