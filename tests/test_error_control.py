"""Verdicts that survive error control (issue 48): p-values that agree with the interval, Holm's
correction within a family on hand-made p-values, no verdict against a collapsed reference, a
post-hoc claim exploratory at the seeds that framed it, and the rliable aggregates on hand-made
score matrices."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from psnlib.replication.analysis import aggregates
from psnlib.replication.analysis.claim import (
    NOT_COMPARABLE,
    NULL_FAILED,
    PSN_CONFIRMATORY,
    PSN_SECONDARY,
    Claim,
)
from psnlib.replication.analysis.claim_stats import PASS_AT_1
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.analysis.verdicts import (
    EQUIVALENT,
    NONINFERIOR,
    SUPERIOR,
    holm,
    holm_interval,
    p_value,
    paired_t_interval,
)
from psnlib.replication.plan.experiments import GRPO, PSN, main_results
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.report.results import check_claim, judge

SMOKE = get_profile("smoke")
BY_NAME = {c.name: c for c in CLAIMS}


def test_holm_on_hand_made_p_values():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1, but monotone: 0.06)
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, np.nan, 0.02])
    assert np.isnan(holm(p)[3])  # an untested row takes no part
    np.testing.assert_allclose(holm(np.array([0.2])), [0.2])  # one test: unchanged
    np.testing.assert_allclose(holm(np.array([0.5, 0.6])), [1.0, 1.0])  # capped at 1
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm(np.array([1.5]))


@pytest.mark.parametrize("d", [np.array([1.0, 2.0, 0.5, 1.5]), np.array([-3.0, 1.0, 0.2, 0.4])])
def test_the_p_value_is_the_paired_t_tests_and_agrees_with_the_interval(d):
    lo, hi = paired_t_interval(d)
    p = p_value(float(d.mean()), lo, hi, len(d), SUPERIOR)
    assert p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    assert (p < 0.05) == (lo > 0 or hi < 0)


def test_equivalence_and_non_inferiority_p_values_match_their_intervals():
    d = np.array([0.1, -0.2, 0.05, 0.15, -0.05, 0.0])  # mean 0.0083, well inside +/- 1
    lo, hi = paired_t_interval(d)
    p = p_value(float(d.mean()), lo, hi, len(d), EQUIVALENT, margin=1.0)
    assert p < 0.05 and lo >= -1.0 and hi <= 1.0  # inside the margin: reproduced, p says so
    # the interval just reaching the margin: p exactly 0.05 (two one-sided tests at 2.5%)
    edge = p_value(float(d.mean()), lo, hi, len(d), EQUIVALENT, margin=max(-lo, hi))
    assert edge == pytest.approx(0.05, abs=1e-9)
    p_ni = p_value(float(d.mean()), lo, hi, len(d), NONINFERIOR, margin=-lo)
    assert p_ni == pytest.approx(0.05, abs=1e-9)  # the lower end on -m
    with pytest.raises(ValueError, match="margin"):
        p_value(0.0, -1.0, 1.0, 5, EQUIVALENT)


def test_the_holm_interval_decides_as_holm_does():
    d = np.array([1.0, 2.0, 0.5, 1.5, 0.8, 1.2])
    lo, hi = paired_t_interval(d)
    p = p_value(float(d.mean()), lo, hi, len(d), SUPERIOR)
    for p_holm, clear in ((p * 3, True), (0.0499, True), (0.0501, False), (0.4, False)):
        if p_holm < p:
            continue
        wide = holm_interval(float(d.mean()), lo, hi, len(d), p, p_holm)
        assert (wide[0] > 0) == clear, (p_holm, wide)
        assert wide[0] <= lo and wide[1] >= hi  # only ever wider


def _row(claim: Claim, diff: float, lo: float, hi: float, seeds: int = 16) -> dict:
    return dict(
        claim=claim.name,
        family=claim.family,
        paper=claim.paper,
        ours="a",
        theirs="b",
        statistic="pass@256",
        unit="points",
        benchmarks="",
        note="",
        seeds=seeds,
        value_ours=80.0,
        value_theirs=80.0 - diff,
        diff=diff,
        lo=lo,
        hi=hi,
        verdict="",
        post_hoc=False,
        notebook="",
    )


def test_holm_turns_a_lone_marginal_word_in_a_family_of_many_into_no_word():
    confirmatory = [c for c in CLAIMS if c.family == PSN_CONFIRMATORY and c.direction == SUPERIOR]
    rows = [_row(c, 0.1, -1.0, 1.2) for c in confirmatory]  # nothing seen
    rows[0] = _row(confirmatory[0], 2.0, 0.1, 3.9)  # clear of 0, p ~ 0.04
    rows[1] = _row(confirmatory[1], 9.0, 8.0, 10.0)  # far clear, p ~ 1e-12
    table = judge(pd.DataFrame(rows))
    assert table["verdict"].iloc[0] == "reproduced" and table["verdict"].iloc[1] == "reproduced"
    assert table["verdict_holm"].iloc[1] == "reproduced"  # survives the correction
    assert table["verdict_holm"].iloc[0] != "reproduced"  # p * (m - 1) > 0.05
    assert table["p_holm"].iloc[0] == pytest.approx(
        min(1, (len(rows) - 1) * table["p"].iloc[0]), rel=1e-9
    )
    # the same row alone in another family keeps its word
    other = judge(pd.DataFrame([rows[0] | {"claim": BY_NAME["TIS is needed"].name}]))
    assert other["family"].iloc[0] == PSN_SECONDARY


def test_statuses_and_post_hoc_rows_take_no_part_in_the_correction():
    (a, b, c) = [c for c in CLAIMS if c.family == PSN_CONFIRMATORY][:3]
    rows = [
        _row(a, 2.0, 0.1, 3.9) | {"verdict": NOT_COMPARABLE},
        _row(b, 2.0, 0.1, 3.9) | {"post_hoc": True, "verdict": "exploratory"},
        _row(c, 2.0, 0.1, 3.9),
    ]
    table = judge(pd.DataFrame(rows))
    assert list(table["verdict"]) == [NOT_COMPARABLE, "exploratory", "reproduced"]
    assert table["p_holm"].isna().tolist() == [True, True, False]
    assert table["p_holm"].iloc[2] == pytest.approx(table["p"].iloc[2])  # alone in the family
    assert list(table["verdict_holm"]) == [NOT_COMPARABLE, "exploratory", "reproduced"]


A, B = PSN.label, GRPO.label
ID = ("countdown-l1", "countdown-l2")


def _problems(policy: str, seeds, correct) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(policy=policy, seed=s, benchmark=b, prompt=f"{b}-{i}", n=16, correct=correct(s, i))
            | dict(diversity=0.5, entropy=1.0)
            for s in seeds
            for b in ID
            for i in range(4)
        ]
    )


def test_a_collapsed_reference_gives_no_verdict():
    seeds = range(5)
    problems = pd.concat([_problems(A, seeds, lambda s, i: 8), _problems(B, seeds, lambda s, i: 0)])
    claim = Claim("c", "p", main_results, PSN, GRPO)
    row = check_claim(claim, problems, SMOKE)
    assert row["diff"] > 0 and row["lo"] > 0  # ours far ahead of a policy that solves nothing
    assert row["verdict"] == NOT_COMPARABLE
    assert "solves no problem at any seed" in row["note"]
    # one correct sample anywhere is no collapse
    alive = problems.copy()
    alive.loc[alive.index[-1], "correct"] = 1
    assert check_claim(claim, alive, SMOKE)["verdict"] != NOT_COMPARABLE


def test_a_statistic_that_fails_its_null_gives_no_verdict():
    seeds = range(5)
    problems = pd.concat(
        [_problems(A, seeds, lambda s, i: 8 + s % 2), _problems(B, seeds, lambda s, i: 2)]
    )
    claim = Claim("c", "p", main_results, PSN, GRPO, PASS_AT_1)
    assert check_claim(claim, problems, SMOKE)["verdict"] == "reproduced"
    row = check_claim(claim, problems, SMOKE, nulls={"pass@1": "its null gap is -2.3"})
    assert row["verdict"] == NULL_FAILED and "its null gap is -2.3" in row["note"]


def test_a_post_hoc_claim_is_exploratory_at_the_seeds_that_framed_it():
    seeds = tuple(SMOKE.seeds)
    problems = pd.concat(
        [_problems(A, seeds, lambda s, i: 12 + s % 3), _problems(B, seeds, lambda s, i: 2)]
    )
    plain = Claim("c", "p", main_results, PSN, GRPO, PASS_AT_1)
    assert check_claim(plain, problems, SMOKE)["verdict"] == "reproduced"  # clear of 0
    framed = dict(statistic=PASS_AT_1, framed="after X")
    framed = Claim("c", "p", main_results, PSN, GRPO, exclude_seeds=(("smoke", seeds),), **framed)
    row = check_claim(framed, problems, SMOKE)
    assert row["verdict"] == "exploratory" and row["post_hoc"]
    assert row["seeds"] == len(seeds) and "post hoc" in row["note"]
    assert "framed post hoc: after X" in row["paper"]
    # framed on one seed of several: tested on the others, with a verdict word
    one = dict(statistic=PASS_AT_1, framed="after X")
    one = Claim("c", "p", main_results, PSN, GRPO, exclude_seeds=(("smoke", seeds[:1]),), **one)
    row = check_claim(one, problems, SMOKE)
    assert not row["post_hoc"] and row["seeds"] == len(seeds) - 1
    with pytest.raises(ValueError, match="framed"):
        Claim("c", "p", main_results, PSN, GRPO, exclude_seeds=(("smoke", (0,)),))


def test_the_weaker_entropy_bonus_rows_are_post_hoc_at_round_twos_seeds():
    weak = [c for c in CLAIMS if "weaker entropy bonus" in c.name]
    assert len(weak) == 6
    cpu = get_profile("cpu")
    assert all(c.excluded(cpu) == tuple(range(16)) and c.framed for c in weak)
    assert all(
        c.post_hoc(
            cpu.with_overrides(
                seeds=tuple(range(16)),
                baseline_seeds=tuple(range(16)),
                entropy_coef_seeds=(),
                tuned_values=(),  # round two had no tuning
                tuned_seeds=(),
            )
        )
        for c in weak
    )  # round two alone: no other seed
    assert not any(c.post_hoc(cpu) for c in weak)  # round three's fresh seeds 16-31 judge them
    # every confirmatory claim compares with GRPO (the base policy for the premise), and no
    # post-hoc claim is confirmatory
    for c in CLAIMS:
        if c.family.endswith("confirmatory"):
            assert not c.framed and GRPO in (c.ours, c.theirs), c.name


def test_probability_of_improvement_and_iqm_on_hand_made_scores():
    x = np.array([[3.0, 1.0], [1.0, 1.0]])  # 2 runs x 2 tasks
    y = np.array([[2.0, 1.0], [2.0, 0.0]])
    # task 0: pairs (3>2, 3>2, 1<2, 1<2) -> 2/4; task 1: (1=1 -> .5, 1>0, 1=1 -> .5, 1>0) -> 3/4
    assert aggregates.probability_of_improvement(x, y) == pytest.approx((0.5 + 0.75) / 2)
    assert aggregates.probability_of_improvement(y, x) == pytest.approx(1 - (0.5 + 0.75) / 2)
    scores = np.arange(1.0, 9.0)  # 1..8: trims 2 from each end, mean of 3..6
    assert aggregates.iqm(scores) == pytest.approx(4.5)
    with pytest.raises(ValueError, match="same tasks"):
        aggregates.probability_of_improvement(x, y[:, :1])


def test_the_aggregate_table_is_reproducible_and_brackets_its_estimates():
    seeds = range(6)
    rng = np.random.default_rng(1)
    draws = {(s, i): int(rng.integers(0, 16)) for s in seeds for i in range(4)}
    problems = pd.concat(
        [
            _problems(A, seeds, lambda s, i: min(16, draws[(s, i)] + 2)),
            _problems(B, seeds, lambda s, i: draws[(s, i)]),
        ]
    )
    table = aggregates.aggregate_table(problems, SMOKE, [B, A], B)
    again = aggregates.aggregate_table(problems, SMOKE, [B, A], B)
    pd.testing.assert_frame_equal(table, again)  # a fixed generator
    r = table.loc[A]
    assert r["iqm_lo"] <= r["iqm"] <= r["iqm_hi"]
    assert r["p_improve_lo"] <= r["p_improve"] <= r["p_improve_hi"] and r["p_improve"] > 0.5
    assert math.isnan(table.loc[B, "p_improve"])


def test_a_claim_read_only_at_the_seeds_that_framed_it_is_post_hoc_there():
    """A notebook read at round two's seeds alone (papermill ``seeds: [0, 1]``): the weaker
    bonus's rows, framed on 0-15, are measured there and stay exploratory, not an error."""
    cpu = get_profile("cpu")
    claim = next(c for c in CLAIMS if c.name == "PSN fixed beats a weaker entropy bonus")
    ours, theirs = claim.sides(cpu)
    rows = [
        {"policy": policy, "seed": seed, "benchmark": benchmark, "prompt": prompt}
        | {"n": cpu.eval_samples, "correct": 3 + prompt + seed + (policy == ours.label)}
        for policy in (ours.label, theirs.label)
        for seed in (0, 1)
        for benchmark in cpu.benchmarks
        for prompt in range(2)
    ]
    row = check_claim(claim, pd.DataFrame(rows), cpu)
    assert row["post_hoc"] and row["verdict"] == "exploratory" and row["seeds"] == 2
    assert row["note"].startswith("post hoc: exploratory at the seeds that framed it")
