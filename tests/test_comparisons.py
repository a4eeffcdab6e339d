"""What the issue-31 and issue-41 comparisons compare: the released code's PSN arms and the
exploration baselines change only what they name with respect to GRPO; at the cpu profile no arm
is set beside fewer than four seeds of another; the trainer logs each step's CPU time, and TRL's
entropy bonus reaches the loss."""

import math

import pytest
from conftest import tiny_trainer

from psnlib.noise import EVERY_PARAMETER
from psnlib.replication.plan.experiments import (
    PLANS,
    PSN_RELEASED,
    PSN_RELEASED_FIXED,
    PSN_STEP,
    entropy_bonus,
    exploration_baselines,
    released_replicas,
    rollout_temperature,
    tuned,
)
from psnlib.replication.plan.profiles import RELEASED_SIGMA, get_profile
from psnlib.replication.plan.variants import BASE, Variant

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
CPU = get_profile("cpu")


@pytest.mark.parametrize("name", sorted(PLANS))
def test_no_cpu_plan_sets_an_arm_beside_fewer_than_four_seeds(name):
    plan = PLANS[name](CPU)
    seeds = {v.label: v.seeds(plan.seeds) for v in plan.variants if v.arm != BASE}
    assert min(map(len, seeds.values())) >= 4, seeds
    # every arm at the plan's seeds, but one a profile runs at some of them alone (only_seeds:
    # cpu's collapsed 0.1 bonus, not re-run at round three's seeds)
    alike = {label: s for label, s in seeds.items() if s == plan.seeds}
    apart = [v for v in plan.variants if v.label in seeds and v.label not in alike]
    assert alike and all(v.only_seeds is not None for v in apart), f"{name}: arms at {seeds}"


def test_the_released_code_arm_changes_the_noise_and_its_scheduler_only():
    changed = PSN_RELEASED.effective_settings(CPU)
    assert changed == {
        "sigma": RELEASED_SIGMA,
        "use_tis": True,
        "noise_scope": "step",
        "noise_targets": [EVERY_PARAMETER],
        "sigma_scheduler": "kl_target",
        "kl_target": 0.003,
    }
    assert CPU.tis_cap == 10.0  # the released code's C, and the default tis_level is "token"


def test_the_released_fixed_arm_is_the_released_arm_without_its_scheduler():
    """Issue 41: the released launcher's default (sigma fixed) differs from the released
    adaptive arm by the scheduler alone at cpu (the same starting sigma), and its replica
    ablation by the replicas alone."""
    fixed = PSN_RELEASED_FIXED.effective_settings(CPU)
    adaptive = PSN_RELEASED.effective_settings(CPU)
    assert fixed == {k: v for k, v in adaptive.items() if k not in ("sigma_scheduler", "kl_target")}
    assert fixed["sigma"] == RELEASED_SIGMA
    assert released_replicas(CPU).effective_settings(CPU) == fixed | {"noise_replicas": 8}


def test_per_step_mlp_noise_is_the_scope_alone():
    psn = {k: v for k, v in PSN_STEP.effective_settings(CPU).items() if k != "noise_scope"}
    assert PSN_STEP.effective_settings(CPU)["noise_scope"] == "step"
    assert psn == {"sigma": CPU.psn_sigma, "use_tis": True}


def test_each_exploration_baseline_changes_one_setting_of_grpo():
    assert rollout_temperature(CPU).effective_settings(CPU) == {
        "temperature": CPU.baseline_temperature
    }
    for coef in CPU.entropy_coefs:
        assert entropy_bonus(coef).effective_settings(CPU) == {"entropy_coef": coef}
    labels = [v.label for v in exploration_baselines(CPU).variants]
    assert len(labels) == len(set(labels)) == 5 + len(CPU.entropy_coefs) + len(CPU.tuned_values)
    for knob, value in CPU.tuned_values:  # each tuned explorer changes its knob alone
        arm = tuned(CPU)[knob].arm  # PSN fixed for sigma, GRPO for the others
        today = Variant("today", arm).effective_settings(CPU)
        assert tuned(CPU)[knob].effective_settings(CPU) == today | {knob: value}
    # issue 41: the bonus that moved entropy, and the grid's next weaker once it diverged
    assert CPU.entropy_coefs == (0.03, 0.1)


@pytest.mark.parametrize(
    "change",
    [
        {"ood_seeds": (99,)},
        {"ood_seeds": ()},
        {"baseline_temperature": 0.0},
        {"entropy_coefs": (-1.0,)},
    ],
)
def test_bad_comparison_settings_of_a_profile_are_refused(change):
    with pytest.raises(ValueError, match=next(iter(change))):
        CPU.with_overrides(**change)


def test_the_trainer_logs_each_steps_cpu_time(tmp_path):
    trainer = tiny_trainer(tmp_path, max_steps=2)
    trainer.train()
    times = [row["step_cpu_time"] for row in trainer.state.log_history if "reward" in row]
    assert len(times) == 2 and all(math.isfinite(t) and t > 0 for t in times)


def test_the_entropy_bonus_reaches_the_loss(tmp_path):
    losses = []
    for coef in (0.0, 1.0):
        trainer = tiny_trainer(tmp_path / str(coef), sigma=0.0, use_tis=False, entropy_coef=coef)
        trainer.train()
        losses.append(trainer.state.log_history[-1]["train_loss"])
    assert losses[1] < losses[0] - 0.1  # the loss minus coef x mean token entropy (~2 nats)
