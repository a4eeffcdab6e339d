"""Null checks (psnlib.replication.analysis.nulls): each verdict rule's false-positive rate on
simulated nulls, the null table of a hand-made set of GRPO's per-seed values (every asserted number
derived by hand in the test), and the table read from records only."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from test_frontier import BACK, path_of

from psnlib.paths import ROOT
from psnlib.replication.analysis import null_records, nulls
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.analysis.null_records import PER_SEED, GRPOValues, solved_only_matrix
from psnlib.replication.analysis.verdicts import EQUIVALENT, NONINFERIOR, SUPERIOR
from psnlib.replication.compute import jobs
from psnlib.replication.plan.premise import premise
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import codeversion, ledger
from psnlib.replication.records.missing import MissingRecords

SMOKE = get_profile("smoke")  # ks 1 .. 16


def mc_bound(nominal: float, draws: int) -> float:
    """The nominal rate plus three binomial Monte-Carlo standard errors at it."""
    return nominal + 3 * math.sqrt(nominal * (1 - nominal) / draws)


@pytest.mark.parametrize("seeds", [8, 16])
def test_the_paired_t_rule_says_a_direction_word_at_its_nominal_5_percent(seeds):
    draws = 4000
    row = nulls.simulated_null(SUPERIOR, seeds, 1.0, draws=draws).iloc[0]
    assert row["at"] == 0 and row["draws"] == draws
    # normal differences: the t-interval is exact, so the rate is 5% up to Monte-Carlo error
    assert abs(row["fpr"] - 0.05) <= mc_bound(0.05, draws) - 0.05
    assert row["fpr"] <= nulls.MAX_FPR
    assert row["fpr_se"] == pytest.approx(math.sqrt(row["fpr"] * (1 - row["fpr"]) / draws))


def test_the_margin_rules_say_reproduced_at_the_margin_at_most_at_2_5_percent():
    draws = 4000
    # about equal within 0.5, spread 0.2 over 16 seeds (se 0.05): at +0.5 the interval's lower
    # end is far inside, so "reproduced" needs mean + t se <= 0.5: probability 2.5% exactly
    equal = nulls.simulated_null(EQUIVALENT, 16, 0.2, margin=0.5, draws=draws)
    assert equal["at"].tolist() == [0.5, -0.5]
    for fpr in equal["fpr"]:
        assert abs(fpr - 0.025) <= mc_bound(0.025, draws) - 0.025 and fpr <= nulls.MAX_FPR
    # at most 0.5 below, at a true loss of 0.5: "reproduced" needs mean - t se > -0.5: 2.5%
    worse = nulls.simulated_null(NONINFERIOR, 16, 1.0, margin=0.5, draws=draws)
    assert worse["at"].tolist() == [-0.5]
    assert abs(worse["fpr"].iloc[0] - 0.025) <= mc_bound(0.025, draws) - 0.025
    with pytest.raises(ValueError, match="margin > 0, got None"):
        nulls.simulated_null(EQUIVALENT, 16, 1.0)


def test_the_equal_pass_1_jackknife_rule_fires_at_most_at_its_nominal_rate():
    draws = 2000
    row = nulls.simulated_null(SUPERIOR, 16, 1.0, across=True, draws=draws).iloc[0]
    assert row["fpr"] <= mc_bound(0.05, draws) and row["fpr"] <= nulls.MAX_FPR
    with pytest.raises(ValueError, match="superiority rule"):
        nulls.simulated_null(EQUIVALENT, 16, 1.0, margin=0.5, across=True)


# Six seeds of GRPO, by hand. Paths: test_frontier's four that double back (seeds 0-3) and two
# more; round two's rule reads each final's pass@1 on the path's first segment 0-32:
# seed 4 at 10.5: 98 + 2.5 * (91 - 98) / 3 = 553/6, gap 84 - 553/6 = -49/6;
# seed 5 at 9: 98 + 1 * (92 - 98) / 2 = 95, gap -10. Seeds 0-3 (test_frontier): -32/3, -12, -8, -8
PATHS = pd.concat(
    [
        BACK,
        path_of(4, (0, 8, 98), (32, 11, 91), (48, 10.5, 88), (64, 10, 85), (80, 10.5, 84)),
        path_of(5, (0, 8, 98), (32, 10, 92), (48, 9, 88), (64, 9.5, 86), (80, 9, 85)),
    ],
    ignore_index=True,
)
OLD_GAPS = np.array([-32 / 3, -12, -8, -8, -49 / 6, -10])
# correct counts of 3 problems of one benchmark per seed
CORRECT = [[0, 3, 5], [2, 0, 5], [0, 0, 1], [1, 1, 1], [0, 2, 0], [4, 0, 0]]
# the premise: at the MLP site the noise's pass@1 is 1 point above its matched temperature's at
# every seed; at every parameter, by 0.1, -0.1, 0.2, -0.2, 0, 0
MATCH_GAP = {"mlp": np.ones(6), "every_parameter": np.array([0.1, -0.1, 0.2, -0.2, 0, 0])}


def hand_made() -> GRPOValues:
    seeds = range(6)
    per_seed = pd.DataFrame(
        {stat.name: [10 + i + 0.37 * s**2 for s in seeds] for i, stat in enumerate(PER_SEED)}
        | {"throughput": [30, 31, 29, 32, 30.5, 29.5]},
        index=pd.Index(seeds, name="seed"),
    )
    problems = pd.DataFrame(
        [
            {"seed": s, "benchmark": "b", "prompt": f"p{p}", "correct": c}
            for s in seeds
            for p, c in enumerate(CORRECT[s])
        ]
    )
    temperature = np.array([9.0, 9.4, 8.8, 9.1, 9.6, 8.7])
    premise = pd.DataFrame(
        [
            {"seed": s, "site": site, "noise_pass1": temperature[s] + gap[s]}
            | {"temperature_pass1": temperature[s], "noise_passmax": 90.0 + s % 3}
            | {"temperature_passmax": 89.0 + (s * 7) % 5}
            for site, gap in MATCH_GAP.items()
            for s in seeds
        ]
    )
    return GRPOValues(per_seed, solved_only_matrix(problems), PATHS, premise)


def test_solved_only_counts_each_way_between_seeds():
    problems = pd.DataFrame(
        [
            {"seed": s, "benchmark": "b", "prompt": p, "correct": c[p]}
            for s, c in enumerate(CORRECT)
            for p in range(3)
        ]
    )
    m = solved_only_matrix(problems)
    # seed 0 (0, 3, 5) against seed 1 (2, 0, 5): 0 solves p1 that 1 never does, 1 solves p0
    assert (m[0, 1], m[1, 0]) == (1, 1)
    # seed 3 (1, 1, 1) against seed 2 (0, 0, 1): p0 and p1; seed 2 against 3: none
    assert (m[3, 2], m[2, 3]) == (2, 0)
    assert np.diag(m).tolist() == [0] * 6
    with pytest.raises(ValueError, match="do not share their problems"):
        solved_only_matrix(problems[~((problems["seed"] == 1) & (problems["prompt"] == 2))])


def test_the_null_table_of_hand_made_values():
    table = nulls.table_from(hand_made(), SMOKE)
    keys = {nulls.statistic_of(c) for c in CLAIMS} | {nulls.OLD_PATH}
    assert set(table["statistic"]) == keys  # every claim's statistic, and round two's rule
    assert {"statistic", "label", "null", "draws", "mean", "lo", "hi", "fpr", "fpr_se"} <= set(
        table
    ) and {"passes", "reason"} <= set(table)
    by = table.set_index(["statistic", "null", "at"])
    assert by.loc[("pass@max", nulls.SELF, "0"), "label"] == "pass@16"
    # a plain difference of GRPO with itself is 0 at every seed; every shift pairs all 6 seeds
    for stat in ("pass@max", "pass@1", "solved_only", "pass@max at equal pass@1"):
        same = by.loc[(stat, nulls.SELF, "0")]
        assert (same["mean"], same["lo"], same["hi"], same["fpr"]) == (0, 0, 0, 0)
        assert same["passes"] and same["reason"] == "passes"
        assert tuple(by.loc[(stat, nulls.SHIFT, "0"), ["draws", "pairs"]]) == (5, 6)
        assert tuple(by.loc[(stat, nulls.SPLIT, "0"), ["draws", "pairs"]]) == (nulls.DRAWS, 3)
    # the training path: 0 by construction now; round two's rule gives OLD_GAPS, mean -341/36,
    # whose paired t-interval lies below 0 (sd < 2: half width < 2.571 * 2 / sqrt(6) = 2.1)
    path = by.loc[("pass@max on GRPO's training path", nulls.SELF, "0")]
    assert (path["mean"], path["lo"], path["hi"]) == pytest.approx((0, 0, 0)) and path["passes"]
    old = by.loc[(nulls.OLD_PATH, nulls.SELF, "0")]
    assert old["mean"] == pytest.approx(OLD_GAPS.mean()) == pytest.approx(-341 / 36)
    assert OLD_GAPS.std(ddof=1) < 2 and old["hi"] < 0 and old["fpr"] == 1 and not old["passes"]
    assert "excludes 0" in old["reason"] and "false-positive rate 100.0% > 7%" in old["reason"]
    # the premise's matching: +1 at every seed (sd 0: [1, 1]) fails; 0.1, -0.1, ... passes
    mlp = by.loc[(nulls.premise_key("mlp"), nulls.MATCHED, "0")]
    assert (mlp["mean"], mlp["lo"], mlp["hi"], mlp["fpr"]) == pytest.approx((1, 1, 1, 1))
    every = by.loc[(nulls.premise_key("every_parameter"), nulls.MATCHED, "0")]
    assert every["mean"] == pytest.approx(0) and every["lo"] < 0 < every["hi"]
    assert every["fpr"] == 0 and every["passes"]
    # the margins' rules: split nulls at the margin
    equal = table[table["statistic"].str.contains("(equivalence)", regex=False)]
    assert equal["at"].tolist() == ["+margin", "-margin"] and set(equal["null"]) == {nulls.SPLIT}
    worse = table[table["statistic"].str.contains("(non-inferiority)", regex=False)]
    assert worse["at"].tolist() == ["-margin"]
    bad = nulls.failing(table)
    assert set(bad) == set(table.loc[~table["passes"], "statistic"])
    assert {nulls.OLD_PATH, nulls.premise_key("mlp")} <= set(bad)
    assert bad[nulls.premise_key("mlp")].startswith(f"{nulls.MATCHED} (at 0): mean +1.00")


def test_claims_map_to_their_statistics_null_rows():
    by_name = {c.name: nulls.statistic_of(c) for c in CLAIMS}
    assert by_name["PSN raises pass@256"] == "pass@max"
    assert by_name["PSN raises pass@256 on GRPO's training path"] == (
        "pass@max on GRPO's training path"
    )
    assert by_name["Noise beats temperature at equal pass@1"] == nulls.premise_key("mlp")
    assert by_name[
        "The released code's noise beats temperature at equal pass@1"
    ] == nulls.premise_key("every_parameter")
    assert by_name["... at about equal pass@1"] == "pass@1, about equal within 0.96% (equivalence)"
    assert by_name["Variant II costs at most ~8% throughput"] == (
        "throughput, at most 8% below (non-inferiority)"
    )


def test_the_null_table_reads_records_only_and_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))

    def train(*args, **kwargs):
        raise AssertionError("the null checks computed a task")

    monkeypatch.setattr(jobs, "run_task", train)
    four = SMOKE.with_overrides(seeds=(0, 1, 2, 3))  # enough seeds for a null (smoke has 2)
    with pytest.raises(MissingRecords, match=r"no usable record of \['base"):
        nulls.null_table(four)


def test_the_null_checks_are_analysis_in_no_records_code_version():
    for roots in codeversion.ROOTS.values():
        closure = codeversion.closure(roots)
        assert not {
            "psnlib.replication.analysis.nulls",
            "psnlib.replication.analysis.null_records",
        } & set(closure)


def test_a_profile_with_too_few_seeds_checks_nothing_and_gives_no_verdict_word():
    """The smoke profile's 2 main seeds cannot make a null (the split needs 2 + 2): every
    statistic of the claims is listed as not checked, so none of them gives a verdict there."""
    smoke = get_profile("smoke")
    table = nulls.null_table(smoke)
    assert not table["passes"].any() and (table["draws"] == 0).all()
    assert table["reason"].str.contains("has 2 main seed").all()
    assert set(nulls.failing(table)) == {nulls.statistic_of(c) for c in CLAIMS}


def test_the_premise_null_reads_the_premise_seeds_alone_among_grpos_main_seeds(monkeypatch):
    """At cpu the main seeds are 0-31 and the premise ran on the checkpoints of 0-15 alone: the
    committed GRPO records of 16-31 carry no premise and are not read for it."""
    monkeypatch.setenv(ledger.RESULTS_ENV, str(ROOT / "results"))  # the committed records
    cpu = get_profile("cpu")
    records = null_records._records(cpu)  # GRPO's committed records at the main seeds
    values = null_records.premise_values(cpu, records)
    assert set(values["seed"]) == set(premise(cpu).seeds) < set(records)


def test_the_premise_may_cover_some_of_the_main_seeds_and_its_sites_read_them_alone():
    """The premise runs on some of GRPO's main seeds (cpu: 0-15 of 0-31): a site reads its own
    seeds, ascending; fewer than MIN_SEEDS of them, or a seed that is not a main one, is refused."""
    v = hand_made()
    some = v.premise[v.premise["seed"] >= 1].iloc[::-1]  # seeds 1-5 of 0-5, shuffled
    five = dataclasses.replace(v, premise=some)
    assert five.site("mlp").index.tolist() == [1, 2, 3, 4, 5]
    assert five.site("mlp")["noise_pass1"].tolist() == v.site("mlp")["noise_pass1"].tolist()[1:]
    table = nulls.table_from(five, SMOKE)  # each check over its own seeds
    matched = table[table["null"] == nulls.MATCHED]
    assert set(matched["pairs"]) == {5}
    assert set(table[table["null"] == nulls.SELF]["pairs"]) == {6}
    with pytest.raises(ValueError, match=r"premise has the seeds \[3, 4, 5\]"):
        dataclasses.replace(v, premise=v.premise[v.premise["seed"] >= 3])
    with pytest.raises(ValueError, match=r"premise has the seeds \[0, 1, 2, 3, 4, 5, 9\]"):
        dataclasses.replace(v, premise=pd.concat([v.premise, v.premise.iloc[:1].assign(seed=9)]))
