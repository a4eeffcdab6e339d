"""GRPO's training-path frontier (psnlib.replication.analysis.frontier) on hand-made checkpoints:
every asserted number is derived by hand in the test."""

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from psnlib.replication.analysis import frontier
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import codeversion, ledger

T_975_2 = 4.302652729749464  # t_{0.975} at 2 degrees of freedom (tables: 4.303)
T_975_3 = 3.182446305284263  # at 3 (tables: 3.182)


def path_of(seed: int, *points: tuple[int, float, float]) -> pd.DataFrame:
    """One seed's path: (step, pass1, passmax) points."""
    return pd.DataFrame([{"seed": seed, "step": s, "pass1": x, "passmax": y} for s, x, y in points])


# A path that doubles back, as cpu seeds 1 and 15 do (pass@1 not monotone, pass@max falling):
# (step, pass1, passmax). Sorted by pass@1: 8 -> 98; 9 -> 84; 10 -> (86 + 82) / 2 = 84, weight 2;
# 11 -> 90. The decreasing isotonic fit pools 84 (w 2) and 90 into 86 (w 3), then 84 and 86 into
# (84 + 3 * 86) / 4 = 85.5: levels 98, 85.5, 85.5, 85.5 at 8, 9, 10, 11.
BACK_0 = path_of(0, (0, 8, 98), (32, 11, 90), (48, 10, 86), (64, 9, 84), (80, 10, 82))
# its own least-squares slope: pass@1 8, 11, 10, 9, 10 (mean 9.6; dx -1.6, 1.4, 0.4, -0.6, 0.4),
# pass@max 98, 90, 86, 84, 82 (mean 88; dy 10, 2, -2, -4, -6): sum dx dy = -14, sum dx^2 = 5.2
SLOPE_0 = -14 / 5.2
# three more that double back; the final policy is each path's last step
BACK = pd.concat(
    [
        BACK_0,
        path_of(1, (0, 8, 98), (32, 10, 92), (48, 10.5, 88), (64, 9.5, 84), (80, 9, 83)),
        path_of(2, (0, 8, 98), (32, 12, 90), (48, 11, 87), (64, 11.5, 85), (80, 11, 84)),
        path_of(3, (0, 8, 98), (32, 10, 93), (48, 9.5, 89), (64, 10.5, 87), (80, 10, 85)),
    ],
    ignore_index=True,
)


def test_the_frontier_is_the_paths_decreasing_isotonic_fit():
    xs, fit = frontier.monotone_fit(BACK_0[::-1])  # any order of rows
    assert xs.tolist() == [8, 9, 10, 11]
    assert fit.tolist() == pytest.approx([98, 85.5, 85.5, 85.5])
    # linear between the fitted points: at 8.5, 98 - 0.5 * 12.5 = 91.75
    assert frontier.frontier_value(BACK_0, 8.5) == (pytest.approx(91.75), frontier.INSIDE)
    # beyond the path's pass@1, on from the fitted end along the path's own slope
    assert frontier.frontier_value(BACK_0, 12) == (pytest.approx(85.5 + SLOPE_0), frontier.ABOVE)
    assert frontier.frontier_value(BACK_0, 7) == (pytest.approx(98 - SLOPE_0), frontier.BELOW)
    # a path flat in pass@1 has no slope to go on along
    still = path_of(0, (0, 10, 98), (80, 10, 90))
    assert math.isnan(frontier.frontier_value(still, 11.0)[0])
    with pytest.raises(ValueError, match="at least two points, got 1"):
        frontier.monotone_fit(path_of(0, (0, 10, 98)))


def test_an_arms_gap_is_read_relative_to_grpos_final_policy_on_the_same_frontier():
    # GRPO's final (10, 82) sits at f(10) = 85.5; an arm at (8.5, 93): f = 91.75, so
    # g = (93 - 82) - (91.75 - 85.5) = 4.75
    arm = pd.DataFrame({"policy": "A", "seed": [0], "pass1": [8.5], "passmax": [93.0]})
    gaps = frontier.frontier_gap(BACK_0, arm)
    assert gaps[["grpo_pass1", "grpo_passmax"]].values.tolist() == [[10, 82]]
    assert gaps[["frontier", "at_grpo", "gap"]].values.tolist() == [
        pytest.approx([91.75, 85.5, 4.75])
    ]
    assert gaps["where"].tolist() == [frontier.INSIDE]
    # above the path: f(12) = 85.5 + SLOPE_0; an arm at (12, 84): (84 - 82) - SLOPE_0
    above = arm.assign(pass1=12.0, passmax=84.0)
    assert frontier.frontier_gap(BACK_0, above)["gap"].tolist() == pytest.approx([2 - SLOPE_0])
    with pytest.raises(ValueError, match="one row per seed"):
        frontier.frontier_gap(BACK_0, pd.concat([arm, arm]))
    with pytest.raises(ValueError, match="has a GRPO training path"):
        frontier.frontier_gap(BACK_0, arm.assign(seed=7))


