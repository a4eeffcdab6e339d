"""Evaluation: exact scoring of known samples, agreement with the sampler, the stored and
resumable benchmark tables."""

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import Dataset

from psnlib import evaluate
from psnlib.evaluate import evaluate_policy
from psnlib.metrics import pass_at_k
from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute import evaluation
from psnlib.replication.compute.evaluation import evaluate_benchmarks
from psnlib.replication.compute.store import ResultStore
from psnlib.replication.plan.profiles import get_profile
from psnlib.sampling import Samples, generate_samples
from psnlib.tasks import load_benchmark
from psnlib.tasks.countdown import Problem, verify

TOK = build_tokenizer()
SMOKE = get_profile("smoke")
DATA = pd.DataFrame(
    {"prompt": ["7 3 5 4->22:", "1 2 3 4 5->15:"], "numbers": [[7, 3, 5, 4], [1, 2, 3, 4, 5]]}
).assign(target=[22, 15])
COMPLETIONS = [
    ["7*3=21,5-4=1,21+1=22", "5-4=1,3*7=21,1+21=22", "7*3=21,21+5=26,26-4=22", "7*3=20"],
    ["1+2=3,3+3=6,6+4=10,10+5=15", "9+9=18", "", "1+2=3,3+3=6,6+4=10,10+5=14"],
]


def fixed_samples(model, tokenizer, prompts, n, **kwargs) -> Samples:
    """What ``sample_prompts`` would return had the policy written ``COMPLETIONS``."""
    L = kwargs["max_new_tokens"]
    tokens = torch.zeros((len(prompts), n, L), dtype=torch.long)
    lengths = torch.zeros((len(prompts), n), dtype=torch.long)
    for i, texts in enumerate(COMPLETIONS):
        for j, text in enumerate(texts):
            ids = TOK(text, add_special_tokens=False)["input_ids"] + [TOK.eos_token_id]
            tokens[i, j, : len(ids)], lengths[i, j] = torch.tensor(ids), len(ids)
    entropies = torch.arange(L, dtype=torch.float).expand(len(prompts), n, L).clone()
    return Samples(tokens, lengths, torch.zeros(tokens.shape), entropies)


def test_known_samples_are_scored_exactly(monkeypatch):
    monkeypatch.setattr(evaluate, "sample_prompts", fixed_samples)
    model = tiny_policy("qwen2", "smoke", TOK)
    problems, curve = evaluate_policy(
        model, TOK, Dataset.from_pandas(DATA), n=4, ks=(1, 2, 4), max_new_tokens=32
    )
    first, second = problems.iloc[0], problems.iloc[1]
    assert (first.correct, first.distinct_correct, first.solutions) == (3, 2, 4)
    assert (second.correct, second.distinct_correct) == (1, 1) and pd.isna(second.solutions)
    assert first.step_validity == pytest.approx((1 + 1 + 1 + 0) / 4)
    assert first.first_error == 0  # only "7*3=20" fails, at its first step
    assert second.step_validity == pytest.approx((1 + 0 + 0.75) / 3)  # "" has no steps
    assert second.first_error == pytest.approx((0 + 3) / 2)  # "9+9=18" and the last
    lengths = np.array([len(c) + 1 for c in COMPLETIONS[0]])
    assert first.length == lengths.mean()
    assert first.entropy == pytest.approx(np.mean([(L - 1) / 2 for L in lengths]))
    assert np.isfinite(first.informativeness) and 0 < first.diversity < 1
    assert curve.k.tolist() == [1, 2, 4]
    np.testing.assert_allclose(curve.pass_at_k, [pass_at_k(4, [3, 1], k).mean() for k in (1, 2, 4)])
    assert (curve.lo <= curve.pass_at_k).all() and (curve.pass_at_k <= curve.hi).all()


