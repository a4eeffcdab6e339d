"""Regime gates on hand-made inputs: values, thresholds, the PASS / FAIL summary, regime.json."""

import json
import math

import pandas as pd
import pytest
from scipy import stats

from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.report.regime import (
    GATES,
    Threshold,
    at_equal_pass1,
    gate_table,
    gate_values,
    main_benchmark,
    regime_summary,
    write_regime,
)

LEVELS = [f"countdown-l{i}" for i in range(1, 6)]  # the smoke profile's in-distribution levels
PASSING = {
    "base_pass1": 0.2,
    "grpo_pass1_gain": 1.6,
    "narrowing_lo": 5.8,
    "psn_kl_per_token": 0.003,
    "tis_ess": 0.99,
    "weak_pass1_ratio": 0.5,
    "prefix_completable": 0.45,
}
# The first full cpu run (issue 16): every gate fails.
FAILING = {
    "base_pass1": 0.029,
    "grpo_pass1_gain": 1.05,
    "narrowing_lo": -3.0,
    "psn_kl_per_token": 0.0005,
    "tis_ess": 0.999,
    "weak_pass1_ratio": 0.07,
    "prefix_completable": 0.074,
}


def test_thresholds_include_closed_ends_exclude_strict_ends_and_never_pass_missing_values():
    band = Threshold(0.10, 0.40)
    assert band.holds(0.10) and band.holds(0.40) and band.holds(0.2)
    assert not band.holds(0.0999) and not band.holds(0.4001)
    above = Threshold(lo=0.0, strict=True)
    assert not above.holds(0.0) and above.holds(1e-9)
    below = Threshold(hi=0.995, strict=True)
    assert below.holds(0.9949) and not below.holds(0.995)
    for value in (None, float("nan"), float("inf")):
        assert not Threshold(lo=1.3).holds(value)
    assert [str(t) for t in (band, above, below, Threshold(lo=1.3))] == [
        "0.1-0.4",
        "> 0",
        "< 0.995",
        ">= 1.3",
    ]


def test_the_gates_are_the_issues_keys_and_thresholds():
    assert list(GATES) == list(PASSING)
    assert {k: str(g.threshold) for k, g in GATES.items()} == {
        "base_pass1": "0.1-0.4",
        "grpo_pass1_gain": ">= 1.3",
        "narrowing_lo": "> 0",
        "psn_kl_per_token": "0.002-0.008",
        "tis_ess": "< 0.995",
        "weak_pass1_ratio": "0.3-0.8",
        "prefix_completable": ">= 0.4",
    }


def test_passing_values_pass_and_the_summary_says_so():
    table = gate_table(PASSING)
    assert table["pass"].all()
    assert list(table.columns) == ["gate", "value", "threshold", "pass", "meaning", "limit"]
    assert regime_summary(table, "cpu").startswith("REGIME PASS")


def test_a_failing_profile_is_reported_plainly_gate_by_gate():
    table = gate_table(FAILING)
    assert not table["pass"].any()
    summary = regime_summary(table, "cpu")
    assert summary.startswith(
        "REGIME FAIL at profile cpu: 7 of 7 gates fail (1 of them a structural limit of the task)"
    )
    for key, gate in GATES.items():
        assert f"{key} = " in summary and f"(needs {gate.threshold}" in summary
    # the prefix gate is the task's structural limit, said with its measurement; no other gate is
    assert "prefix_completable = 0.074 (needs >= 0.4; a structural limit of Countdown" in summary
    assert "docs/regime.md" in GATES["prefix_completable"].limit
    assert [k for k, g in GATES.items() if g.limit] == ["prefix_completable"]
    assert "base_pass1 = 0.029 (needs 0.1-0.4);" in summary
    assert table.set_index("gate")["limit"].astype(bool).sum() == 1


def test_one_failing_or_missing_gate_fails_the_regime():
    one_off = PASSING | {"tis_ess": 0.999}
    summary = regime_summary(gate_table(one_off), "cpu")
    assert summary.startswith("REGIME FAIL") and "tis_ess = 0.999 (needs < 0.995)" in summary
    assert "structural" not in summary  # a failure of a setting, not of the task
    missing = {k: v for k, v in PASSING.items() if k != "narrowing_lo"}
    table = gate_table(missing | {"psn_kl_per_token": float("nan")})
    assert list(table.loc[~table["pass"], "gate"]) == ["narrowing_lo", "psn_kl_per_token"]
    assert "narrowing_lo = not measured" in regime_summary(table, "cpu")
    with pytest.raises(ValueError, match="unknown regime gate"):
        gate_table(PASSING | {"base_pass@1": 0.2})


