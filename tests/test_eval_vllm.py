"""``python -m psnlib eval --use_vllm`` samples with a ``vllm.LLM`` of the policy through
``psnlib.sampling._sample_vllm``. Without vLLM (this CPU machine) a fake engine stands in: it
records how it was built and called, and answers every prompt with one known completion."""

from types import SimpleNamespace

import pytest

import psnlib.sampling as sampling
from psnlib.models import build_tokenizer, save_policy, tiny_policy
from psnlib.replication.compute.cli import main, plan_eval
from psnlib.replication.compute.evaluation import eval_config
from psnlib.replication.plan.profiles import get_profile

ANSWER = "1+2=3"  # a completion the fake engine gives every sample


class FakeLLM:
    """``vllm.LLM``: built from the policy directory; ``generate`` answers ``ANSWER``."""

    made: list["FakeLLM"] = []

    def __init__(self, model: str, **settings) -> None:
        self.path, self.settings, self.calls = model, settings, []
        tokenizer = build_tokenizer()
        self.ids = tokenizer(ANSWER, add_special_tokens=False)["input_ids"]
        self.ids.append(tokenizer.eos_token_id)
        FakeLLM.made.append(self)

    def generate(self, inputs, params, use_tqdm=False):
        self.calls.append((inputs, params))
        completion = SimpleNamespace(token_ids=self.ids, logprobs=None)
        return [SimpleNamespace(outputs=[completion] * p.n) for p in params]


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    fake = SimpleNamespace(
        LLM=FakeLLM,
        SamplingParams=lambda **kw: SimpleNamespace(**kw),
        inputs=SimpleNamespace(TokensPrompt=lambda prompt_token_ids: prompt_token_ids),
    )
    monkeypatch.setattr(sampling, "vllm", fake)
    FakeLLM.made = []

    def no_decoder(*args, **kwargs):
        raise AssertionError("the psnlib decoder sampled, not vLLM")

    monkeypatch.setattr(sampling, "_decode", no_decoder)
    return fake


def a_policy_directory(path):
    """A saved tiny policy: a directory that eval accepts."""
    tokenizer = build_tokenizer()
    save_policy(tiny_policy(size="smoke", tokenizer=tokenizer), tokenizer, path)
    return path


def test_eval_use_vllm_samples_with_a_vllm_engine_of_the_policy(tmp_path, fake_vllm, capsys):
    policy = a_policy_directory(tmp_path / "policy")
    argv = ["eval", "--model", str(policy), "--profile", "smoke", "--use_vllm"]
    main([*argv, "--benchmarks", "countdown-l1", "--seed", "3"])
    (engine,) = FakeLLM.made
    assert engine.path == str(policy) and engine.settings["seed"] == 3
    (inputs, params), *rest = engine.calls
    profile = get_profile("smoke")
    assert not rest and len(inputs) == profile.eval_problems
    assert {p.n for p in params} == {profile.eval_samples}
    assert {p.temperature for p in params} == {profile.eval_temperature}
    assert {p.max_tokens for p in params} == {profile.max_completion_length}
    assert "countdown-l1" in capsys.readouterr().out  # the pass@k table was printed


def test_paper_evaluates_with_vllm_by_default(tmp_path, fake_vllm):
    """A 7B policy's eval must not default to the psnlib decoder (~380 GB of KV cache)."""
    a_policy_directory(tmp_path)
    script, profile, _ = plan_eval(["--model", str(tmp_path), "--profile", "paper"])
    assert script.use_vllm and profile.eval_engine == "vllm"
    script, _, _ = plan_eval(
        ["--model", str(tmp_path), "--profile", "paper", "--use_vllm", "false"]
    )
    assert not script.use_vllm
    script, _, _ = plan_eval(["--model", str(tmp_path), "--profile", "gpu"])
    assert not script.use_vllm


def test_vllm_results_are_stored_apart(tmp_path):
    model = tiny_policy(size="smoke", tokenizer=build_tokenizer())
    clean = eval_config(model, get_profile("smoke"), "run", 0)
    assert "sampler" not in clean  # the psnlib sampler's keys are unchanged
    assert eval_config(model, get_profile("smoke"), "run", 0, engine=object())["sampler"] == "vllm"


def test_use_vllm_without_vllm_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(sampling, "vllm", None)
    a_policy_directory(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--model", str(tmp_path), "--profile", "paper"])
    assert "needs vLLM" in exit_.value.code and "--use_vllm false" in exit_.value.code


def test_help_exits_0(capsys):
    main(["--help"])
    assert "train" in capsys.readouterr().out