def test_counts_agree_with_the_sampler():
    torch.manual_seed(0)
    model = tiny_policy("qwen2", "smoke", TOK, seed=2).eval()
    data = load_benchmark("countdown-l1", 3, seed=0)
    problems, _ = evaluate_policy(
        model, TOK, data, n=6, ks=(1,), max_new_tokens=16, seed=5, progress=False
    )
    texts = generate_samples(model, TOK, list(data["prompt"]), 6, max_new_tokens=16, seed=5)
    for row, completions in zip(data, texts, strict=True):
        problem = Problem(tuple(row["numbers"]), row["target"])
        want = sum(verify(problem, t).correct for t in completions)
        assert problems.set_index("prompt").loc[row["prompt"], "correct"] == want


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    torch.set_num_threads(1)
    return tmp_path


def test_benchmarks_are_stored_loaded_and_resumed(data_root, monkeypatch):
    model = tiny_policy("qwen2", "smoke", TOK, seed=3).eval()
    benches = ("countdown-l1", "countdown-5num")
    calls = []
    real = evaluation.evaluate_policy

    def counting(*args, **kwargs):
        calls.append(kwargs["n"])
        if len(calls) == 2:
            raise KeyboardInterrupt  # interrupted in the second benchmark
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation, "evaluate_policy", counting)
    with pytest.raises(KeyboardInterrupt):
        evaluate_benchmarks(model, TOK, SMOKE, benches, run_key="base", progress=False)
    out = evaluate_benchmarks(model, TOK, SMOKE, benches, run_key="base", progress=False)
    assert len(calls) == 3  # the finished benchmark was not recomputed
    (run_dir,) = (data_root / "results" / "smoke").iterdir()
    assert run_dir.name.startswith("base-")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.json",
        "countdown-5num.json",
        "countdown-l1.json",
    ]
    problems, curves = out["problems"], out["curves"]
    assert list(problems.columns[:3]) == list(curves.columns[:3]) == ["run", "seed", "benchmark"]
    assert problems.groupby("benchmark").size().to_dict() == dict.fromkeys(benches, 8)
    assert curves.groupby("benchmark").k.apply(list).to_dict() == dict.fromkeys(
        benches, [1, 2, 4, 8, 16]
    )
    assert (problems.n == 16).all()
    again = evaluate_benchmarks(model, TOK, SMOKE, benches, run_key="base", progress=False)
    assert len(calls) == 3
    pd.testing.assert_frame_equal(again["problems"], problems)
    with torch.no_grad():
        model.lm_head.weight.mul_(1.01)  # other weights: another run directory
    evaluate_benchmarks(model, TOK, SMOKE, benches[:1], run_key="base", progress=False)
    assert len(calls) == 4 and len(list((data_root / "results" / "smoke").iterdir())) == 2


def test_bad_input():
    with pytest.raises(ValueError, match="at least one problem"):
        evaluate_policy(None, TOK, Dataset.from_pandas(DATA.iloc[:0]), n=4, ks=(1,))
    with pytest.raises(ValueError, match="informativeness_samples must be >= 0, got -1"):
        evaluate_policy(
            None, TOK, Dataset.from_pandas(DATA), n=4, ks=(1,), informativeness_samples=-1
        )


def test_a_stored_benchmark_without_rows_is_recomputed_not_dropped(tmp_path, monkeypatch):
    """A stored part ``{"problems": <no rows>, ...}`` is named and computed again: the
    benchmark is never left out of the average without a word."""
    smoke = get_profile("smoke")
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    monkeypatch.setattr(evaluation, "eval_config", lambda *args: {"run": "base"})
    problems = pd.DataFrame({"n": [4], "correct": [1]})
    curves = pd.DataFrame({"k": [1], "pass_at_k": [0.25]})
    monkeypatch.setattr(evaluation, "evaluate_at_profile", lambda *args: (problems, curves))
    store = ResultStore.for_run(smoke.name, "base", {"run": "base"})
    store.save("countdown-l1", {"problems": problems.iloc[:0], "curves": curves.iloc[:0]})
    benchmarks = ("countdown-l1", "countdown-l2")
    with pytest.warns(UserWarning, match=r"countdown-l1\.json: table 'problems' has no rows"):
        out = evaluate_benchmarks(None, None, smoke, benchmarks, run_key="base", progress=False)
    assert out["problems"]["benchmark"].tolist() == list(benchmarks)
