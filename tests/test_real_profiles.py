"""The gpu and paper profiles name real data; training sets by name; real-benchmark evaluation."""

import pytest
import torch
from datasets import Dataset

import psnlib.evaluate as evaluate_module
import psnlib.replication.compute.evaluation as evaluation
from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute.evaluation import evaluate_at_profile
from psnlib.replication.plan.profiles import PROFILES, get_profile
from psnlib.replication.plan.runs import run_dir
from psnlib.tasks import (
    REAL_BENCHMARKS,
    benchmark_kind,
    check_dataset,
    countdown_reward,
    math_reward,
    task_reward,
    train_problems,
)
from psnlib.tasks.datasets import step_task


def test_paper_profile_mirrors_the_released_setup():
    p = get_profile("paper")
    assert p.base.name_or_path == "Qwen/Qwen2.5-Math-7B"
    assert (p.rl_prompts_per_step, p.num_generations, p.learning_rate) == (256, 8, 3e-7)
    assert (p.max_completion_length, p.psn_sigma, p.tis_cap) == (3072, 0.004, 10.0)
    assert (p.eval_temperature, p.eval_samples, max(p.ks)) == (0.9, 256, 256)
    assert p.rl_dataset == "simplerl-math-l3to5" and p.rl_train_problems == 0  # all of it
    in_distribution = {"aime24", "aime25", "amc23", "olympiadbench", "minerva", "math500"}
    assert set(p.benchmarks) == in_distribution | {"gpqa-diamond"}


@pytest.mark.parametrize("name", ["gpu", "paper"])
def test_real_profiles_name_only_loadable_real_data(name):
    p = get_profile(name)
    for benchmark in p.benchmarks:
        assert not REAL_BENCHMARKS[benchmark].unsupported, benchmark
    assert REAL_BENCHMARKS[p.rl_dataset].role == "train"
    assert p.eval_problems == 0  # whole benchmarks: AIME has 30 problems


def test_the_testbed_profiles_keep_the_countdown_training_set_and_run_keys():
    assert get_profile("cpu").rl_dataset == "countdown"
    assert get_profile("smoke").rl_dataset == "countdown-dense"  # its problems, partial credit
    cpu = get_profile("cpu")
    math = cpu.with_overrides(rl_dataset="simplerl-math-l3to5")
    assert run_dir(math, "psn", 0, {}, "r") != run_dir(cpu, "psn", 0, {}, "r")


def test_every_profile_benchmark_has_a_kind():
    kinds = {name: benchmark_kind(name) for p in PROFILES.values() for name in p.benchmarks}
    assert kinds["gpqa-diamond"] == kinds["countdown-div"] == "ood"
    assert kinds["aime24"] == kinds["countdown-l3"] == "id"
    with pytest.raises(KeyError, match="unknown real benchmark 'aime23'"):
        benchmark_kind("aime23")


def test_training_sets_by_name(monkeypatch):
    assert task_reward("countdown") is countdown_reward and task_reward("aime24") is math_reward
    assert (step_task("countdown"), step_task("minerva")) == ("countdown", "math")
    assert len(train_problems("countdown", 5, seed=0)) == 5
    calls = []
    monkeypatch.setattr(
        "psnlib.tasks.datasets.load_real_benchmark", lambda *a, **k: calls.append((a, k))
    )
    train_problems("simplerl-math-l3to5", 0, seed=2)
    assert calls == [(("simplerl-math-l3to5", 0), {"seed": 2})]
    with pytest.raises(ValueError, match=r"unknown dataset 'livecodebench'; allowed: countdown"):
        check_dataset("livecodebench")  # registered, but not loadable


def test_real_benchmarks_are_judged_by_math_reward(monkeypatch):
    """evaluate_at_profile routes a real benchmark name to load_real_benchmark and math_reward;
    the completions are replaced by known texts, so the counts are known."""
    answers = ["3", "B"]
    dataset = Dataset.from_dict(
        {
            "prompt": ["1 2->3:", "4 5->9:"],  # characters the tiny tokenizer knows
            "answer": answers,
            "id": ["a", "b"],
            "answer_type": ["math", "choice"],
        }
    )
    loaded = []
    monkeypatch.setattr(
        evaluation,
        "load_real_benchmark",
        lambda name, n, seed: loaded.append((name, n, seed)) or dataset,
    )
    texts = [
        ["so \\boxed{3}", "\\boxed{3.0}", "\\boxed{4}", "no box"],
        ["\\boxed{B}", "\\boxed{C}", "The answer is B", "\\boxed{A}"],
    ]
    monkeypatch.setattr(evaluate_module, "decode", lambda tokenizer, samples: texts)
    profile = get_profile("smoke").with_overrides(eval_samples=4, ks=(1, 2, 4), eval_problems=0)
    tokenizer = build_tokenizer()
    model = tiny_policy(size="smoke", tokenizer=tokenizer, seed=0).eval()
    torch.manual_seed(0)
    problems, curve = evaluate_at_profile(model, tokenizer, profile, "aime24", progress=False)
    assert loaded == [("aime24", 0, 0)]
    assert problems["correct"].tolist() == [2, 2]
    assert problems["id"].tolist() == ["a", "b"] and (problems["length"] > 0).all()
    assert curve["k"].tolist() == [1, 2, 4]
    assert curve["pass_at_k"].tolist()[0] == pytest.approx(0.5)
    assert curve["pass_at_k"].tolist()[-1] == pytest.approx(1.0)