def test_grpo_against_its_own_path_covers_0_where_round_twos_rule_gives_a_negative_gap():
    finals = frontier.final_points(BACK).assign(policy="GRPO")
    row = frontier.frontier_table(BACK, finals).loc["GRPO"]
    assert row["n"] == 4 and row["beyond"] == 0
    assert row["mean"] == pytest.approx(0.0) and row["lo"] <= 0 <= row["hi"]
    # round two's rule reads the first (least-trained) segment holding the final's pass@1: seed 0
    # at 10 on 0-32, 98 - 2 * 8 / 3; seed 1 at 9 on 0-32, 95; seed 2 at 11 on 0-32, 92; seed 3
    # at 10 on 0-32, 93: gaps -32/3, -12, -8, -8, mean -29/3, sd 2, clear of 0
    old = [
        y - frontier.first_segment_value(BACK[BACK["seed"] == s], x)
        for s, x, y in finals[["seed", "pass1", "passmax"]].itertuples(index=False)
    ]
    assert old == pytest.approx([-32 / 3, -12, -8, -8])
    half = T_975_3 * 2 / 2
    assert -29 / 3 + half < 0


# Paths that need no fit (pass@1 rising, pass@max falling along each), and an arm
SEED_0 = path_of(0, (0, 10, 98), (32, 14, 94), (64, 17, 90), (80, 20, 86))
SEED_1 = path_of(1, (0, 10, 98), (32, 12, 95), (64, 16, 91), (80, 18, 88))
SEED_2 = path_of(2, (0, 10, 98), (32, 13, 96), (64, 15, 92), (80, 19, 90))
PATHS = pd.concat([SEED_2, SEED_0, SEED_1], ignore_index=True)  # any order of seeds and rows
ARM = pd.DataFrame(
    {"policy": "PSN", "seed": [0, 1, 2], "pass1": [15.5, 14.0, 11.5], "passmax": [93, 95, 96]}
)


def test_several_seeds_give_a_mean_gap_with_a_paired_t_interval():
    # seed 0: f(15.5) on (14, 94)-(17, 90) = 92, f(20) = 86: (93 - 86) - (92 - 86) = +1
    # seed 1: f(14) on (12, 95)-(16, 91) = 93, f(18) = 88: (95 - 88) - (93 - 88) = +2
    # seed 2: f(11.5) on (10, 98)-(13, 96) = 97, f(19) = 90: (96 - 90) - (97 - 90) = -1
    gaps = frontier.frontier_gap(PATHS, ARM).set_index("seed")
    assert gaps["frontier"].to_dict() == pytest.approx({0: 92.0, 1: 93.0, 2: 97.0})
    assert gaps["gap"].to_dict() == pytest.approx({0: 1.0, 1: 2.0, 2: -1.0})
    # gaps 1, 2, -1: mean 2/3; deviations 1/3, 4/3, -5/3, sd^2 = (1 + 16 + 25) / 9 / 2 = 7/3;
    # half width t * sqrt(7/3) / sqrt(3) = t * sqrt(7) / 3
    row = frontier.frontier_table(PATHS, ARM).loc["PSN"]
    half = T_975_2 * math.sqrt(7) / 3
    assert row["n"] == 3 and row["beyond"] == 0
    assert row["mean"] == pytest.approx(2 / 3)
    assert (row["lo"], row["hi"]) == pytest.approx((2 / 3 - half, 2 / 3 + half))
    # beside it, the across-seed statistic: GRPO's finals (20, 86), (18, 88), (19, 90) have slope
    # b = sum dx dy / sum dx^2 = ((1)(-2) + (-1)(0) + 0) / 2 = -1; d_s = (y_a - y_b) + (x_a - x_b):
    # 7 - 4.5 = 2.5, 7 - 4 = 3, 6 - 7.5 = -1.5; mean 4/3
    assert row["across"] == pytest.approx(4 / 3)
    assert row["across_lo"] < row["across"] < row["across_hi"]


