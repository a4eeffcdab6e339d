"""GRPO's training-path frontier (psnlib.replication.frontier) on hand-made checkpoints: every
asserted number is derived by hand in the test."""

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from psnlib.replication import codeversion, frontier, ledger
from psnlib.replication.profiles import get_profile

T_975_2 = 4.302652729749464  # t_{0.975} at 2 degrees of freedom (tables: 4.303)


def path_of(seed: int, *points: tuple[int, float, float]) -> pd.DataFrame:
    """One seed's path: (step, pass1, passmax) points."""
    return pd.DataFrame([{"seed": seed, "step": s, "pass1": x, "passmax": y} for s, x, y in points])


SEED_0 = path_of(0, (0, 10, 98), (32, 14, 94), (64, 17, 90), (80, 20, 86))
SEED_1 = path_of(1, (0, 10, 98), (32, 12, 95), (64, 16, 91), (80, 18, 88))
SEED_2 = path_of(2, (0, 10, 98), (32, 13, 96), (64, 15, 92), (80, 19, 90))
PATHS = pd.concat([SEED_2, SEED_0, SEED_1], ignore_index=True)  # any order of seeds and rows
ARM = pd.DataFrame(
    {"policy": "PSN", "seed": [0, 1, 2], "pass1": [15.5, 14.0, 11.5], "passmax": [93, 95, 96]}
)


def test_the_frontier_interpolates_between_the_kept_steps_that_bracket_the_arms_pass_1():
    # 15.5 lies between steps 32 (14, 94) and 64 (17, 90): 94 + (15.5 - 14) * (90 - 94) / 3 = 92
    value, where, segment = frontier.frontier_value(SEED_0[::-1], 15.5)
    assert value == pytest.approx(92.0) and where == frontier.INSIDE and segment == "32-64"
    gaps = frontier.frontier_gap(SEED_0, ARM[ARM["seed"] == 0])
    assert gaps["frontier"].tolist() == pytest.approx([92.0])
    assert gaps["gap"].tolist() == pytest.approx([+1.0])  # 93 - 92


def test_several_seeds_give_a_mean_gap_with_a_paired_t_interval():
    # seed 1: 14 on 32-64 (12, 95)-(16, 91): 95 - 2 * 4 / 4 = 93, gap 95 - 93 = +2
    # seed 2: 11.5 on 0-32 (10, 98)-(13, 96): 98 - 1.5 * 2 / 3 = 97, gap 96 - 97 = -1
    gaps = frontier.frontier_gap(PATHS, ARM).set_index("seed")
    assert gaps["frontier"].to_dict() == pytest.approx({0: 92.0, 1: 93.0, 2: 97.0})
    assert gaps.loc[2, "segment"] == "0-32"
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


# SEED_0's own least-squares slope: pass@1 10, 14, 17, 20 (mean 15.25; dx -5.25, -1.25, 1.75,
# 4.75), pass@max 98, 94, 90, 86 (mean 92; dy 6, 2, -2, -6): sum dx dy = -66, sum dx^2 = 54.75
SLOPE_0 = -66 / 54.75


def test_an_arm_beyond_the_paths_pass_1_goes_on_along_the_paths_own_slope_and_is_marked():
    above = pd.DataFrame({"policy": "A", "seed": [0], "pass1": [22.0], "passmax": [85.0]})
    # past the final step's (20, 86): 86 + 2 * SLOPE_0 = 83.59 (the end segment would say 83.33)
    gaps = frontier.frontier_gap(SEED_0, above)
    assert gaps["frontier"].tolist() == pytest.approx([86 + 2 * SLOPE_0])
    assert gaps["gap"].tolist() == pytest.approx([85 - (86 + 2 * SLOPE_0)])
    assert gaps["where"].tolist() == [frontier.ABOVE] and gaps["segment"].tolist() == ["from 80"]
    # below the base policy's (10, 98): 98 + (-2) * SLOPE_0 = 100.41
    value, where, segment = frontier.frontier_value(SEED_0, 8.0)
    assert (value, where, segment) == (pytest.approx(98 - 2 * SLOPE_0), frontier.BELOW, "from 0")
    # without extrapolation the value is NaN and the seed leaves the mean
    assert math.isnan(frontier.frontier_value(SEED_0, 22.0, extrapolate=False)[0])
    # with seed 1 in range (gap +2, above): the mean of both, or seed 1's alone
    both = pd.concat([above, ARM[ARM["seed"] == 1].assign(policy="A")], ignore_index=True)
    paths = pd.concat([SEED_0, SEED_1])
    table = frontier.frontier_table(paths, both)
    assert table.loc["A", "n"] == 2 and table.loc["A", "beyond"] == 1
    assert table.loc["A", "mean"] == pytest.approx((85 - (86 + 2 * SLOPE_0) + 2) / 2)
    table = frontier.frontier_table(paths, both, extrapolate=False)
    assert table.loc["A", "n"] == 1 and table.loc["A", "beyond"] == 1
    assert table.loc["A", "mean"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="one row per seed"):
        frontier.frontier_gap(SEED_0, pd.concat([above, above]))


def test_a_flat_end_segment_neither_blows_up_nor_vanishes_beyond_the_path():
    # the last two kept policies share pass@1 14 (as the cpu round's steps 64 and 80 nearly do):
    # its end segment has no slope; the path's own: pass@1 10, 12, 14, 14 (mean 12.5; dx -2.5,
    # -0.5, 1.5, 1.5), pass@max 98, 94, 90, 89 (mean 92.75; dy 5.25, 1.25, -2.75, -3.75):
    # sum dx dy = -23.5, sum dx^2 = 11; from the most trained of the tie, (14, 89) at step 80
    flat = path_of(0, (0, 10, 98), (32, 12, 94), (64, 14, 90), (80, 14, 89))
    value, where, segment = frontier.frontier_value(flat, 15.0)
    assert (value, where, segment) == (pytest.approx(89 - 23.5 / 11), frontier.ABOVE, "from 80")
    # at 14 itself: inside, on the first segment that holds it, 32-64
    assert frontier.frontier_value(flat, 14.0) == (pytest.approx(90.0), frontier.INSIDE, "32-64")
    # a path flat in pass@1 has no slope to go on along
    still = path_of(0, (0, 10, 98), (80, 10, 90))
    assert math.isnan(frontier.frontier_value(still, 11.0)[0])


def test_a_path_that_turns_back_is_read_on_its_least_trained_segment():
    # 15 lies on 0-32 (10, 98)-(16, 92) and on 32-64 (16, 92)-(14, 95): the first, 98 - 5 = 93
    turning = path_of(0, (0, 10, 98), (32, 16, 92), (64, 14, 95), (80, 20, 86))
    assert frontier.frontier_value(turning, 15.0) == (pytest.approx(93.0), frontier.INSIDE, "0-32")


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
    assert "psnlib.replication.frontier" in codeversion.ANALYSIS
    tree = ast.parse(Path(frontier.__file__).read_text())
    allowed = {f"psnlib.replication.{m}" for m in ("ledger", "claim_stats", "profiles", "verdicts")}
    assert codeversion._imports(tree) <= allowed | {"psnlib.replication"}  # the records' reader
