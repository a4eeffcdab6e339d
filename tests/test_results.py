"""RESULTS.md's claims: statistics, intervals and verdicts against independent computations."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from psnlib.claims import CLAIMS, Claim
from psnlib.experiments import benchmarks_of, plan
from psnlib.profiles import get_profile
from psnlib.results import (
    check_claim,
    claims_markdown,
    results_markdown,
    timing_summary,
    verdict,
)

SMOKE = get_profile("smoke")  # n = 16 samples, ks 1..16
ID = benchmarks_of(SMOKE, "id")[:2]
OOD = benchmarks_of(SMOKE, "ood")[:1]


def _problems(policy: str, seeds: list[int], correct: dict) -> pd.DataFrame:
    """Per-problem rows: ``correct[(seed, benchmark)]`` lists the correct counts of n = 16."""
    rows = []
    for seed in seeds:
        for benchmark in (*ID, *OOD):
            for i, c in enumerate(correct[(seed, benchmark)]):
                rows.append(
                    {
                        "policy": policy,
                        "seed": seed,
                        "benchmark": benchmark,
                        "prompt": f"{benchmark}-{i}",
                        "n": 16,
                        "correct": c,
                        "step_validity": c / 16,
                    }
                )
    return pd.DataFrame(rows)


def _pass(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # the closed form, exactly


def _random_counts(rng, seeds, low, high, problems=6):
    return {(s, b): rng.integers(low, high, problems).tolist() for s in seeds for b in (*ID, *OOD)}


def test_multi_seed_difference_and_t_interval_match_an_independent_computation():
    rng = np.random.default_rng(0)
    seeds = [0, 1, 2]
    a = _random_counts(rng, seeds, 0, 6)
    b = _random_counts(rng, seeds, 0, 3)
    table = pd.concat([_problems("A", seeds, a), _problems("B", seeds, b)])
    row = check_claim(Claim("c", "p", "main_results", "A", "B", "pass@1"), table, SMOKE)
    # pass@1 of each seed: mean over benchmarks of the mean over problems of c / n.
    d = [
        100 * np.mean([np.mean(a[(s, x)]) / 16 - np.mean(b[(s, x)]) / 16 for x in ID])
        for s in seeds
    ]
    assert row["diff"] == pytest.approx(np.mean(d))
    half = stats.t.ppf(0.975, 2) * np.std(d, ddof=1) / np.sqrt(3)
    assert (row["lo"], row["hi"]) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    assert row["seeds"] == 3 and row["statistic"] == "pass@1"
    assert row["verdict"] == verdict(row["diff"], row["lo"], row["hi"], 1, 3)


def test_pass_at_max_uses_the_closed_form_and_the_chosen_benchmarks():
    seeds = [0, 1]
    a = {(s, x): [1, 0, 2] for s in seeds for x in (*ID, *OOD)}
    b = {(s, x): [0, 0, 16] for s in seeds for x in (*ID, *OOD)}
    a[(1, OOD[0])] = [16, 16, 16]  # only the OOD claim sees this
    table = pd.concat([_problems("A", seeds, a), _problems("B", seeds, b)])
    row = check_claim(Claim("c", "p", "ood", "A", "B", "pass@max", "ood"), table, SMOKE)
    k = SMOKE.ks[-1]
    per_seed = [
        np.mean([_pass(16, c, k) for c in a[(s, OOD[0])]])
        - np.mean([_pass(16, c, k) for c in b[(s, OOD[0])]])
        for s in seeds
    ]
    assert row["statistic"] == f"pass@{k}"
    assert row["diff"] == pytest.approx(100 * np.mean(per_seed))
    assert row["value_ours"] == pytest.approx(100 * np.mean([2 / 3, 1.0]))


def test_a_single_evaluation_is_paired_with_every_seed_of_the_other():
    rng = np.random.default_rng(1)
    base = _random_counts(rng, [0], 0, 16)
    grpo = _random_counts(rng, [0, 1, 2], 0, 16)
    table = pd.concat([_problems("base", [0], base), _problems("GRPO", [0, 1, 2], grpo)])
    row = check_claim(Claim("c", "p", "x", "base", "GRPO", "pass@1"), table, SMOKE)
    per_seed = [
        100 * np.mean([np.mean(base[(0, x)]) / 16 - np.mean(grpo[(s, x)]) / 16 for x in ID])
        for s in (0, 1, 2)
    ]
    assert row["seeds"] == 3 and row["diff"] == pytest.approx(np.mean(per_seed))


def test_one_seed_gets_a_bootstrap_interval_over_problems_and_says_so():
    rng = np.random.default_rng(2)
    a, b = _random_counts(rng, [0], 4, 12, 40), _random_counts(rng, [0], 0, 6, 40)
    table = pd.concat([_problems("A", [0], a), _problems("B", [0], b)])
    row = check_claim(Claim("c", "p", "x", "A", "B", "pass@1"), table, SMOKE)
    assert row["lo"] < row["diff"] < row["hi"] and row["lo"] > 0  # A is far ahead
    assert row["verdict"] == "reproduced (one seed)"
    same = check_claim(Claim("c", "p", "x", "A", "A", "pass@1"), table, SMOKE)
    assert same["diff"] == 0 and same["lo"] == same["hi"] == 0


def test_solved_only_counts_each_way():
    seeds = [0, 1]
    a = {(s, x): [0, 3, 5, 0] for s in seeds for x in (*ID, *OOD)}
    b = {(s, x): [2, 0, 0, 0] for s in seeds for x in (*ID, *OOD)}
    b[(1, ID[0])] = [2, 0, 1, 0]
    table = pd.concat([_problems("A", seeds, a), _problems("B", seeds, b)])
    row = check_claim(Claim("c", "p", "x", "A", "B", "solved_only"), table, SMOKE)
    # seed 0: A alone solves 2 per ID benchmark (4), B alone 1 per benchmark (2); seed 1: 3 vs 2.
    assert row["value_ours"] == pytest.approx((4 + 3) / 2)
    assert row["value_theirs"] == pytest.approx(2)
    assert row["diff"] == pytest.approx(((4 - 2) + (3 - 2)) / 2)
    # Step validity (here c / n per problem) is a share, in percent like pass@k.
    steps = check_claim(Claim("c", "p", "x", "A", "B", "step_validity"), table, SMOKE)
    assert steps["value_ours"] == pytest.approx(100 * 8 / 4 / 16)


@pytest.mark.parametrize(
    ("diff", "lo", "hi", "direction", "seeds", "expected"),
    [
        (3.0, 1.0, 5.0, 1, 3, "reproduced"),
        (1.0, -1.0, 3.0, 1, 3, "same direction, not resolved"),
        (-1.0, -3.0, 1.0, 1, 3, "not reproduced"),
        (3.6e-15, -21.5, 21.5, 1, 3, "not reproduced"),  # equal means, summed in another order
        (-3.0, -5.0, -1.0, 1, 3, "reversed"),
        (0.5, -1.0, 2.0, 0, 3, "reproduced"),
        (2.0, 1.0, 3.0, 0, 3, "not reproduced (they differ)"),
        (3.0, 1.0, 5.0, 1, 1, "reproduced (one seed)"),
    ],
)
def test_verdicts(diff, lo, hi, direction, seeds, expected):
    assert verdict(diff, lo, hi, direction, seeds) == expected


def test_bad_claims_and_unknown_policies_fail_clearly():
    with pytest.raises(ValueError, match="unknown statistic 'pass@7'"):
        Claim("c", "p", "x", "A", "B", "pass@7")
    with pytest.raises(ValueError, match="kind must be"):
        Claim("c", "p", "x", "A", "B", kind="both")
    table = _problems("A", [0], _random_counts(np.random.default_rng(3), [0], 0, 4))
    with pytest.raises(ValueError, match=r"no evaluation of policy 'B'; have \['A'\]"):
        check_claim(Claim("c", "p", "x", "A", "B"), table, SMOKE)


def test_every_claim_names_policies_of_its_experiment():
    for claim in CLAIMS:
        labels = {v.label for v in plan(claim.experiment, "cpu").variants}
        assert {claim.ours, claim.theirs} <= labels, claim.name


def test_markdown_and_timing_summary(tmp_path):
    table = pd.DataFrame(
        [
            {
                "claim": "RL narrows",
                "paper": "72 vs 68",
                "ours": "base",
                "theirs": "GRPO",
                "statistic": "pass@256",
                "seeds": 3,
                "value_ours": 90.0,
                "value_theirs": 80.0,
                "diff": 10.0,
                "lo": 5.0,
                "hi": 15.0,
                "verdict": "reproduced",
                "notebook": "02_rl",
            }
        ]
    )
    text = claims_markdown(table)
    link = "[RL narrows](../../notebooks/02_rl.ipynb)"
    assert f"| {link} | 72 vs 68 | base 90.0 vs GRPO 80.0 (pass@256) |" in text
    assert "+10.0 [+5.0, +15.0] | 3 | **reproduced** |" in text
    path = tmp_path / "timing.json"
    entries = [
        {"stage": "runs", "task": "a", "workers": 2, "seconds": 100, "cpu_seconds": 90},
        {"stage": "runs", "task": "b", "workers": 2, "seconds": 300, "cpu_seconds": 110},
        {"stage": "prepare", "workers": 2, "seconds": 310},
        {"stage": "02_rl", "seconds": 50},
    ]
    path.write_text(json.dumps(entries))
    summary = timing_summary(path)
    assert summary["tasks"] == 2 and summary["task_cpu_seconds"] == 200
    assert summary["notebooks"] == 1 and summary["estimate_seconds"] == 200 / 2 + 50
    # only the latest make reproduce counts as one start-to-end run
    assert (summary["last_prepare_seconds"], summary["last_notebook_seconds"]) == (310, 50)
    path.write_text(json.dumps([*entries, {"stage": "02_rl", "seconds": 70}]))  # --force
    rerun = timing_summary(path)
    assert (rerun["last_notebooks"], rerun["last_notebook_seconds"]) == (1, 50)  # first run only
    path.write_text(json.dumps([*entries, {"stage": "prepare", "workers": 2, "seconds": 20}]))
    later = timing_summary(path)
    assert (later["last_prepare_seconds"], later["last_notebook_seconds"]) == (20, 0)
    compute = pd.DataFrame(
        {"train_seconds": [3600.0, 1800.0, None], "eval_seconds": [1800.0, 1800.0, None]}
    )
    text = results_markdown(table, "smoke", summary, compute)
    assert "2 of 3 planned runs finished" in text and "1.50 hours and" in text
    assert "their evaluations 1.00 hours" in text and "1.25 hours on 2 cores" in text
    assert (
        "prepared in 0.09 hours of wall time on 2 workers, then ran 1 notebooks in 1 minutes"
        in text
    )