def test_round_twos_rule_reads_the_least_trained_segment_and_goes_on_along_the_paths_slope():
    # 15 lies on 0-32 (10, 98)-(16, 92) and on 32-64 (16, 92)-(14, 95): the first, 98 - 5 = 93
    turning = path_of(0, (0, 10, 98), (32, 16, 92), (64, 14, 95), (80, 20, 86))
    assert frontier.first_segment_value(turning, 15.0) == pytest.approx(93.0)
    # SEED_0's own slope: pass@1 10, 14, 17, 20 (mean 15.25; dx -5.25, -1.25, 1.75, 4.75),
    # pass@max 98, 94, 90, 86 (dy 6, 2, -2, -6): -66 / 54.75; past (20, 86) and below (10, 98)
    slope = -66 / 54.75
    assert frontier.first_segment_value(SEED_0, 22.0) == pytest.approx(86 + 2 * slope)
    assert frontier.first_segment_value(SEED_0, 8.0) == pytest.approx(98 - 2 * slope)
    # a segment flat in pass@1 at x: its first point
    flat = path_of(0, (0, 10, 98), (32, 14, 90), (64, 14, 89))
    assert frontier.first_segment_value(flat, 14.0) == pytest.approx(90.0)


def test_the_paths_own_slope_stands_beside_the_across_seed_slope():
    # seed 0: -2 points of pass@max per point of pass@1 at each step; seed 1: -1; finals (12, 94)
    # and (14, 94): flat across seeds, slope 0
    paths = pd.concat(
        [
            path_of(0, (0, 10, 98), (2, 11, 96), (4, 12, 94)),
            path_of(1, (0, 10, 98), (2, 12, 96), (4, 14, 94)),
        ]
    )
    assert frontier.path_slopes(paths).to_dict() == pytest.approx({0: -2.0, 1: -1.0})
    table = frontier.slope_table(paths)
    assert table.loc["along the path", "slope"] == pytest.approx(-1.5)
    assert table.loc["along the path", "n"] == 2
    assert table.loc["across seeds", "slope"] == pytest.approx(0.0)


def _tables(correct: list[int], n: int = 16) -> dict:
    problems = pd.DataFrame({"prompt": [f"p{i}" for i in range(len(correct))], "n": n})
    curves = pd.DataFrame({"k": [1], "pass_at_k": [0.0]})
    return {
        "problems": ledger.table_json(problems.assign(correct=correct)),
        "curves": ledger.table_json(curves),
    }


def test_points_from_ledger_records_average_problems_then_benchmarks():
    smoke = get_profile("smoke")  # ks 1 .. 16, 16 samples a problem
    benchmarks = ("a", "b")
    # a problem 8 of 16 correct: pass@1 50%, pass@16 100%; none correct: 0, 0; all: 100, 100
    base = {"seed": 0, "benchmarks": {"a": _tables([0, 0]), "b": _tables([0])}}
    run = {
        "seed": 3,
        "settings": {"max_steps": 4},
        "benchmarks": {"a": _tables([16, 16]), "b": _tables([16])},
        "path": {
            "steps": [2],
            "weights": {"2": "f"},
            "benchmarks": {"2": {"a": _tables([8, 0]), "b": _tables([16])}},
        },
    }
    path = frontier.points(frontier.path_problems(base, [run], benchmarks), smoke, ("seed", "step"))
    # step 2: a (50 + 0) / 2 = 25 and (100 + 0) / 2 = 50; b 100, 100; over benchmarks 62.5, 75
    assert path.to_dict("list") == {
        "seed": [3, 3, 3],
        "step": [0, 2, 4],
        "pass1": pytest.approx([0.0, 62.5, 100.0]),
        "passmax": pytest.approx([0.0, 75.0, 100.0]),
    }
    final = frontier.points(frontier.final_problems([run], benchmarks), smoke)
    assert final[["pass1", "passmax"]].values.tolist() == [[100.0, 100.0]]


def test_the_frontier_is_analysis_that_imports_no_training_or_evaluation_code():
    for kind, roots in codeversion.ROOTS.items():  # in no record's code version
        assert "psnlib.replication.analysis.frontier" not in codeversion.closure(roots), kind
    tree = ast.parse(Path(frontier.__file__).read_text())
    rooms = {"psnlib.replication.plan", "psnlib.replication.records", "psnlib.replication.analysis"}
    imported = codeversion._imports(tree)
    assert imported and all(m.rpartition(".")[0] in rooms or m in rooms for m in imported), imported
