"""Weak-model prefixes: step splitting, entropy / random truncation, batched step entropies,
building and caching prefixes, prefix-branch choice, prefix quality, and the reward with prefix."""

import itertools
import json
import math
import random
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psnlib import weak_prefix
from psnlib.models import build_tokenizer, load_policy, save_policy, tiny_policy
from psnlib.replication.compute.pretrain import build_policy
from psnlib.replication.plan.profiles import get_profile
from psnlib.tasks import rl_train_set
from psnlib.tasks.countdown import ATTEMPT_SEP, CHARSET, Problem, random_solution, verify
from psnlib.tasks.prefix_quality import complete_prefix, finish_attempt, prefix_quality
from psnlib.tasks.reward import countdown_reward
from psnlib.weak_prefix import (
    COLUMNS,
    build_prefixes,
    choose_prefixed,
    entropy_cut,
    fingerprint,
    random_cut,
    split_steps,
    step_entropies,
)


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    """The smoke base (Qwen2, target) and weak (Llama) policies: seconds of SFT each."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("policies")
    target, target_tok, _ = build_policy(get_profile("smoke").base, root=root)
    weak, weak_tok, _ = build_policy(get_profile("smoke").weak, root=root)
    return target, target_tok, weak, weak_tok


@pytest.fixture(scope="module")
def problems():
    return rl_train_set(12, seed=3)


# ----------------------------------------------------------------------------- truncation


@pytest.mark.parametrize(
    "entropies, cut",
    [
        ([], 0),  # empty solution: no prefix
        ([2.0], 0),  # one step: no drop is defined, no prefix
        ([1.0, 0.5], 1),
        ([0.5, 1.0], 1),  # the only cut, though entropy rises
        ([0.0, 1.0, 2.0, 3.0], 1),  # monotone rising: all drops tie at -1, the first wins
        ([3.0, 2.0, 1.0, 0.0], 1),  # monotone falling: all drops tie at 1, the first wins
        ([3.0, 1.0, 2.0, 0.0], 1),  # drops 2, -1, 2: tie, the first wins
        ([1.0, 2.0, 0.5, 0.4], 2),  # drops -1, 1.5, 0.1
        ([0.1, 0.2, 0.9, 0.1], 3),  # the largest drop is the last: L* = n - 1
    ],
)
def test_entropy_cut_on_hand_built_profiles(entropies, cut):
    assert entropy_cut(entropies) == cut


@given(st.lists(st.floats(-5, 5), min_size=2, max_size=12))
def test_entropy_cut_is_the_first_largest_drop(entropies):
    cut = entropy_cut(entropies)
    drops = [entropies[i] - entropies[i + 1] for i in range(len(entropies) - 1)]
    assert 1 <= cut <= len(entropies) - 1
    assert drops[cut - 1] == max(drops)
    assert all(d < max(drops) for d in drops[: cut - 1])


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf, 0.0]])
def test_entropy_cut_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        entropy_cut(bad)


def test_random_cut_is_reproducible_and_uniform_on_the_cut_support():
    cuts = [random_cut(4, random.Random(7)) for _ in range(3)]
    assert len(set(cuts)) == 1
    rng = random.Random(0)
    draws = [random_cut(4, rng) for _ in range(3000)]
    assert set(draws) == {1, 2, 3}
    assert all(abs(draws.count(k) / 3000 - 1 / 3) < 0.04 for k in (1, 2, 3))
    assert random_cut(1, rng) == random_cut(0, rng) == 0
    with pytest.raises(ValueError, match="-1"):
        random_cut(-1, rng)


# ----------------------------------------------------------------------------- steps


def test_countdown_split_keeps_separators():
    assert split_steps("7*3=21,21+5=26,26-4=22") == ["7*3=21,", "21+5=26,", "26-4=22"]
    assert split_steps("7*3=21,") == ["7*3=21,"]
    assert split_steps("7*3=21,21+5=26 7+3=10") == ["7*3=21,", "21+5=26 ", "7+3=10"]
    assert split_steps("") == []
    assert split_steps("First, add. Then 3.5 times 2!\n\nDone", "math") == [
        "First, add. ",
        "Then 3.5 times 2!\n\n",
        "Done",
    ]
    with pytest.raises(ValueError, match="'gsm9k'"):
        split_steps("1+1=2", "gsm9k")


@pytest.mark.parametrize("task", sorted(weak_prefix.SPLITTERS))
@given(text=st.text(alphabet="12+=,. !\n", max_size=40))
def test_split_round_trips(task, text):
    steps = split_steps(text, task)
    assert "".join(steps) == text
    assert all(steps)


# ----------------------------------------------------------------------------- step entropies


def reference_entropies(model, tok, prompt: str, steps: list[str]) -> list[float]:
    """Per step, one unpadded forward of prompt + steps so far; Categorical entropies."""
    out, context = [], prompt
    for step in steps:
        ids = torch.tensor([tok(context + step, add_special_tokens=False)["input_ids"]])
        n_step = len(tok(step, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -n_step - 1 : -1]
        out.append(torch.distributions.Categorical(logits=logits).entropy().mean().item())
        context += step
    return out


def test_step_entropies_match_unbatched_reference(policies):
    target, tok, _, _ = policies
    prompts = ["7 3 5 4->22:", "1 2->3:", "12 11 10 9->99:", "6 6->36:"]
    steps = [["7*3=21,", "21+5=26,", "26-4=22"], ["1+2=3"], ["12*11=132,", "1"], []]
    got = step_entropies(target, tok, prompts, steps, batch_size=3)  # padding across rows
    assert [len(h) for h in got] == [3, 1, 2, 0]
    for h, prompt, pieces in zip(got, prompts, steps, strict=True):
        assert h == pytest.approx(reference_entropies(target, tok, prompt, pieces), abs=1e-5)
    assert len({round(x, 4) for h in got for x in h}) > 3  # varied: a real test


def test_step_entropies_reject_bad_input(policies):
    target, tok, _, _ = policies
    with pytest.raises(ValueError, match="lengths differ"):
        step_entropies(target, tok, ["1 2->3:"], [])
    with pytest.raises(ValueError, match="cannot represent 'x\\+2=3'"):
        step_entropies(target, tok, ["1 2->3:"], [["x+2=3"]])
    with pytest.raises(ValueError, match="at least one token"):
        step_entropies(target, tok, [""], [["1+2=3"]])


# ----------------------------------------------------------------------------- prefixes verify


def test_prefix_plus_correct_continuation_verifies(problems):
    rng = random.Random(0)
    for numbers, target in zip(problems["numbers"], problems["target"], strict=True):
        problem = Problem(tuple(numbers), target)
        steps = split_steps(random_solution(problem, rng))
        for cut in range(len(steps)):
            prefix, rest = "".join(steps[:cut]), "".join(steps[cut:])
            assert countdown_reward([rest], [numbers], [target], prefix=[prefix]) == [1.0]
            assert countdown_reward([rest], [numbers], [target]) == [float(cut == 0)]
            assert verify(problem, prefix + complete_prefix(problem, prefix)).correct


def _correct_chains(values: tuple[int, ...], target: int) -> list[str]:
    """Every chain text that ``verify`` accepts on ``values`` -> ``target``, by brute force:
    each ordered pair of values and each op, then the rest (independent of psnlib's enumerator)."""
    if len(values) == 1:
        return [""] if values[0] == target else []
    chains = []
    for i, j in itertools.permutations(range(len(values)), 2):
        a, b = values[i], values[j]
        for op, result in (("+", a + b), ("*", a * b), ("-", a - b), ("/", a // b if b else -1)):
            if result < 0 or (op == "/" and (b == 0 or a % b)):
                continue
            left = tuple(v for k, v in enumerate(values) if k not in (i, j)) + (result,)
            step = f"{a}{op}{b}={result}"
            chains += [f"{step},{rest}" if rest else step for rest in _correct_chains(left, target)]
    return chains


def _mangled_prefixes(chain: str, rng: random.Random) -> list[str]:
    """Prefixes of a right chain cut at every character, with stray and doubled separators,
    empty steps, a wrong digit, and an earlier abandoned attempt."""
    cuts = [chain[:i] for i in range(len(chain) + 1)]
    noise = [
        ",",
        ",,",
        " ",
        ", ",
        " ,",
        "  ",
        chain.replace(",", ",,", 1),
        chain.replace("=", "==", 1),
        "1+1=2," + ATTEMPT_SEP,
        "".join(rng.choice(CHARSET) for _ in range(rng.randint(1, 8))),
    ]
    return cuts + [x + y for x in noise for y in cuts[:: max(1, len(cuts) // 4)]]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=2, max_size=4),
    st.integers(0, 60),
    st.randoms(use_true_random=False),
)
def test_prefix_judges_agree_with_the_verifier_on_every_prefix(numbers, target, rng):
    """``finish_attempt`` returns a continuation exactly when one exists (the attempt so far
    begins some chain the verifier accepts), and it verifies; ``complete_prefix`` returns one
    exactly when the current attempt lives or the problem is solvable, and it verifies."""
    problem = Problem(tuple(numbers), target)
    chains = _correct_chains(problem.numbers, target)
    some = chains[0] if chains else "+".join(map(str, numbers[:2])) + "=0"
    for prefix in _mangled_prefixes(rng.choice(chains) if chains else some, rng):
        attempt = prefix.rsplit(ATTEMPT_SEP, 1)[-1]
        alive = any(chain.startswith(attempt) for chain in chains)
        finish = finish_attempt(problem, prefix)
        assert (finish is not None) == alive, (prefix, finish)
        if finish is not None:
            assert ATTEMPT_SEP not in finish and verify(problem, prefix + finish).correct, prefix
        complete = complete_prefix(problem, prefix)
        assert (complete is not None) == (alive or bool(chains)), (prefix, complete)
        if complete is not None:
            assert verify(problem, prefix + complete).correct, (prefix, complete)


def test_finish_attempt_finds_dead_ends_and_complete_prefix_starts_again():
    problem = Problem((7, 3, 5, 4), 22)
    assert finish_attempt(problem, "7*3=21,") is not None
    assert finish_attempt(problem, "7*3=20,") is None  # wrong arithmetic
    assert finish_attempt(problem, "7*7=49,") is None  # 7 used twice
    for unfinished in ("7*3=21", "7*3=2", "7*"):  # an unfinished step can end as it goes
        rest = finish_attempt(problem, unfinished)
        assert ATTEMPT_SEP not in rest and verify(problem, unfinished + rest).correct
    assert finish_attempt(problem, "7*3=2,") is None  # wrong arithmetic, finished
    assert finish_attempt(problem, "7*3=21,21*5=105,105*4=420,") is None  # one value left
    assert finish_attempt(problem, "3+4=7,7*7=49,") is None  # 49 and 5 cannot make 22
    assert finish_attempt(problem, "3+4=7,7*7=49 7*3=21,") is not None  # a live new attempt
    assert finish_attempt(problem, "7*3=21, 3+4=7,7*7=49,") is None  # a dead new attempt
    assert finish_attempt(Problem((1, 1), 3), "") is None
    # a dead attempt is abandoned: the completion starts a new one
    for dead in ("7*3=20,", "7*7=49,", "7*3=2,", "3+4=7,7*7=49,"):
        completion = complete_prefix(problem, dead)
        assert completion.startswith(ATTEMPT_SEP) and verify(problem, dead + completion).correct
    assert complete_prefix(problem, "7*3=21,") == finish_attempt(problem, "7*3=21,")
    after_a_miss = "3+4=7,7*7=49,49-5=44 "  # a new attempt has begun: it is finished as it is
    assert verify(problem, after_a_miss + finish_attempt(problem, after_a_miss)).correct
    assert complete_prefix(Problem((1, 1), 3), "7*3=20,") is None  # unsolvable
    quality = prefix_quality(
        {
            "numbers": [[7, 3, 5, 4]] * 4 + [[1, 1]],
            "target": [22] * 4 + [3],
            "weak_prefix": ["7*3=21,", "7*3=20,", "", "3+4=7,7*7=49,", "1+1=2,"],
        }
    )
    assert quality == {
        "completable": 3 / 4,
        "alive": 1 / 4,
        "dead_end": 1 / 4,
        "empty": 1 / 5,
        "n": 5.0,
    }


# ----------------------------------------------------------------------------- build + cache


def test_build_prefixes_is_deterministic_and_cached(policies, problems, tmp_path, monkeypatch):
    target, target_tok, weak, weak_tok = policies
    built = build_prefixes(problems, target, target_tok, weak, weak_tok, root=tmp_path / "a")
    assert built.column_names == problems.column_names + list(COLUMNS)
    for row in built:
        steps = split_steps(row["weak_solution"])
        assert len(row["step_entropy"]) == len(steps)
        assert row["prefix_steps"] == entropy_cut(row["step_entropy"]) <= max(0, len(steps) - 1)
        assert row["weak_prefix"] == "".join(steps[: row["prefix_steps"]])
        assert row["weak_prefix"] == "" or row["weak_prefix"].endswith(",")
        rest = complete_prefix(Problem(tuple(row["numbers"]), row["target"]), row["weak_prefix"])
        if rest is not None:  # a live prefix, finished correctly, earns the reward
            prefix = [row["weak_prefix"]]
            assert countdown_reward([rest], [row["numbers"]], [row["target"]], prefix=prefix) == [
                1.0
            ]
    assert sum(row["prefix_steps"] > 0 for row in built) >= 6  # the weak model writes chains
    fresh = build_prefixes(problems, target, target_tok, weak, weak_tok, root=tmp_path / "b")
    assert fresh.to_dict() == built.to_dict()  # recomputed from scratch: the same
    monkeypatch.setattr(weak_prefix, "generate_samples", lambda *a, **k: pytest.fail("sampled"))
    monkeypatch.setattr(weak_prefix, "step_entropies", lambda *a, **k: pytest.fail("scored"))
    cached = build_prefixes(problems, target, target_tok, weak, weak_tok, root=tmp_path / "a")
    assert cached.to_dict() == built.to_dict()
    assert [p.suffix for p in (tmp_path / "a").iterdir()] == [".json"]  # no temp files left
    again = build_prefixes(built, target, target_tok, weak, weak_tok, root=tmp_path / "a")
    assert again.to_dict() == built.to_dict()  # a built dataset's columns are replaced


def _nulls(text: str, column: str) -> str:
    """A cache entry whose ``column`` holds a null in every row (issue 50, item 9)."""
    entry = json.loads(text)
    entry["columns"][column] = [None] * len(entry["columns"][column])
    return json.dumps(entry)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="truncated"),
        pytest.param(lambda text: "{}", id="empty-object"),
        pytest.param(lambda text: '{"columns": {"weak_prefix": []}}', id="short-columns"),
        pytest.param(lambda text: "[1, 2]", id="a-list"),
        pytest.param(lambda text: _nulls(text, "weak_prefix"), id="prefixes-of-nulls"),
        pytest.param(lambda text: _nulls(text, "prefix_steps"), id="steps-of-nulls"),
        pytest.param(lambda text: _nulls(text, "step_entropy"), id="entropies-of-nulls"),
    ],
)
def test_a_damaged_prefix_cache_entry_is_recomputed_with_a_warning(
    policies, problems, tmp_path, damage
):
    target, target_tok, weak, weak_tok = policies
    built = build_prefixes(problems, target, target_tok, weak, weak_tok, root=tmp_path)
    (entry,) = tmp_path.iterdir()
    entry.write_text(damage(entry.read_text()))
    with pytest.warns(UserWarning, match=rf"damaged weak-prefix cache entry {entry}"):
        again = build_prefixes(problems, target, target_tok, weak, weak_tok, root=tmp_path)
    assert again.to_dict() == built.to_dict()
    assert build_prefixes(
        problems, target, target_tok, weak, weak_tok, root=tmp_path
    ).to_dict() == (built.to_dict())  # rewritten whole


def test_random_truncation_is_reproducible(policies, problems, tmp_path):
    target, target_tok, weak, weak_tok = policies
    settings = [("random", 0, "a"), ("random", 0, "b"), ("random", 1, "c"), ("entropy", 0, "d")]
    runs = [
        build_prefixes(
            problems, target, target_tok, weak, weak_tok, truncation=t, seed=s, root=tmp_path / d
        )
        for t, s, d in settings
    ]
    assert runs[0].to_dict() == runs[1].to_dict()
    assert runs[0]["weak_solution"] == runs[3]["weak_solution"]  # same weak samples
    assert runs[0]["weak_solution"] != runs[2]["weak_solution"]  # another seed: other samples
    assert all(h == [] for h in runs[0]["step_entropy"])  # the target is not run
    for row in runs[0]:
        steps = split_steps(row["weak_solution"])
        expected = range(1, len(steps)) if len(steps) >= 2 else [0]
        assert row["prefix_steps"] in expected


def test_target_with_another_vocabulary_reads_the_weak_text(policies, problems, tmp_path):
    """Prefixes cross as text: a target with a permuted vocabulary gets the same prefixes'
    texts, scored with its own tokens; one that lacks a character the weak writes raises."""
    _, _, weak, weak_tok = policies
    other_tok = build_tokenizer(CHARSET[::-1])
    assert other_tok.get_vocab() != weak_tok.get_vocab()
    other = tiny_policy("qwen2", "smoke", other_tok, seed=5).eval()
    built = build_prefixes(problems, other, other_tok, weak, weak_tok, root=tmp_path)
    steps = [split_steps(text) for text in built["weak_solution"]]
    assert built["step_entropy"] == step_entropies(other, other_tok, problems["prompt"], steps)
    no_equals = build_tokenizer(CHARSET.replace("=", ""))
    blind = tiny_policy("qwen2", "smoke", no_equals, seed=5)
    for truncation in ("entropy", "random"):  # random: the target is not run, still checked
        with pytest.raises(ValueError, match="cannot represent"):
            build_prefixes(
                problems, blind, no_equals, weak, weak_tok, truncation=truncation, root=tmp_path
            )


def test_build_prefixes_rejects_bad_input(policies, problems, tmp_path):
    target, target_tok, weak, weak_tok = policies
    args = (target, target_tok, weak, weak_tok)
    with pytest.raises(ValueError, match="'middle'"):
        build_prefixes(problems, *args, truncation="middle", root=tmp_path)
    with pytest.raises(ValueError, match="'chess'"):
        build_prefixes(problems, *args, task="chess", root=tmp_path)
    with pytest.raises(ValueError, match="'prompt' column"):
        build_prefixes(problems.rename_column("prompt", "question"), *args, root=tmp_path)


def test_fingerprint_sees_every_weight(policies, tmp_path):
    target, tok, _, _ = policies
    save_policy(target, tok, tmp_path / "saved")
    loaded, loaded_tok = load_policy(tmp_path / "saved", dtype=torch.float32)
    assert fingerprint(loaded, loaded_tok) == fingerprint(target, tok)
    copy = tiny_policy("qwen2", "smoke", tok)
    copy.load_state_dict(target.state_dict())
    assert fingerprint(copy, tok) == fingerprint(target, tok)
    with torch.no_grad():
        copy.model.norm.weight[0] += 1e-6
    assert fingerprint(copy, tok) != fingerprint(target, tok)


# ----------------------------------------------------------------------------- training time


def test_choose_prefixed_is_deterministic_with_probability_p():
    a = choose_prefixed(1000, 0.2, seed=0, step=3)
    assert a.dtype == torch.bool and a.shape == (1000,)
    assert torch.equal(a, choose_prefixed(1000, 0.2, seed=0, step=3))
    assert not torch.equal(a, choose_prefixed(1000, 0.2, seed=0, step=4))
    assert not torch.equal(a, choose_prefixed(1000, 0.2, seed=1, step=3))
    assert abs(choose_prefixed(20_000, 0.2, seed=0, step=0).float().mean() - 0.2) < 0.01
    assert not choose_prefixed(500, 0.0, 0, 0).any() and choose_prefixed(500, 1.0, 0, 0).all()
    assert choose_prefixed(0, 0.5, 0, 0).shape == (0,)
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match=f"got {bad}"):
            choose_prefixed(4, bad, 0, 0)
    with pytest.raises(ValueError, match="num_groups"):
        choose_prefixed(-1, 0.5, 0, 0)


def test_reward_with_prefix():
    numbers, target = [[7, 3, 5, 4]] * 4, [22] * 4
    completions = ["21+5=26,26-4=22", "7*3=21,21+5=26,26-4=22", "21+5=26", "26-4=22"]
    assert countdown_reward(completions, numbers, target) == [0.0, 1.0, 0.0, 0.0]
    prefixes = ["7*3=21,", "", "7*3=21,", "7*3=21,21+5=26,"]
    assert countdown_reward(completions, numbers, target, prefix=prefixes) == [1.0, 1.0, 0.0, 1.0]
    chat = [[{"role": "assistant", "content": "21+5=26,26-4=22"}]]
    assert countdown_reward(chat, [[7, 3, 5, 4]], [22], prefix=["7*3=21,"]) == [1.0]
    with pytest.raises(ValueError, match="prefix=3"):
        countdown_reward(completions, numbers, target, prefix=prefixes[:3])
    with pytest.raises(ValueError, match="row 1: field 'prefix'"):
        countdown_reward(completions[:2], numbers[:2], target[:2], prefix=["", None])


def test_prefix_train_set_of_a_profile_and_its_same_family_control(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))  # smoke policies build here in seconds
    from psnlib.replication.compute.prefixes import prefix_source, prefix_train_set
    from psnlib.replication.plan.profiles import get_profile

    smoke = get_profile("smoke")
    assert prefix_source(smoke, "weak") == smoke.weak
    control = prefix_source(smoke, "same_family")
    assert control.family == smoke.base.family != smoke.weak.family
    # the target's recipe (style, learning rate, batch) at the weak policy's size and SFT length
    assert (control.size, control.sft_steps) == (smoke.weak.size, smoke.weak.sft_steps)
    assert control == replace(
        smoke.base, size=smoke.weak.size, sft_steps=50, sft_examples=smoke.weak.sft_examples
    )
    with pytest.raises(ValueError, match=r"unknown prefix source 'gpt'; allowed: weak, same_fam"):
        prefix_source(smoke, "gpt")
    built = prefix_train_set(get_profile("smoke"), seed=0, truncation="random", progress=False)
    assert len(built) == smoke.rl_train_problems and "weak_prefix" in built.column_names
    again = prefix_train_set(get_profile("smoke"), seed=0, truncation="random", progress=False)
    assert again["weak_prefix"] == built["weak_prefix"]
    assert len(list((tmp_path / "cache" / "weak_prefixes").iterdir())) == 1  # cached once
