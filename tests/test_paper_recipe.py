"""The real profiles follow the released PSN-GRPO recipe (verl) where TRL can express it."""

import pytest

from psnlib.replication.plan.arms import PSN_KL
from psnlib.replication.plan.profiles import PROFILES, get_profile
from psnlib.replication.plan.runs import rl_config, rl_settings


@pytest.mark.parametrize("name", ["gpu", "paper"])
def test_variant_i_uses_the_papers_kl_target_and_sigma0(tmp_path, name):
    config = rl_config(get_profile(name), "psn_kl", 0, tmp_path)
    assert config.sigma_scheduler == "kl_target"
    assert 0.003 <= config.kl_target <= 0.005  # the paper's range, not the testbed's 0.001
    assert config.sigma == 0.001  # the released sigma0
    assert rl_config(get_profile(name), "psn", 0, tmp_path).sigma == get_profile(name).psn_sigma


@pytest.mark.parametrize("name", ["gpu", "paper"])
def test_one_rollout_batch_feeds_mini_batch_updates_of_12_prompts(tmp_path, name):
    p = get_profile(name)
    config = rl_config(get_profile(name), "psn", 0, tmp_path)
    G = p.num_generations
    assert config.generation_batch_size == p.rl_prompts_per_step * G  # one rollout batch
    per_update = config.per_device_train_batch_size * config.gradient_accumulation_steps
    assert per_update == 12 * G  # verl ppo_mini_batch_size 12
    updates = config.steps_per_generation / config.gradient_accumulation_steps
    assert updates == pytest.approx(p.rl_prompts_per_step / 12)  # paper: 256 / 12 = 21.3
    assert config.lr_scheduler_type == "constant" and config.beta == 0.001
    if name == "paper":  # 20 epochs: about 660 rollout batches
        assert config.max_steps / updates == pytest.approx(660, abs=1)


def test_the_testbed_profiles_keep_their_settings_and_run_keys():
    """The released recipe's settings stay off the testbed: smoke has none but its Variant I
    target, which every profile states (its run keys, hashes of the settings, stay), and cpu
    only the regime settings its profile states (issue 16)."""
    smoke = PROFILES["smoke"]
    assert smoke.rl_settings == () and smoke.arm_settings == ((PSN_KL, (("kl_target", 0.001),)),)
    settings = rl_settings(smoke, "psn_kl", 0)
    assert settings["kl_target"] == 0.001 and "steps_per_generation" not in settings
    cpu = PROFILES["cpu"]
    assert dict(cpu.rl_settings) == {"lr_scheduler_type": "constant"}
    settings = rl_settings(cpu, "psn_kl", 0)
    assert settings["kl_target"] == 0.004 and settings["lr_scheduler_type"] == "constant"
    assert "steps_per_generation" not in settings and "beta" not in settings
