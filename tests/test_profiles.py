import pytest

from psnlib.replication.profiles import PROFILES, get_profile


def test_profiles_exist_and_scale_up():
    assert set(PROFILES) == {"smoke", "cpu", "gpu", "paper"}
    smoke, cpu = get_profile("smoke"), get_profile("cpu")
    assert smoke.base.sft_steps < cpu.base.sft_steps
    assert smoke.eval_samples < cpu.eval_samples == 256  # issue 31: power per CPU-hour
    assert max(cpu.ks) == 256 <= cpu.eval_samples  # pass@256 estimated from 256 samples


def test_unknown_profile_names_allowed_values():
    with pytest.raises(ValueError, match=r"unknown profile 'laptop'.*'cpu'"):
        get_profile("laptop")


def test_overrides_reject_unknown_fields():
    p = get_profile("cpu").with_overrides(rl_steps=7)
    assert p.rl_steps == 7 and get_profile("cpu").rl_steps != 7
    with pytest.raises(ValueError, match="unknown profile field"):
        get_profile("cpu").with_overrides(rl_stepz=7)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_experiment_settings_are_consistent(name):
    p = get_profile(name)
    assert p.psn_sigma in p.sigma_sweep  # the sweep shares the PSN run
    assert 1 <= p.passk_k <= p.num_generations
    assert p.seeds and p.ablation_seeds and set(p.ablation_benchmarks) <= set(p.benchmarks)
    assert all(spec != p.base for spec in p.other_policies)
    assert p.example_responses >= 1
