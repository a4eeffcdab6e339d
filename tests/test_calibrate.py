"""Sigma from a per-token KL target, on a tiny random Qwen2 (seconds, one thread).

A random policy's KL is not one power of sigma over a wide range (here ~sigma^3.5 up to 0.05,
then flatter), so the calibration is tested where its local fit holds: sigmas around the answer.
"""

import pytest

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute.calibrate import calibrate_sigma, kl_at_sigma, weight_rms

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats

PROMPTS = ["7 3 5 4->22:", "1 2 3 4->10:", "12 5 9 2->40:", "6 6 2 8->3:", "9 9 1 4->7:"]
MEASURE = dict(n=8, draws=4, max_new_tokens=16, seed=0)


@pytest.fixture(scope="module")
def policy():
    tokenizer = build_tokenizer()
    return tiny_policy("qwen2", "smoke", tokenizer, seed=0).eval(), tokenizer


def test_no_noise_no_kl_and_more_noise_more_kl(policy, one_thread):
    model, tokenizer = policy
    clean = kl_at_sigma(model, tokenizer, PROMPTS, 0.0, **MEASURE)
    assert clean["tokens"] > 0
    assert abs(clean["kl"]) < 1e-6 and abs(clean["kl_proxy"]) < 1e-5  # decoder == teacher forcing
    small, large = (
        kl_at_sigma(model, tokenizer, PROMPTS, s, **MEASURE)["kl"] for s in (0.02, 0.06)
    )
    assert 0 < small < large


def test_the_calibrated_sigma_induces_the_target_kl(policy, one_thread):
    model, tokenizer = policy
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cal = calibrate_sigma(model, tokenizer, PROMPTS, 0.004, sigmas=(0.035, 0.045, 0.055), **MEASURE)
    assert all((before[k] == v).all() for k, v in model.state_dict().items())  # weights restored
    assert cal.sigma == pytest.approx(cal.sigma_for(0.004))
    assert cal.sigma_over_rms == pytest.approx(cal.sigma / weight_rms(model))
    assert list(cal.points["sigma"]) == [0.035, 0.045, 0.055]
    for target in (0.002, 0.004, 0.009):  # off-centre targets catch a wrong exponent
        measured = kl_at_sigma(model, tokenizer, PROMPTS, cal.sigma_for(target), **MEASURE)["kl"]
        assert measured == pytest.approx(target, rel=0.2), (target, cal.points)


def test_weight_rms_pools_the_perturbed_weights(policy):
    model, _ = policy
    mlp = [p for name, p in model.named_parameters() if ".mlp." in name]
    expected = (sum(p.pow(2).sum() for p in mlp) / sum(p.numel() for p in mlp)).sqrt().item()
    assert weight_rms(model) == pytest.approx(expected)


def test_bad_targets_and_sigmas_are_refused_before_sampling(policy):
    model, tokenizer = policy
    with pytest.raises(ValueError, match="target_kl must be"):
        calibrate_sigma(model, tokenizer, PROMPTS, 0.0)
    with pytest.raises(ValueError, match="sigmas must be"):
        calibrate_sigma(model, tokenizer, PROMPTS, 0.004, sigmas=(0.0, 0.01))
    with pytest.raises(ValueError, match="at least one prompt"):
        calibrate_sigma(model, tokenizer, [], 0.004)
