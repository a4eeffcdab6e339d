"""RL runs at the smoke profile: config precedence, learning, caching, resuming, bad input."""

import functools
import shutil
from types import SimpleNamespace

import pytest
import torch

from psnlib.models import META_FILE, build_tokenizer, tiny_policy
from psnlib.replication.compute import runs
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.replication.plan import arms
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.runs import Run, reward_key, rl_config, run_dir
from psnlib.replication.plan.variants import Variant
from psnlib.tasks import math_reward, task_reward
from psnlib.tasks.reward import countdown_reward as builtin_countdown_reward


def starts_with_digit_seven(completions, **kwargs):
    """A reward the untrained smoke policy sometimes earns, so advantages are not all zero."""
    return [float(c.startswith("7")) + 0.1 * len(c) / 32 for c in completions]


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    torch.set_num_threads(1)
    return tmp_path


def test_config_takes_profile_then_arm_then_overrides(tmp_path):
    grpo = rl_config(get_profile("smoke"), "grpo", 0, tmp_path)
    assert (grpo.sigma, grpo.use_tis, grpo.max_steps) == (0.0, False, 4)
    assert grpo.per_device_train_batch_size == 4 * 4  # prompts x G of the smoke profile
    psn = rl_config(get_profile("smoke"), "psn", 0, tmp_path, noise_scope="step")
    assert (psn.sigma, psn.use_tis, psn.noise_scope) == (0.003, True, "step")


def test_gradient_checkpointing_follows_the_profile_outside_the_cache_key(tmp_path):
    # The tiny profiles recompute nothing; the large ones keep TRL's default.
    assert rl_config(get_profile("cpu"), "psn", 0, tmp_path).gradient_checkpointing is False
    assert rl_config(get_profile("paper"), "psn", 0, tmp_path).gradient_checkpointing is True
    slow = get_profile("cpu").with_overrides(gradient_checkpointing=True)
    assert run_dir(slow, "psn", 0, {}, "r") == run_dir(get_profile("cpu"), "psn", 0, {}, "r")


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
    path = run_dir(get_profile("smoke"), "psn", 0, {}, reward_key(starts_with_digit_seven))
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


def test_run_key_covers_the_arm_settings():
    before = run_dir(get_profile("smoke"), arms.PSN, 0, {}, "r")
    changed = arms.Arm(arms.PSN.name, {"tis_cap": 2.0})  # the same name, other settings
    assert run_dir(get_profile("smoke"), changed, 0, {}, "r") != before


def test_a_profile_sets_its_own_variant_i_target_and_the_arm_states_only_the_method():
    assert "kl_target" not in arms.PSN_KL.settings
    targets = {
        name: Run(get_profile(name), arms.PSN_KL, 0).settings()["kl_target"]
        for name in ("smoke", "cpu", "gpu", "paper")
    }
    assert targets == {"smoke": 0.001, "cpu": 0.004, "gpu": 0.004, "paper": 0.004}
    with pytest.raises(ValueError, match="base policy is not an RL arm"):
        Run(get_profile("smoke"), arms.BASE, 0)


def test_an_arm_name_enters_once_and_becomes_its_arm():
    assert Run(get_profile("smoke"), "psn_kl", 0).arm is arms.PSN_KL
    assert arms.arm("base") is arms.BASE and arms.arm(arms.PSN) is arms.PSN
    with pytest.raises(ValueError, match=r"unknown arm 'ppo'; allowed: \['base', 'grpo'"):
        arms.arm("ppo")


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
        rl_config(get_profile("smoke"), "grpo", 0, data, prefix_source="same_family")
    with pytest.raises(ValueError, match=r"unknown prefix_source 'gpt'; allowed: weak, same_fa"):
        rl_config(get_profile("smoke"), "weak_prefix", 0, data, prefix_source="gpt")
    config = rl_config(get_profile("smoke"), "weak_prefix", 0, data)
    assert (config.prefix_prob, config.sigma) == (0.2, 0.0)
    keys = {
        run_dir(get_profile("smoke"), "weak_prefix", 0, overrides, "r")
        for overrides in ({}, {"prefix_truncation": "random"}, {"prefix_source": "same_family"})
    }
    assert len(keys) == 3  # how the prefixes were made is part of the run
    assert (
        run_dir(get_profile("smoke"), "weak_prefix", 0, {"prefix_truncation": "entropy"}, "r")
        in keys
    )
    # p = 1: every group continues its prefix (the smoke policies write at least one step)
    _, _, log = train_policy(
        "smoke", "weak_prefix", 0, reward=starts_with_digit_seven, prefix_prob=1.0
    )
    assert (log["prefix/fraction"] == 1.0).all() and (log["prefix/tokens"] > 0).all()


