"""GRPO's training path as a claim's statistic (``frontier.OnGRPOPath``, the claims "... on GRPO's
training path") and the paths read from the run ledger (``frontier.training_paths``), on hand-made
tables and records: every asserted number is derived by hand in the test."""

import dataclasses
import math

import pandas as pd
import pytest
from test_frontier import T_975_2, _tables
from test_results import _row

from psnlib.replication.analysis import frontier
from psnlib.replication.analysis.claim import NOT_RUN, TUNED_PSN
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.analysis.claims_psn import PASS_ON_GRPO_PATH, on_grpo_path
from psnlib.replication.analysis.frontier import OnGRPOPath
from psnlib.replication.compute import jobs
from psnlib.replication.plan import experiments, schedule
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords
from psnlib.replication.report.results import (
    Sections,
    check_claim,
    judge,
    results_markdown,
    timing_summary,
)
from psnlib.replication.report.results_text import slopes_markdown

SMOKE = get_profile("smoke")  # ks 1 .. 16
PSN = experiments.PSN.label
B = experiments.benchmarks_of(SMOKE, "id")[0]  # an in-distribution benchmark


def problems_of(policy: str, seed: int, correct: list[int]) -> pd.DataFrame:
    """One policy's per-problem table on benchmark ``B`` at ``seed``: 16 samples a problem."""
    return pd.DataFrame(
        {"policy": policy, "seed": seed, "benchmark": B, "prompt": range(len(correct))}
        | {"n": 16, "correct": correct}
    )


# PSN fixed at seed 0: problems with 8 and 0 of 16 correct: pass@1 (50 + 0) / 2 = 25, pass@16 50;
# at seed 1: 4 and 4 of 16: pass@1 25, pass@16 100; at seed 2: 16 and 0: pass@1 50, pass@16 50
PROBLEMS = pd.concat(
    [
        problems_of(PSN, 0, [8, 0]),
        problems_of(PSN, 1, [4, 4]),
        problems_of(PSN, 2, [16, 0]),
        problems_of("GRPO", 0, [0, 0]),  # theirs' own evaluation is not what the path reads
    ]
)
# GRPO's paths (monotone already: each its own fit), the final policy at step 4: seed 0 (20, 60)
# -> (30, 40): f(25) = 50, f(30) = 40; seed 1 (20, 100) -> (30, 80): f(25) = 90, f(30) = 80;
# seed 2 (20, 90) -> (40, 70): 50 lies beyond, on from (40, 70) along its slope -1: f(50) = 60,
# f(40) = 70
PATHS = pd.DataFrame(
    [
        {"seed": s, "step": step, "pass1": x, "passmax": y}
        for s, points in {
            0: [(0, 20, 60), (4, 30, 40)],
            1: [(0, 20, 100), (4, 30, 80)],
            2: [(0, 20, 90), (4, 40, 70)],
        }.items()
        for step, x, y in points
    ]
)


def test_the_gap_to_grpos_path_is_a_claims_statistic_with_a_paired_t_interval():
    calls = []

    def paths(profile, benchmarks, seeds):  # frontier.training_paths' signature: a reader
        calls.append((profile.name, benchmarks, sorted(seeds)))
        return PATHS[PATHS["seed"].isin(seeds)]

    stat = OnGRPOPath("pass@max on GRPO's training path", "points", paths=paths, reference="GRPO")
    claim = on_grpo_path(next(c for c in CLAIMS if c.name == "PSN raises pass@256"))
    row = check_claim(dataclasses.replace(claim, statistic=stat), PROBLEMS, SMOKE)
    # per seed, value_a = y - (f(x) - f(x_T)): 50 - (50 - 40) = 40, 100 - (90 - 80) = 90,
    # 50 - (60 - 70) = 60; value_b GRPO's final 40, 80, 70; gaps 0, +10, -10: mean 0,
    # sd = sqrt((0 + 100 + 100) / 2) = 10, half width t_2 * 10 / sqrt(3)
    assert (row["value_ours"], row["value_theirs"]) == pytest.approx((190 / 3, 190 / 3))
    assert row["diff"] == pytest.approx(0.0) and row["seeds"] == 3
    half = T_975_2 * 10 / math.sqrt(3)
    assert (row["lo"], row["hi"]) == pytest.approx((-half, half))
    assert row["statistic"] == "pass@16 on GRPO's training path"
    assert "steps 0, 4" in row["note"] and "1 of 3 seeds' pass@1 beyond their path" in row["note"]
    assert calls == [("smoke", (B,), [0, 1, 2])]  # its benchmarks and seeds
    # seeds left out (those that framed a claim) leave before the path is read
    values = stat.seed_values(PROBLEMS, None, PSN, "GRPO", SMOKE, exclude=(1,)).values
    assert values.index.tolist() == [0, 2] and calls[-1][2] == [0, 2]
    assert values["value_b"].tolist() == pytest.approx([40.0, 70.0])
    with pytest.raises(ValueError, match="compares an arm with 'GRPO', got 'base'"):
        stat.seed_values(PROBLEMS, None, PSN, "base", SMOKE)
    with pytest.raises(ValueError, match="paths' reader"):
        OnGRPOPath("x", "points")