def test_regime_json_has_exactly_the_gate_keys_each_beside_its_threshold(tmp_path):
    path = write_regime(
        gate_table(FAILING | {"base_pass1": 0.2, "tis_ess": None}), tmp_path / "r.json"
    )
    data = json.loads(path.read_text())
    assert sorted(data) == sorted(GATES)  # exactly the gate keys
    assert data["base_pass1"] == {"value": 0.2, "threshold": "0.1-0.4", "pass": True}
    assert data["tis_ess"] == {"value": None, "threshold": "< 0.995", "pass": False}
    assert data["narrowing_lo"]["pass"] is False
    with pytest.raises(ValueError, match="must hold the gates"):
        write_regime(gate_table(PASSING).iloc[:3], tmp_path / "x.json")


def _curves(rows):
    return pd.DataFrame(rows, columns=["policy", "seed", "benchmark", "k", "pass_at_k"])


def _levels(policy, values, seed=0, k=1):
    """Curves rows of one policy: ``values`` lists pass@k per level l1..l5."""
    return [(policy, seed, b, k, v) for b, v in zip(LEVELS, values, strict=True)]


def test_every_pass_at_k_gate_reads_the_in_distribution_levels():
    """One benchmark set for every gate: the levels the primary claims average (the claim
    'RL narrows pass@k at large k' that narrowing_lo reuses reads the same)."""
    from psnlib.replication.plan.experiments import benchmarks_of
    from psnlib.replication.report.regime import NARROWING, gate_benchmarks

    for name in ("smoke", "cpu", "gpu", "paper"):
        p = get_profile(name)
        assert gate_benchmarks(p) == benchmarks_of(p, NARROWING.kind) == benchmarks_of(p, "id")
    assert gate_benchmarks(get_profile("cpu")) == tuple(LEVELS)
    for key in ("base_pass1", "grpo_pass1_gain", "narrowing_lo", "weak_pass1_ratio"):
        assert "in-distribution mean" in GATES[key].meaning, key
        assert "main benchmark" not in GATES[key].meaning, key


def test_gate_values_from_hand_made_tables():
    """Base, weak and GRPO pass@1 differ by level, so that l3 alone (the main benchmark, which
    grpo_pass1_gain and the two testbed gates once read) gives other values than the average."""
    main = main_benchmark(get_profile("smoke"))
    assert main == "countdown-l3"
    testbed = _curves(
        _levels("base", [0.30, 0.25, 0.20, 0.15, 0.10])  # mean 0.20; l3 0.20
        + _levels("weak", [0.20, 0.10, 0.05, 0.10, 0.05])  # mean 0.10; l3 0.05
        + _levels("base", [0.9] * 5, k=16)
    )
    curves = _curves(
        _levels("base", [0.30, 0.25, 0.20, 0.15, 0.10])
        + _levels("GRPO", [0.40, 0.35, 0.30, 0.25, 0.20], seed=0)  # mean 0.30
        + _levels("GRPO", [0.50, 0.40, 0.20, 0.30, 0.30], seed=1)  # mean 0.34; l3 0.20
    )
    # base solves all 4 problems of every level; GRPO seeds solve 2, 3 and 2 of them: base - GRPO
    # pass@16 is 50, 25, 50 points per seed; its t-interval over 3 seeds has lower end 5.8.
    # countdown-div (out of distribution) would move it and is not read.
    solved = {0: 2, 1: 3, 2: 2}
    problems = pd.DataFrame(
        [
            {"policy": "base", "seed": 0, "benchmark": b, "prompt": f"p{i}", "n": 16, "correct": 1}
            for b in (*LEVELS, "countdown-div")
            for i in range(4)
        ]
        + [
            {"policy": "GRPO", "seed": s, "benchmark": b, "prompt": f"p{i}", "n": 16}
            | {"correct": 5 if i < solved[s] or b == "countdown-div" else 0}
            for s in solved
            for b in (*LEVELS, "countdown-div")
            for i in range(4)
        ]
    )
    logs = pd.DataFrame(
        {"psn/kl_proxy": [0.001, 0.003, 0.005, None], "tis/ess": [0.99, 0.98, 0.999, 0.97]}
    )
    quality = pd.DataFrame(
        {
            "truncation": ["entropy", "random", "entropy"],
            "source": ["weak", "weak", "same_family"],
            "alive": [0.45, 0.2, 0.3],
            "completable": [1.0, 1.0, 1.0],  # a new attempt completes any prefix: not the gate
        }
    )
    tables = {"curves": curves, "problems": problems}
    values = gate_values(get_profile("smoke"), testbed, tables, logs, quality)
    d = [50.0, 25.0, 50.0]
    lo = sum(d) / 3 - stats.t.ppf(0.975, 2) * pd.Series(d).std() / math.sqrt(3)
    assert values == pytest.approx(
        {
            "base_pass1": 0.2,
            "grpo_pass1_gain": ((0.30 + 0.34) / 2) / 0.2,  # l3 alone: 0.25 / 0.2
            "narrowing_lo": lo,
            "psn_kl_per_token": 0.003,
            "tis_ess": 0.985,
            "weak_pass1_ratio": 0.10 / 0.20,  # l3 alone: 0.25
            "prefix_completable": 0.45,
        }
    )
    assert 5.0 < values["narrowing_lo"] < 6.5
    with pytest.raises(ValueError, match="no pass@1 of 'weak'"):
        gate_values(get_profile("smoke"), testbed[testbed.policy != "weak"], tables, logs, quality)
    only_main = testbed[testbed.benchmark == main]  # the testbed of the main benchmark alone
    with pytest.raises(ValueError, match=r"no pass@1 of 'base' on \['countdown-l1'.*gates read"):
        gate_values(get_profile("smoke"), only_main, tables, logs, quality)
    no_logs = gate_values(get_profile("smoke"), testbed, tables, logs[[]], quality)
    assert math.isnan(no_logs["psn_kl_per_token"]) and math.isnan(no_logs["tis_ess"])
    never = testbed.assign(pass_at_k=0.0)  # a base policy that never solves: no ratio, no pass
    ratio = gate_values(get_profile("smoke"), never, tables, logs, quality)
    assert math.isnan(ratio["weak_pass1_ratio"]) and ratio["base_pass1"] == 0.0
    assert not gate_table(ratio).set_index("gate").loc["weak_pass1_ratio", "pass"]