def test_a_variant_names_the_run_directory_train_policy_writes():
    # train_policy keys a run by the reward of the profile's rl_dataset: math_reward on the gpu
    # profile's real training set, countdown_reward on the testbed.
    psn = Variant("PSN", "psn", {"sigma": 0.002})
    assert psn.run_path(get_profile("gpu"), 1) == run_dir(
        get_profile("gpu"), "psn", 1, {"sigma": 0.002}, "math_reward"
    )
    testbed = run_dir(get_profile("cpu"), "psn", 1, {"sigma": 0.002}, "countdown_reward")
    assert psn.run_key(get_profile("cpu"), 1) == testbed.name
    with pytest.raises(ValueError, match="base policy has no RL run"):
        Variant("base", "base").run_path(get_profile("cpu"), 0)


def test_built_in_rewards_keep_the_keys_of_the_cached_runs():
    # The run directories that the code before reward_key and the thread count (684c706) gave.
    def key(name, arm, seed, overrides=None, threads=1):
        profile = get_profile(name)
        reward = reward_key(task_reward(profile.rl_dataset))
        return run_dir(profile, arm, seed, overrides or {}, reward, threads).name

    assert reward_key(builtin_countdown_reward) == "countdown_reward"
    assert reward_key(math_reward) == "math_reward"
    assert key("cpu", "psn", 0) == "psn-s0-b4ab1166960c"
    assert key("smoke", "psn", 0) == "psn-s0-dbf10a5f836f"
    assert key("smoke", "grpo", 0) == "grpo-s0-9fd1029349b1"
    assert key("gpu", "psn", 1, {"sigma": 0.002}) == "psn-s1-57a3b83185bf"
    # Another thread count rounds differently: another run.
    assert key("cpu", "psn", 0, threads=2) != key("cpu", "psn", 0)


def countdown_reward(completions, **kwargs):  # named like the built-in on purpose
    return [1.0] * len(completions)


def scaled(factor):
    def reward(completions, **kwargs):
        return [factor * len(c) for c in completions]

    return reward


class Judge:
    def __call__(self, completions, **kwargs):
        return [0.0] * len(completions)


def test_a_user_reward_is_keyed_by_its_source_or_its_id():
    first = lambda completions, **kw: [1.0] * len(completions)  # noqa: E731
    second = lambda completions, **kw: [0.0] * len(completions)  # noqa: E731
    keys = {reward_key(r) for r in (first, second, countdown_reward, scaled(1.0), scaled(2.0))}
    assert len(keys) == 5  # the lambdas, the namesake of a built-in, the factory's two
    assert reward_key(countdown_reward).startswith(f"{__name__}.countdown_reward:")
    assert reward_key(scaled(2.0)) == reward_key(scaled(2.0))  # stable: a cached run is found
    assert reward_key(Judge(), reward_id="judge-v1") == "id:judge-v1"
    for unkeyable in (Judge(), functools.partial(scaled(1.0)), len):
        with pytest.raises(ValueError, match="cannot be keyed by its source.*pass reward_id"):
            reward_key(unkeyable)
    both = (lambda c, **k: [1.0], lambda c, **k: [2.0])  # one line: the same source
    with pytest.raises(ValueError, match="its lines hold other lambdas; pass reward_id"):
        reward_key(both[0])
    with pytest.raises(ValueError, match="reward_id must be a non-empty string"):
        reward_key(first, reward_id="")