def test_a_path_claim_without_the_records_is_not_run_and_computes_nothing(tmp_path, monkeypatch):
    def missing(profile, benchmarks, seeds):
        raise MissingRecords("no usable record of ['GRPO seed 0 (...)'] in results/smoke")

    stat = OnGRPOPath("pass@max on GRPO's training path", "points", paths=missing, reference="GRPO")
    claim = on_grpo_path(next(c for c in CLAIMS if c.name == "PSN raises pass@256"))
    row = check_claim(dataclasses.replace(claim, statistic=stat), PROBLEMS, SMOKE)
    assert row["verdict"] == NOT_RUN and row["seeds"] == 0
    # the claims' own reader (frontier.training_paths) on an empty ledger: not run, not a TypeError
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    real = check_claim(dataclasses.replace(claim, statistic=PASS_ON_GRPO_PATH), PROBLEMS, SMOKE)
    assert real["verdict"] == NOT_RUN and "no usable record" in real["note"]
    assert "no usable record of ['GRPO seed 0 (...)']" in row["note"]


def test_every_arm_against_grpo_at_the_main_seeds_has_its_path_row_beside_its_plain_one():
    names = [c.name for c in CLAIMS]
    on_path = [c for c in CLAIMS if c.statistic is PASS_ON_GRPO_PATH]
    assert {c.ours.label for c in on_path} == {
        v.label
        for v in (
            experiments.PSN,
            experiments.PSN_DIV,
            experiments.PSN_RELEASED_FIXED,
            experiments.PSN_RELEASED,
            experiments.PSN_NO_TIS,
            experiments.PSN_MASKED_IS,
            TUNED_PSN,  # at the tuned seeds, some of the main ones
        )
    }
    for claim in on_path:
        plain = claim.name.removesuffix(" on GRPO's training path")
        twin = next(c for c in CLAIMS if c.name == plain)
        assert claim.theirs == twin.theirs == experiments.GRPO
        assert (claim.effect, claim.interest, claim.paper_theirs) == (
            twin.effect,
            twin.interest,
            twin.paper_theirs,
        )
        assert names.index(claim.name) > names.index(plain)


def test_training_paths_read_the_ledger_and_name_what_is_missing_computing_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    plan = [
        schedule.Task(experiments.BASE_POLICY, 0, ("b",)),
        schedule.Task(experiments.GRPO, 0, ("b",), path=(2,)),
        schedule.Task(experiments.GRPO, 1, ("b",), path=(2,)),
    ]
    monkeypatch.setattr(frontier, "tasks", lambda profile: plan)
    computed = []

    def run_task(profile, task):  # hand-made records: base 0 of 16; GRPO 16 of 16 at the end
        computed.append(task.seed if task.path else "base")
        if not task.path:
            return {"seed": 0, "benchmarks": {"b": _tables([0])}}
        return {
            "seed": task.seed,
            "settings": {"max_steps": 4},
            "benchmarks": {"b": _tables([16])},
            "path": {"steps": [2], "weights": {"2": "f"}, "benchmarks": {"2": {"b": _tables([8])}}},
        }

    monkeypatch.setattr(jobs, "run_task", run_task)
    with pytest.raises(MissingRecords, match=r"GRPO seed 1 \(1 benchmarks, path at steps 2\)"):
        frontier.training_paths(SMOKE, ("b",), [1])
    assert computed == []  # a reader: nothing is computed (issue 49: records one way)
    # what it reads, the records' path as points: the base policy's and GRPO seed 1's records
    base, grpo = run_task(SMOKE, plan[0]), run_task(SMOKE, plan[2])
    path = frontier.points(frontier.path_problems(base, [grpo], ("b",)), SMOKE, ("seed", "step"))
    # step 0 the base (0, 0), step 2 8 of 16 (50, 100), step 4 16 of 16 (100, 100)
    assert path.to_dict("list") == {
        "seed": [1, 1, 1],
        "step": [0, 2, 4],
        "pass1": pytest.approx([0.0, 50.0, 100.0]),
        "passmax": pytest.approx([0.0, 100.0, 100.0]),
    }
    with pytest.raises(ValueError, match="keeps GRPO's path at none of the seeds"):
        frontier.training_paths(SMOKE, ("b",), [5])


def test_results_md_shows_grpos_frontier_slope_read_both_ways():
    paths = pd.concat(
        [
            PATHS[PATHS["seed"] == 0],  # slope (40 - 60) / 10 = -2
            PATHS[PATHS["seed"] == 1],  # (80 - 100) / 10 = -2
            PATHS[PATHS["seed"] == 2],  # (70 - 90) / 20 = -1
        ]
    )
    slopes = frontier.slope_table(paths)
    # along: mean -5/3, sd sqrt((1/9 + 1/9 + 4/9) / 2) = sqrt(1/3); finals (30, 40), (30, 80),
    # (40, 70): x mean 100/3, dx -10/3, -10/3, 20/3; y mean 190/3, dy -70/3, 50/3, 20/3:
    # sum dx dy = (700 - 500 + 400) / 9 = 600/9, sum dx^2 = 600/9: slope +1
    half = T_975_2 * math.sqrt(1 / 3) / math.sqrt(3)
    text = slopes_markdown(slopes)
    assert f"| along the path | -1.67 | [{-5 / 3 - half:+.2f}, {-5 / 3 + half:+.2f}] | 3 |" in text
    assert "| across seeds | +1.00 | none | 3 |" in text
    table = judge(pd.DataFrame([_row("PSN raises pass@256", 3, 1.0, -1.0, 3.0)]))
    md = results_markdown(
        table, SMOKE, timing_summary("/nonexistent.json"), Sections(slopes=slopes)
    )
    assert "## GRPO's frontier, read two ways" in md and text in md
    assert "read two ways" not in results_markdown(table, SMOKE, timing_summary("/nonexistent"))
