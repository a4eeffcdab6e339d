import math

import pytest
import torch

from psnlib.tis import kl_proxy, tis_diagnostics, tis_weights

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats


def example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    clean = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -0.1, 0.0]])  # (B=2, T=3)
    behaviour = torch.tensor([[-1.5, -2.0, -4.0], [-1.0, -0.3, 7.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])  # last token of row 1 is padding
    return clean, behaviour, mask


def test_token_weights_follow_the_formula():
    clean, behaviour, mask = example()
    weights = tis_weights(clean, behaviour, mask, cap=10.0)
    expected = torch.tensor(
        [
            [math.exp(0.5), 1.0, 10.0],  # exp(3.5) = 33.1 is capped at 10
            [math.exp(-2.0), math.exp(0.2), 1.0],  # padding gets weight 1
        ]
    )
    torch.testing.assert_close(weights, expected)


def test_sequence_weights_use_summed_log_probs():
    clean, behaviour, mask = example()
    weights = tis_weights(clean, behaviour, mask, cap=10.0, level="sequence")
    assert weights.shape == (2, 1)
    row0 = min(math.exp(0.5 + 0.0 + 3.5), 10.0)  # exp(4.0) = 54.6 -> capped
    row1 = math.exp(-2.0 + 0.2)  # the padded token is left out of the sum
    torch.testing.assert_close(weights, torch.tensor([[row0], [row1]]))


def test_weights_are_detached_and_capped():
    clean = torch.randn(4, 6, requires_grad=True)
    behaviour = torch.randn(4, 6, requires_grad=True)
    weights = tis_weights(clean, behaviour, torch.ones(4, 6), cap=2.0)
    assert not weights.requires_grad
    assert weights.max() <= 2.0


def test_huge_log_ratios_do_not_overflow():
    clean = torch.tensor([[0.0, 0.0, -1e30]])
    behaviour = torch.tensor([[-1e4, -float("inf"), 0.0]])
    mask = torch.ones(1, 3)
    token = tis_weights(clean, behaviour, mask, cap=10.0)
    assert torch.isfinite(token).all()
    assert token.tolist() == [[10.0, 10.0, 0.0]]
    zeros, mask = torch.zeros(1, 500), torch.ones(1, 500)
    sequence = tis_weights(zeros, zeros - 80.0, mask, level="sequence")
    assert sequence.item() == 10.0  # summed log-ratio 40000 would overflow exp()


def test_bad_cap_and_level_are_rejected():
    clean, behaviour, mask = example()
    for cap in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"cap must be a finite number > 0"):
            tis_weights(clean, behaviour, mask, cap=cap)
    with pytest.raises(ValueError, match=r"'batch'.*token, sequence"):
        tis_weights(clean, behaviour, mask, level="batch")


def test_kl_proxy_is_the_masked_mean_of_noisy_minus_clean():
    clean, behaviour, mask = example()
    expected = ((-0.5) + 0.0 + (-3.5) + 2.0 + (-0.2)) / 5
    assert kl_proxy(clean, behaviour, mask).item() == pytest.approx(expected)
    assert kl_proxy(clean, behaviour, torch.zeros(2, 3)).item() == 0.0


def test_diagnostics_on_a_hand_example():
    clean, behaviour, mask = example()
    weights = tis_weights(clean, behaviour, mask, cap=10.0)
    stats = tis_diagnostics(weights, mask, cap=10.0)
    w = [math.exp(0.5), 1.0, 10.0, math.exp(-2.0), math.exp(0.2)]  # the 5 real tokens
    assert stats["mean"] == pytest.approx(sum(w) / 5)
    assert stats["max"] == pytest.approx(10.0)
    assert stats["frac_capped"] == pytest.approx(1 / 5)
    assert stats["ess"] == pytest.approx(sum(w) ** 2 / (5 * sum(x * x for x in w)))


def test_diagnostics_at_sequence_level_and_for_equal_weights():
    clean, behaviour, mask = example()
    weights = tis_weights(clean, behaviour, mask, cap=10.0, level="sequence")
    stats = tis_diagnostics(weights, mask, cap=10.0)
    assert stats["frac_capped"] == pytest.approx(0.5)
    assert stats["max"] == pytest.approx(10.0)
    equal = tis_diagnostics(torch.ones(3, 4), torch.ones(3, 4), cap=10.0)
    assert equal == {"mean": 1.0, "max": 1.0, "frac_capped": 0.0, "ess": 1.0}


def test_masked_sequence_weights_keep_the_ratio_in_band_and_mask_the_rest():
    """Eq. MIS on hand-made ratios: r = exp(sum of the masked log-ratios), kept where
    1/C <= r <= C, 0 outside (masked out, not truncated)."""
    clean, behaviour, mask = example()  # row 0: log r = 4.0 (r = 54.6); row 1: log r = -1.8
    weights = tis_weights(clean, behaviour, mask, cap=10.0, level="sequence_mask")
    assert weights.shape == (2, 1)
    torch.testing.assert_close(weights, torch.tensor([[0.0], [math.exp(-1.8)]]))  # out, in
    # both ends of the band are inside it: r = C and r = 1/C keep their weight
    edge = torch.tensor([[math.log(10.0)], [-math.log(10.0)]])
    ends = tis_weights(edge, torch.zeros(2, 1), torch.ones(2, 1), level="sequence_mask")
    torch.testing.assert_close(ends, torch.tensor([[10.0], [0.1]]), rtol=1e-5, atol=0.0)
    # every rollout out of band: all masked, nothing overflows
    far = tis_weights(
        torch.zeros(3, 500), torch.full((3, 500), -80.0), torch.ones(3, 500), level="sequence_mask"
    )
    assert far.tolist() == [[0.0], [0.0], [0.0]]
    # a small cap narrows the band: row 1 (r = 0.165) falls out of [1/2, 2]
    narrow = tis_weights(clean, behaviour, mask, cap=2.0, level="sequence_mask")
    assert narrow.tolist() == [[0.0], [0.0]]