@pytest.fixture
def fake_fit(data, monkeypatch):
    """train_policy on the untrained smoke policy, with ``fit`` replaced by one that returns it
    as it is and a one-step log; ``calls`` records the torch thread count of each call."""
    tokenizer = build_tokenizer()
    calls = []

    def fit(config, model, tokenizer, dataset, reward):
        calls.append(torch.get_num_threads())

        def save_model(to):
            model.save_pretrained(to)
            tokenizer.save_pretrained(to)

        trainer = SimpleNamespace(model=model, save_model=save_model)
        return trainer, [{"step": 1, "reward": 0.5}]

    def base(profile):
        return tiny_policy(size="smoke", tokenizer=tokenizer, seed=0), tokenizer, None

    monkeypatch.setattr(runs, "fit", fit)
    monkeypatch.setattr(runs, "base_policy", base)
    monkeypatch.setattr(runs, "train_set", lambda *a, **k: None)
    return calls


RUN_DAMAGE = {
    "truncated meta": lambda p: (p / META_FILE).write_text('{"log": [{"st'),
    "meta a JSON list": lambda p: (p / META_FILE).write_text("[]"),
    "an empty log": lambda p: (p / META_FILE).write_text(
        '{"profile": "smoke", "arm": "psn", "seed": 0, "overrides": {}, "log": []}'
    ),
    "a log of numbers": lambda p: (p / META_FILE).write_text(
        '{"profile": "smoke", "arm": "psn", "seed": 0, "overrides": {}, "log": [1]}'
    ),
    "meta missing": lambda p: (p / META_FILE).unlink(),
    "truncated weights": lambda p: (p / "model.safetensors").write_bytes(b"\x10\x00"),
}


@pytest.mark.parametrize("damage", RUN_DAMAGE)
def test_a_damaged_run_is_removed_with_a_warning_and_retrained(fake_fit, damage):
    path = run_dir(get_profile("smoke"), "psn", 0, {}, reward_key(starts_with_digit_seven))
    train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    RUN_DAMAGE[damage](path)
    with pytest.warns(UserWarning, match=f"removing the damaged cached run {path} "):
        _, _, log = train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    assert len(fake_fit) == 2 and log.to_dict(orient="records") == [{"step": 1, "reward": 0.5}]
    assert runs.policy_meta(path)["log"] == [{"step": 1, "reward": 0.5}]  # cached again, whole


def test_a_transient_error_while_loading_a_run_removes_nothing(fake_fit, monkeypatch):
    path = run_dir(get_profile("smoke"), "psn", 0, {}, reward_key(starts_with_digit_seven))
    train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    files = sorted(p.name for p in path.iterdir())

    def no_threads(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(runs, "load_saved_policy", no_threads)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    assert sorted(p.name for p in path.iterdir()) == files and len(fake_fit) == 1


def test_a_run_with_a_non_finite_weight_is_not_cached(fake_fit, monkeypatch):
    real_fit = runs.fit

    def diverged(*args):
        trainer, log = real_fit(*args)
        with torch.no_grad():
            trainer.model.lm_head.weight[0, 0] = float("inf")
        return trainer, log

    monkeypatch.setattr(runs, "fit", diverged)
    path = run_dir(get_profile("smoke"), "psn", 0, {}, reward_key(starts_with_digit_seven))
    with pytest.raises(ValueError, match=f"refusing to save the policy .*smoke/{path.name}: its"):
        train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    # no run, no lock: the work directory alone, with the run's record
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{path.name}.work"]


def test_a_run_trains_at_its_thread_count_which_keys_it(fake_fit):
    torch.set_num_threads(1)
    train_policy("smoke", "psn", 0, reward=starts_with_digit_seven, threads=2)
    assert fake_fit == [2] and torch.get_num_threads() == 1  # the caller's count is restored
    key = reward_key(starts_with_digit_seven)
    assert run_dir(get_profile("smoke"), "psn", 0, {}, key, threads=2).exists()
    assert not run_dir(get_profile("smoke"), "psn", 0, {}, key).exists()
    train_policy("smoke", "psn", 0, reward=starts_with_digit_seven)
    assert fake_fit == [2, 1] and run_dir(get_profile("smoke"), "psn", 0, {}, key).exists()
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match=f"threads must be an integer >= 1, got {bad}"):
            train_policy("smoke", "psn", 0, threads=bad)
    shutil.rmtree(run_dir(get_profile("smoke"), "psn", 0, {}, key))
