"""Boundaries of the training-side code that no other test reaches (issue 39): a dense reward of
exactly 0.5 under Pass@k training, relative noise on a weight whose mean is far from 0, and
per-row noise whose every row is clean."""

import math

import pytest
import torch
from test_noise import assert_bit_exact, snapshot, tiny_model

from psnlib.advantages import passk_advantages
from psnlib.noise import CLEAN, NoiseConfig, draw_noise, noise_seed, perturbed_rows
from psnlib.tasks.reward import countdown_dense_reward

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats


def test_a_dense_reward_of_one_half_is_a_wrong_chain_under_passk() -> None:
    """The dense reward gives a wrong chain that writes all the problem's numbers exactly 0.5:
    Pass@k training counts it wrong (correct means > 0.5). The smoke profile's group, N = 4 and
    k = 2, with one right chain: N_neg = 3, R = 1 - C(3,2)/C(4,2) = 1/2, s = 1/2, A_pos = 1,
    A_neg = (1/2 - C(2,1)/C(3,1)) / (1/2) = -1/3 (two float64 roundings)."""
    chains = [
        "7*3=21,21+5=26,26-4=22",  # right
        "7+3=10,10+5=15,15+4=19",  # wrong, every number written
        "7+3=10,10*5=50,50-4=46",
        "7*3=21,21-5=16,16+4=20",
    ]
    rewards = countdown_dense_reward(chains, [[7, 3, 5, 4]] * 4, [22] * 4)
    assert rewards == [1.0, 0.5, 0.5, 0.5]
    advantages = passk_advantages(torch.tensor([rewards], dtype=torch.float64), 2)
    expected = torch.tensor([[1.0, -1 / 3, -1 / 3, -1 / 3]], dtype=torch.float64)
    torch.testing.assert_close(advantages, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize(
    ("values", "rms"),
    [
        ((1.0,), 1.0),  # a norm weight at its initial 1: std 0
        ((1.0, 7.0), 5.0),  # mean 4, std ~3: RMS sqrt((1 + 49) / 2) = 5
    ],
)
def test_relative_sigma_is_times_the_rms_not_the_std(values: tuple[float, ...], rms: float) -> None:
    """Relative noise is ``sigma * RMS(W) * eps``: with a mean far from 0 the RMS is far from
    the std (a norm weight of ones would get no noise at all from the std). The RMS of these
    values is exact in fp32 and sigma a power of 2, so the noise is ``eps`` times an exact
    scale, rounded once to fp32."""
    weight = torch.nn.Parameter(torch.tensor(values).repeat(256 // len(values)))  # (256,)
    sigma = 0.25
    noise = draw_noise(weight, "norm.weight", NoiseConfig(sigma=sigma, relative=True), 3, 1, sigma)
    generator = torch.Generator().manual_seed(noise_seed(0, 3, 1, "norm.weight"))
    eps = torch.randn(weight.shape, generator=generator, dtype=torch.float32)
    assert math.sqrt(weight.detach().double().pow(2).mean().item()) == rms
    torch.testing.assert_close(noise.double(), sigma * rms * eps.double(), rtol=2**-24, atol=0)


def test_every_row_clean_runs_the_clean_model() -> None:
    """``perturbed_rows`` with every row ``CLEAN`` (and sigma > 0) leaves the weights untouched
    inside the body and gives the clean model's outputs bit for bit."""
    model = tiny_model()
    clean = snapshot(model)
    input_ids = torch.randint(0, 32, (4, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        reference = model(input_ids).logits
    config = NoiseConfig(sigma=0.05, targets="all")
    every_clean = torch.full((4,), CLEAN)
    with torch.no_grad(), perturbed_rows(model, config, 3, every_clean):
        assert_bit_exact(model, clean)
        logits = model(input_ids).logits
    assert torch.equal(logits, reference)
    assert_bit_exact(model, clean)