def test_noise_is_compared_with_temperature_at_equal_pass1():
    rows = [
        ("temperature", 1.0, 1, 0.30),
        ("temperature", 1.0, 16, 0.60),
        ("temperature", 1.3, 1, 0.20),
        ("temperature", 1.3, 16, 0.70),
        ("noise", 0.01, 1, 0.25),
        ("noise", 0.01, 16, 0.75),
        ("noise", 0.02, 1, 0.10),  # below every temperature's pass@1: no comparison
        ("noise", 0.02, 16, 0.80),
    ]
    premise = pd.DataFrame(rows, columns=["knob", "value", "k", "pass_at_k"])
    table = at_equal_pass1(premise)
    assert list(table["sigma"]) == [0.01, 0.02]
    assert table["temperature pass@16"].iloc[0] == pytest.approx(0.65)
    assert table["gain"].iloc[0] == pytest.approx(0.10)
    assert math.isnan(table["gain"].iloc[1])


def test_premise_check_pools_noise_draws_into_one_curve_per_setting(one_thread):
    from psnlib.models import build_tokenizer, tiny_policy
    from psnlib.replication.report.regime import premise_check

    tokenizer = build_tokenizer()
    model = tiny_policy("qwen2", "smoke", tokenizer, seed=0).eval()
    with pytest.raises(ValueError, match="draws must divide eval_samples"):
        premise_check(model, tokenizer, get_profile("smoke"), (0.01,), (1.0,), draws=3)
    curves = premise_check(
        model, tokenizer, get_profile("smoke"), (0.01, 0.02), (1.0, 1.5), draws=4
    )
    assert list(curves.columns) == ["knob", "value", "benchmark", "k", "pass_at_k", "lo", "hi"]
    assert list(zip(curves["knob"], curves["value"], curves["k"], strict=True)) == [
        (knob, value, k)
        for knob, values in (("noise", (0.01, 0.02)), ("temperature", (1.0, 1.5)))
        for value in values
        for k in (1, 16)
    ]
    assert set(curves["benchmark"]) == {"countdown-l3"}
    assert ((curves["lo"] <= curves["pass_at_k"]) & (curves["pass_at_k"] <= curves["hi"])).all()


def test_the_regime_notebook_runs_after_the_testbed_and_before_the_claims():
    from pathlib import Path

    from psnlib.replication.report.notebook_runs import notebook_paths

    stems = [p.stem for p in notebook_paths(Path(__file__).resolve().parent.parent / "notebooks")]
    assert (
        stems.index("01_testbed")
        < stems.index("01b_regime")
        < stems.index("02_rl_narrows_coverage")
    )
