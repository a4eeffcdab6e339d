import math

import pytest
import torch

from psnlib.advantages import grpo_advantages, passk_advantages

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats


def test_grpo_matches_trls_formula_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.25, 1.0, 0.25]])
    std0 = math.sqrt(4 * 0.25 / 3)  # unbiased: sum of squared deviations / (G - 1)
    mean1 = 2.0 / 4
    std1 = math.sqrt(sum((x - mean1) ** 2 for x in (0.5, 0.25, 1.0, 0.25)) / 3)
    expected = torch.tensor(
        [
            [0.5 / (std0 + 1e-4), -0.5 / (std0 + 1e-4), -0.5 / (std0 + 1e-4), 0.5 / (std0 + 1e-4)],
            [(x - mean1) / (std1 + 1e-4) for x in (0.5, 0.25, 1.0, 0.25)],
        ]
    )
    torch.testing.assert_close(grpo_advantages(rewards), expected)


def test_grpo_is_zero_for_constant_groups_and_single_rollouts():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.1, 0.1, 0.1]])
    assert torch.equal(grpo_advantages(rewards), torch.zeros(3, 3))
    assert torch.equal(grpo_advantages(torch.tensor([[1.0], [0.0]])), torch.zeros(2, 1))


@pytest.mark.parametrize("k", [1, 2, 4])
def test_passk_is_zero_when_all_right_or_all_wrong(k):
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    assert torch.equal(passk_advantages(rewards, k), torch.zeros(2, 4))


def test_passk_mixed_groups_by_hand():
    # N = 4, k = 2.
    rewards = torch.tensor(
        [
            [1.0, 1.0, 0.0, 0.0],  # N_neg = 2: R = 1 - 1/6 = 5/6
            [1.0, 0.0, 0.0, 0.0],  # N_neg = 3: R = 1 - 3/6 = 1/2
            [1.0, 1.0, 1.0, 0.0],  # N_neg = 1: every pair holds a right one, R = 1, s = 0
        ]
    )
    s0 = math.sqrt(5 / 6 * 1 / 6)
    a_pos0, a_neg0 = (1 / 6) / s0, (1 / 6 - 1 / 3) / s0  # C(1,1)/C(3,1) = 1/3
    a_pos1, a_neg1 = 0.5 / 0.5, (0.5 - 2 / 3) / 0.5  # C(2,1)/C(3,1) = 2/3
    expected = torch.tensor(
        [
            [a_pos0, a_pos0, a_neg0, a_neg0],
            [a_pos1, a_neg1, a_neg1, a_neg1],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    torch.testing.assert_close(passk_advantages(rewards, 2), expected)


def test_passk_with_k_equal_to_group_size():
    rewards = torch.tensor([[0.0, 1.0, 0.0]])  # N = k = 3, N_neg = 2: R = 1, s = 0
    assert torch.equal(passk_advantages(rewards, 3), torch.zeros(1, 3))


def test_passk_k1_is_grpo_with_population_std():
    torch.manual_seed(0)
    rewards = (torch.rand(64, 8) < 0.4).float()
    passk = passk_advantages(rewards, 1)
    grpo = grpo_advantages(rewards)
    assert torch.equal(torch.sign(passk), torch.sign(grpo))
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, unbiased=False, keepdim=True)
    expected = torch.where(std > 0, (rewards - mean) / std.clamp(min=1e-12), 0.0)
    torch.testing.assert_close(passk, expected)


def test_passk_rejects_k_outside_the_group():
    rewards = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="group size 4, got 5"):
        passk_advantages(rewards, 5)
    with pytest.raises(ValueError, match="got 0"):
        passk_advantages(rewards, 0)


def test_passk_stays_finite_for_large_groups():
    rewards = torch.zeros(1, 256)
    rewards[0, :3] = 1.0
    advantages = passk_advantages(rewards, 128)
    assert torch.isfinite(advantages).all()
    assert advantages.dtype == torch.float32
