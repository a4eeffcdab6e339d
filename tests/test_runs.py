"""RL runs at the smoke profile: config precedence, learning, caching, resuming, bad input."""

import pytest
import torch

from psnlib import runs
from psnlib.pretrain import base_policy
from psnlib.profiles import get_profile
from psnlib.runs import rl_config, run_dir, train_policy
from psnlib.variants import Variant


def starts_with_digit_seven(completions, **kwargs):
    """A reward the untrained smoke policy sometimes earns, so advantages are not all zero."""
    return [float(c.startswith("7")) + 0.1 * len(c) / 32 for c in completions]


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    torch.set_num_threads(1)
    return tmp_path


def test_config_takes_profile_then_arm_then_overrides(tmp_path):
    grpo = rl_config("smoke", "grpo", 0, tmp_path)
    assert (grpo.sigma, grpo.use_tis, grpo.max_steps) == (0.0, False, 4)
    assert grpo.per_device_train_batch_size == 4 * 4  # prompts x G of the smoke profile
    psn = rl_config("smoke", "psn", 0, tmp_path, noise_scope="step")
    assert (psn.sigma, psn.use_tis, psn.noise_scope) == (0.003, True, "step")


def test_gradient_checkpointing_follows_the_profile_outside_the_cache_key(tmp_path):
    # The tiny profiles recompute nothing; the large ones keep TRL's default.
    assert rl_config("cpu", "psn", 0, tmp_path).gradient_checkpointing is False
    assert rl_config("paper", "psn", 0, tmp_path).gradient_checkpointing is True
    slow = get_profile("cpu").with_overrides(gradient_checkpointing=True)
    assert run_dir(slow, "psn", 0, {}, "r") == run_dir("cpu", "psn", 0, {}, "r")


def test_bad_arm_and_settings_fail_before_work(data, monkeypatch):
    monkeypatch.setattr(runs, "base_policy", lambda *a: pytest.fail("did work"))
    with pytest.raises(ValueError, match=r"unknown arm 'ppo'; allowed: \['grpo'"):
        train_policy("smoke", "ppo")
    with pytest.raises(ValueError, match="sigma"):
        train_policy("smoke", "psn", sigma=-1.0)


def test_psn_run_learns_is_cached_and_logs_psn_metrics(data, monkeypatch):
    model, _, log = train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    base, _, _ = base_policy("smoke")
    changed = [
        not torch.equal(p, q) for p, q in zip(model.parameters(), base.parameters(), strict=True)
    ]
    assert any(changed)
    assert list(log["step"]) == [1, 2, 3, 4]
    assert {"reward", "entropy", "psn/sigma", "psn/kl_proxy", "tis/mean"} <= set(log.columns)
    assert (log["psn/kl_proxy"].abs() > 0).all()
    # The finished run is loaded, not retrained, and the work directory is gone.
    monkeypatch.setattr(runs, "PSNGRPOTrainer", lambda *a, **k: pytest.fail("retrained"))
    again, _, log2 = train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    assert all(
        torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters(), strict=True)
    )
    assert log2["reward"].tolist() == log["reward"].tolist()
    path = run_dir("smoke", "psn", 0, {}, "starts_with_digit_seven")
    assert path.exists() and not path.with_name(path.name + ".work").exists()


def test_interrupted_run_resumes_from_its_checkpoint(data, monkeypatch):
    resumed_from = []
    real_train = runs.PSNGRPOTrainer.train

    def train(self, resume_from_checkpoint=None, **kwargs):
        resumed_from.append(resume_from_checkpoint)
        if len(resumed_from) == 1:  # first attempt: stop after the step-1 checkpoint
            self.args.max_steps = 1
            real_train(self, **kwargs)
            raise KeyboardInterrupt
        return real_train(self, resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    monkeypatch.setattr(runs.PSNGRPOTrainer, "train", train)
    with pytest.raises(KeyboardInterrupt):
        train_policy("smoke", "grpo", 0, reward=starts_with_digit_seven)
    _, _, log = train_policy("smoke", "grpo", 0, reward=starts_with_digit_seven)
    assert resumed_from[0] is None and resumed_from[1].endswith("checkpoint-1")
    assert list(log["step"]) == [1, 2, 3, 4]


def test_run_key_covers_the_arm_settings(monkeypatch):
    before = run_dir("smoke", "psn", 0, {}, "r")
    monkeypatch.setitem(runs.ARMS, "psn", {"tis_cap": 2.0})
    assert run_dir("smoke", "psn", 0, {}, "r") != before


def test_run_key_covers_training_and_nothing_else():
    smoke = runs.get_profile("smoke")
    key = run_dir(smoke, "psn", 0, {}, "r")
    # Settings spelled out at the value the profile gives, and evaluation sizes: same run.
    assert run_dir(smoke, "psn", 0, {"sigma": smoke.psn_sigma}, "r") == key
    assert run_dir(smoke.with_overrides(eval_samples=3, seeds=(5,)), "psn", 0, {}, "r") == key
    # What changes training changes the run.
    assert run_dir(smoke, "psn", 1, {}, "r") != key
    assert run_dir(smoke, "psn", 0, {"sigma": 0.01}, "r") != key
    assert run_dir(smoke, "psn", 0, {}, "other_reward") != key
    assert run_dir(smoke.with_overrides(rl_steps=3), "psn", 0, {}, "r") != key
    other_base = smoke.with_overrides(base=smoke.other_policies[0])
    assert run_dir(other_base, "psn", 0, {}, "r") != key


def test_weak_prefix_runs_train_on_prefixed_problems_keyed_by_how_they_were_made(data):
    with pytest.raises(ValueError, match=r"\['prefix_source'\] only apply to weak-prefix runs"):
        rl_config("smoke", "grpo", 0, data, prefix_source="same_family")
    with pytest.raises(ValueError, match=r"unknown prefix_source 'gpt'; allowed: weak, same_fa"):
        rl_config("smoke", "weak_prefix", 0, data, prefix_source="gpt")
    config = rl_config("smoke", "weak_prefix", 0, data)
    assert (config.prefix_prob, config.sigma) == (0.2, 0.0)
    keys = {
        run_dir("smoke", "weak_prefix", 0, overrides, "r")
        for overrides in ({}, {"prefix_truncation": "random"}, {"prefix_source": "same_family"})
    }
    assert len(keys) == 3  # how the prefixes were made is part of the run
    assert run_dir("smoke", "weak_prefix", 0, {"prefix_truncation": "entropy"}, "r") in keys
    # p = 1: every group continues its prefix (the smoke policies write at least one step)
    _, _, log = train_policy(
        "smoke", "weak_prefix", 0, reward=starts_with_digit_seven, prefix_prob=1.0
    )
    assert (log["prefix/fraction"] == 1.0).all() and (log["prefix/tokens"] > 0).all()


def test_a_variant_names_the_run_directory_train_policy_writes():
    # train_policy keys a run by the reward of the profile's rl_dataset: math_reward on the gpu
    # profile's real training set, countdown_reward on the testbed.
    psn = Variant("PSN", "psn", {"sigma": 0.002})
    assert psn.run_path("gpu", 1) == run_dir("gpu", "psn", 1, {"sigma": 0.002}, "math_reward")
    testbed = run_dir("cpu", "psn", 1, {"sigma": 0.002}, "countdown_reward")
    assert psn.run_key("cpu", 1) == testbed.name
    with pytest.raises(ValueError, match="base policy has no RL run"):
        Variant("base", "base").run_path("cpu", 0)
