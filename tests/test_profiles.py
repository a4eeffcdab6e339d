import pytest

from psnlib.replication.plan.profiles import PROFILES, get_profile


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


def test_path_steps_are_shares_of_the_run_and_bad_shares_are_named():
    cpu = get_profile("cpu")
    assert cpu.path_steps == (32, 48, 64)  # 0.4, 0.6, 0.8 of 80 steps
    assert cpu.with_overrides(rl_steps=5).path_steps == (2, 3, 4)
    assert cpu.with_overrides(rl_steps=2).path_steps == (1,)  # all round to the one inner step
    assert cpu.with_overrides(rl_steps=1).path_steps == ()  # no step inside a one-step run
    for bad in ((0.0,), (1.0,), (-0.2,), ("0.5",), (True,)):
        with pytest.raises(ValueError, match=r"path_fractions must be numbers strictly between"):
            cpu.with_overrides(path_fractions=bad)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"tuned_values": (("sigma", 0.05),)}, r"tuned_values must pair.*\('sigma', 0\.05\)"),
        ({"tuned_values": (("lr", 0.011),)}, r"tuned_values must pair a knob of \('sigma'"),
        ({"tuned_seeds": (16,)}, r"tuned_seeds must be some of baseline_seeds.*given with"),
        ({"tuned_values": (("sigma", 0.022),)}, r"tuned_seeds must be .*got \(\) for"),
        (
            {"tuned_values": (("sigma", 0.022),), "tuned_seeds": (200,)},
            r"tuned_seeds must be some of baseline_seeds",
        ),
    ],
)
def test_tuned_values_are_a_grids_value_at_some_baseline_seeds(change, named):
    """A tuned value outside its knob's grid, or tuned seeds without values, without a tuned
    value, or off the baseline seeds, is refused by name."""
    cpu = get_profile("cpu").with_overrides(tuned_values=(), tuned_seeds=())
    with pytest.raises(ValueError, match=named):
        cpu.with_overrides(**change)
