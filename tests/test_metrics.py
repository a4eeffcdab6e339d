"""pass@k against brute force and a closed form; intervals, seeds, solved sets; per-response
diversity, step consistency, informativeness and entropy."""

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
import torch

from psnlib.metrics import (
    aggregate_seeds,
    bootstrap_ci,
    pass_at_k,
    pass_at_k_curve,
    pass_at_k_matrix,
    solved,
    solved_only,
    solved_only_by,
)
from psnlib.models import build_tokenizer, tiny_policy
from psnlib.response_metrics import (
    distinct_correct,
    informativeness,
    mean_token_entropy,
    pairwise_diversity,
    solution_count,
    step_score,
)
from psnlib.similarity import SemanticSimilarity, lexical_similarity, semantic_available
from psnlib.tasks.countdown import ALL_OPS, Problem, canonical_form, enumerate_solutions, verify


def brute_force(n: int, c: int, k: int) -> float:
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force_small_n(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    c, k = rng.randint(0, n), rng.randint(1, n)
    assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_matches_closed_form_large_n_vectorised():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 400, size=200)
    c = np.array([rng.integers(0, m + 1) for m in n])
    k = np.array([rng.integers(1, m + 1) for m in n])
    got = pass_at_k(n, c, k)
    want = [closed_form(int(a), int(b), int(d)) for a, b, d in zip(n, c, k, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_edge_cases():
    assert pass_at_k(256, 0, 256) == 0.0
    assert pass_at_k(256, 256, 1) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_curve_is_non_decreasing_and_ends_at_coverage():
    counts = [0, 1, 5, 0, 16]
    curve = pass_at_k_curve(16, counts)
    assert np.all(np.diff(curve) >= -1e-12)
    assert curve[0] == pytest.approx(np.mean(counts) / 16)
    assert curve[-1] == pytest.approx(3 / 5)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_bad_input(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k needs"):
        pass_at_k(n, c, k)


# ----------------------------------------------------------------------------- pass@k tables


def test_matrix_matches_scalar_calls_and_accepts_per_problem_n():
    n, correct, ks = [4, 8, 8], [1, 0, 8], [1, 2, 4]
    want = [[closed_form(a, b, k) for k in ks] for a, b in zip(n, correct, strict=True)]
    np.testing.assert_allclose(pass_at_k_matrix(n, correct, ks), want, atol=1e-12)
    assert pass_at_k_matrix(8, [0, 8], [8]).tolist() == [[0.0], [1.0]]


@pytest.mark.parametrize(
    ("n", "correct", "match"),
    [
        ([4, 4], [1, 2, 3], "n and correct must have one entry per problem, got lengths 2 and 3"),
        (4, [1, -2], r"pass_at_k needs 0 <= c <= n"),
        (4, [1.5], r"correct must hold whole numbers, got correct=\[1.5\]"),
        (4, [[1, 2]], r"one count per problem, got shape \(1, 2\)"),
    ],
)
def test_matrix_bad_input(n, correct, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k_matrix(n, correct, [1])


def test_bootstrap_interval_matches_the_normal_approximation():
    rng = np.random.default_rng(1)
    n, correct = 16, rng.binomial(16, rng.uniform(0, 1, 400))
    table = bootstrap_ci(n, correct, [1, 16], resamples=4000, seed=3)
    per_problem = correct / n  # pass@1 of each problem
    half = 1.96 * per_problem.std(ddof=1) / np.sqrt(len(correct))
    row = table.iloc[0]
    assert row.pass_at_k == pytest.approx(per_problem.mean())
    assert row.lo == pytest.approx(per_problem.mean() - half, abs=0.15 * half)
    assert row.hi == pytest.approx(per_problem.mean() + half, abs=0.15 * half)
    assert table.equals(bootstrap_ci(n, correct, [1, 16], resamples=4000, seed=3))


def test_bootstrap_of_identical_problems_is_a_point():
    table = bootstrap_ci(8, [3] * 20, [1, 8], resamples=50)
    assert (table.lo == table.pass_at_k).all() and (table.hi == table.pass_at_k).all()
    with pytest.raises(ValueError, match="at least one problem"):
        bootstrap_ci(8, [], [1])


def test_aggregate_over_seeds():
    curves = pd.DataFrame(
        {
            "policy": ["a"] * 6,
            "k": [1, 1, 1, 4, 4, 4],
            "seed": [0, 1, 2] * 2,
            "pass_at_k": [0.1, 0.2, 0.3, 0.5, 0.5, 0.5],
            "lo": 0.0,
        }
    )
    out = aggregate_seeds(curves).set_index("k")
    assert list(out.columns) == ["policy", "mean", "std", "min", "max", "seeds", "sem"]
    assert out.loc[1, "mean"] == pytest.approx(0.2) and out.loc[1, "std"] == pytest.approx(0.1)
    assert out.loc[1, "sem"] == pytest.approx(0.1 / np.sqrt(3)) and out.loc[4, "std"] == 0
    with pytest.raises(ValueError, match="more than one row per seed"):
        aggregate_seeds(pd.concat([curves, curves]))
    with pytest.raises(ValueError, match=r"needs columns \['seed'\]"):
        aggregate_seeds(curves.drop(columns="seed"))


def test_solved_only_by_lists_the_problems():
    a = pd.DataFrame({"prompt": ["p", "q", "r", "s"], "n": 4, "correct": [1, 0, 3, 2]})
    b = pd.DataFrame({"prompt": ["s", "r", "q", "p"], "n": 300, "correct": [0, 5, 0, 0]})
    assert solved(a) == {"p", "r", "s"} and solved(b) == {"r"}
    out = solved_only_by(a, b)
    assert out.to_dict("list") == {
        "prompt": ["p", "s"],
        "n_a": [4, 4],
        "correct_a": [1, 2],
        "n_b": [300, 300],
        "correct_b": [0, 0],
    }
    assert solved_only_by(b, a).empty
    with pytest.raises(ValueError, match="same problems; 1 differ, e.g. \\['p'\\]"):
        solved_only_by(a, b[b.prompt != "p"])
    with pytest.raises(ValueError, match="b lists a problem twice: 's'"):
        solved_only_by(a, pd.concat([b, b.iloc[:1]]))


def test_solved_only_is_solved_by_one_never_by_the_other():
    assert solved_only([3, 0, 2, 0], [0, 0, 1, 5]).tolist() == [True, False, False, False]
    # problems named by several columns (the same prompt on two benchmarks), a's columns kept
    a = pd.DataFrame({"benchmark": ["x", "y"], "prompt": "p", "n": 4, "correct": [2, 0]})
    a["target"] = [7, 8]
    b = a[["benchmark", "prompt", "n"]].assign(correct=[0, 1])
    out = solved_only_by(a, b, on=["benchmark", "prompt"])
    assert out[["benchmark", "target", "correct_a", "correct_b"]].values.tolist() == [
        ["x", 7, 2, 0]
    ]
    with pytest.raises(ValueError, match=r"1 differ, e.g. \[\('y', 'p'\)\]"):
        solved_only_by(a, b.iloc[:1], on=["benchmark", "prompt"])


# ----------------------------------------------------------------------------- responses

PROBLEM = Problem((7, 3, 5, 4), 22)


def test_distinct_correct_counts_canonical_solutions():
    same = ["7*3=21,5-4=1,21+1=22", "5-4=1,3*7=21,1+21=22", " 7*3=21,5-4=1,21+1=22 "]
    assert distinct_correct(PROBLEM, same + ["7*3=21,21+5=26,26-4=22", "7+3=10", ""]) == 2
    everything = enumerate_solutions(PROBLEM, ALL_OPS)
    assert distinct_correct(PROBLEM, everything) == solution_count(PROBLEM)
    assert solution_count(PROBLEM) == len({canonical_form(c) for c in everything}) == 4
    assert solution_count(Problem((1, 2, 3, 4, 5), 15)) is None


def test_pairwise_diversity():
    assert pairwise_diversity(["7*3=21"] * 5) == 0.0
    assert np.isnan(pairwise_diversity(["7*3=21"]))
    texts = ["7*3=21,21+1=22", "1+2=3", "99-9=90", "7*3=21,21+5=26"]
    pairs = [(a, b) for i, a in enumerate(texts) for b in texts[i + 1 :]]
    exact = 1 - np.mean(lexical_similarity([a for a, _ in pairs], [b for _, b in pairs]))
    assert pairwise_diversity(texts) == pytest.approx(exact)  # 6 pairs: all of them
    many = texts * 10
    assert pairwise_diversity(many, pairs=4000) == pytest.approx(
        exact * 30 / 39, abs=0.03
    )  # random pairs of 40 responses: 9 of 39 others are copies


def test_pairwise_diversity_semantic():
    if not semantic_available():
        pytest.skip("the 'semantic' extra (sentence-transformers) is not installed")
    similarity = SemanticSimilarity()
    assert pairwise_diversity(["7*3=21"] * 3, similarity) == pytest.approx(0, abs=1e-5)
    assert pairwise_diversity(["7*3=21", "the cat sat on the mat"], similarity) > 0.3


@pytest.mark.parametrize(
    ("completion", "steps", "valid", "first_error"),
    [
        ("7*3=21,21+5=26,26-4=22", 3, 3, None),  # correct
        ("7*3=21,21+5=26,26-4=21", 3, 2, 2),  # last step's arithmetic wrong
        ("7*3=21,8+5=13,13+4=17", 3, 2, 1),  # 8 is no available value
        ("7*3=21,21+5=26,oops", 3, 2, 2),  # malformed third step
        ("7*3=21,21+5=26", 2, 2, None),  # consistent but unfinished
        ("", 0, 0, None),
    ],
)
def test_step_score(completion, steps, valid, first_error):
    score = step_score(PROBLEM, completion)
    assert (score.steps, score.valid, score.first_error) == (steps, valid, first_error)
    assert step_score(PROBLEM, completion, verify(PROBLEM, completion)) == score
    if steps:
        assert score.valid_fraction == valid / steps
    else:
        assert np.isnan(score.valid_fraction)


def test_informativeness_is_the_rise_of_the_final_steps_logprob():
    torch.manual_seed(0)
    tok = build_tokenizer()
    model = tiny_policy("qwen2", "smoke", tok, seed=1).eval()

    def logp(context: str, answer: str) -> float:  # one unbatched teacher-forced pass
        ids = tok(context + answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, :-1]
        token_logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])
        return float(token_logp[len(context) - 1 :].sum())

    chain = "7*3=21,21+5=26,26-4=22"
    probes = [PROBLEM.prompt, PROBLEM.prompt + "7*3=21,", PROBLEM.prompt + "7*3=21,21+5=26,"]
    want = np.diff([logp(c, "26-4=22") for c in probes])
    items = [(PROBLEM, chain), (PROBLEM, "7*3=21"), (PROBLEM, "7*3=21,21+5=26,x"), (PROBLEM, "")]
    got = informativeness(model, tok, items, batch_size=2)
    np.testing.assert_allclose(got[0], want, atol=1e-4)
    assert len(got[1]) == 0 and len(got[3]) == 0
    np.testing.assert_allclose(got[2], np.diff([logp(c, "21+5=26") for c in probes[:2]]), atol=1e-4)


def test_mean_token_entropy():
    entropies = torch.tensor([[[1.0, 3.0, 5.0], [2.0, 7.0, 0.0]]])  # (P=1, n=2, L=3)
    lengths = torch.tensor([[2, 1]])
    assert mean_token_entropy(entropies, lengths).tolist() == [2.0]  # mean of 2 and 2
    with pytest.raises(ValueError, match=r"got shapes \(1, 2, 3\) and \(2,\)"):
        mean_token_entropy(entropies, lengths[0])
