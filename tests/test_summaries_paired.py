"""Paired differences arm - reference over training seeds, on hand-made problems tables whose
answers are worked out by hand: the unbiased pass@k per problem, averaged over a benchmark's
problems and then over benchmarks, paired seed by seed, with a paired-t interval over seeds; one
seed gets no interval, and a reference without the arm's seeds is refused."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from psnlib.replication.analysis import summaries
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.report import plots

# pass@1 and pass@2 (the largest k) from n = 4 samples per problem
PROFILE = get_profile("smoke").with_overrides(ks=(1, 2))
T_975_2 = 4.302652729911275  # Student t quantile 0.975 at 2 degrees of freedom (tables: 4.303)

# Correct samples (of 4) per seed: {benchmark: [per problem]}; b1 has two problems, b2 one.
COUNTS = {
    "GRPO": {
        0: {"b1": [2, 0], "b2": [1]},
        1: {"b1": [2, 0], "b2": [2]},
        2: {"b1": [2, 0], "b2": [1]},
    },
    "PSN": {
        0: {"b1": [3, 0], "b2": [1]},
        1: {"b1": [2, 0], "b2": [3]},
        2: {"b1": [2, 0], "b2": [1]},
    },
    "one seed": {2: {"b1": [2, 0], "b2": [1]}},
}


def problems(counts: dict = COUNTS) -> pd.DataFrame:
    rows = [
        {"policy": policy, "seed": seed, "benchmark": bench, "prompt": f"p{i}", "n": 4}
        | {"correct": c, "entropy": 0.5}
        for policy, seeds in counts.items()
        for seed, benches in seeds.items()
        for bench, cs in benches.items()
        for i, c in enumerate(cs)
    ]
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_each_seed_is_paired_with_the_same_seed_of_the_reference():
    d = summaries.paired_seed_differences(problems(), "GRPO", PROFILE, policies=["PSN"])
    got = d.set_index(["statistic", "seed"])["difference"]
    # pass@1 = c / n. Seed 0: PSN b1 (3/4 + 0)/2 = 0.375, b2 0.25 -> 0.3125; GRPO 0.25 -> +6.25
    # points (pooling the three problems would give 8.33). Seed 1: PSN (0.25 + 0.75)/2 = 0.5,
    # GRPO (0.25 + 0.5)/2 = 0.375 -> +12.5 (against GRPO's seed 0 it would be +25).
    assert got[("pass@1", 0)] == pytest.approx(6.25)
    assert got[("pass@1", 1)] == pytest.approx(12.5)
    assert got[("pass@1", 2)] == pytest.approx(0.0)
    # pass@2 = 1 - C(4 - c, 2) / C(4, 2): c = 1 -> 1/2, 2 -> 5/6, 3 -> 1 (not 1 - (1 - c/n)^2).
    # Seed 0: PSN (1 + 0)/2, 1/2 -> 1/2; GRPO (5/6 + 0)/2 = 5/12, 1/2 -> 11/24: +1/24.
    # Seed 1: PSN (5/12 + 1)/2 = 17/24; GRPO (5/12 + 5/6)/2 = 15/24: +2/24.
    assert got[("pass@2", 0)] == pytest.approx(100 / 24)
    assert got[("pass@2", 1)] == pytest.approx(200 / 24)
    row = d[(d.statistic == "pass@2") & (d.seed == 1)].iloc[0]
    assert row["value"] == pytest.approx(100 * 17 / 24)
    assert row["reference_value"] == pytest.approx(100 * 15 / 24)
    assert set(d["unit"]) == {"points"} and set(d["policy"]) == {"PSN"}


def test_the_interval_is_a_paired_t_over_seeds():
    table = summaries.paired_differences(problems(), "GRPO", PROFILE, policies=["PSN"])
    row = table.set_index("statistic").loc["pass@1"]
    # differences 6.25, 12.5, 0: mean 6.25, sd 6.25, half-width t(0.975, 2) * 6.25 / sqrt(3)
    half = T_975_2 * 6.25 / np.sqrt(3)
    assert row["seeds"] == 3 and row["mean"] == pytest.approx(6.25)
    assert row["sd"] == pytest.approx(6.25)
    assert (row["lo"], row["hi"]) == (pytest.approx(6.25 - half), pytest.approx(6.25 + half))
    assert row["note"] == "paired t over 3 seeds"
    assert row["value"] == pytest.approx(100 * (0.3125 + 0.5 + 0.25) / 3)
    assert row["reference_value"] == pytest.approx(100 * (0.25 + 0.375 + 0.25) / 3)
    wider = summaries.paired_differences(
        problems(), "GRPO", PROFILE, policies=["PSN"], level=0.99
    ).set_index("statistic")
    assert wider.loc["pass@1", "hi"] > row["hi"]


def test_one_seed_is_exploratory_with_no_interval():
    table = summaries.paired_differences(problems(), "GRPO", PROFILE, policies=["one seed"])
    assert (table["seeds"] == 1).all() and table["lo"].isna().all() and table["hi"].isna().all()
    assert (table["note"] == summaries.ONE_SEED).all()
    assert "exploratory" in summaries.ONE_SEED
    assert table["mean"].tolist() == [0.0, 0.0]  # seed 2 of GRPO, not its mean over seeds


def test_a_reference_without_the_arms_seeds_or_problems_is_refused():
    other_seed = COUNTS | {"late": {0: {"b1": [1, 1], "b2": [1]}, 5: {"b1": [1, 1], "b2": [1]}}}
    with pytest.raises(ValueError, match=r"'late' with 'GRPO'.*lacks seed\(s\) \[5\]"):
        summaries.paired_differences(problems(other_seed), "GRPO", PROFILE)
    other_problem = COUNTS | {"more": {0: {"b1": [1, 1, 1], "b2": [1]}}}
    with pytest.raises(ValueError, match="lacks 1 of its evaluated problems"):
        summaries.paired_differences(problems(other_problem), "GRPO", PROFILE)
    with pytest.raises(ValueError, match="no evaluation of policy 'nobody'"):
        summaries.paired_differences(problems(), "nobody", PROFILE)


def test_common_seeds_pair_each_arm_at_the_seeds_both_sides_ran():
    """An arm run at some seeds alone (a tuned arm, a collapsed bonus) beside a full one: each
    pair at the seeds both have, a pair with none in common left out."""
    late = COUNTS | {"late": {2: {"b1": [1, 1], "b2": [1]}, 5: {"b1": [1, 1], "b2": [1]}}}
    d = summaries.paired_seed_differences(
        problems(late), ["GRPO", "one seed"], PROFILE, policies=["PSN", "late"], common_seeds=True
    )
    seeds = d[d.statistic == "pass@1"].groupby(["policy", "reference"])["seed"].apply(list)
    assert seeds.to_dict() == {
        ("PSN", "GRPO"): [0, 1, 2],
        ("late", "GRPO"): [2],  # GRPO has no seed 5
        ("PSN", "one seed"): [2],
        ("late", "one seed"): [2],
    }
    with pytest.raises(ValueError, match="lacks seed"):  # by default a missing seed is refused
        summaries.paired_seed_differences(problems(late), "GRPO", PROFILE, policies=["late"])
    apart = {"early": {0: COUNTS["PSN"][0]}, "one seed": COUNTS["one seed"]}
    with pytest.raises(ValueError, match="no arm shares a seed"):
        summaries.paired_seed_differences(
            problems(apart), "one seed", PROFILE, policies=["early"], common_seeds=True
        )


def test_several_references_pair_each_arm_once_with_each():
    table = summaries.paired_differences(problems(), ["GRPO", "PSN"], PROFILE)
    pairs = list(dict.fromkeys(zip(table["policy"], table["reference"], strict=True)))
    assert pairs == [("PSN", "GRPO"), ("one seed", "GRPO"), ("one seed", "PSN")]
    vs_psn = table[(table.policy == "one seed") & (table.reference == "PSN")]
    assert vs_psn.set_index("statistic").loc["pass@1", "mean"] == pytest.approx(0.0)  # seed 2
    explicit = summaries.paired_differences(problems(), [("GRPO", "PSN")], PROFILE)
    assert set(explicit["policy"]) == {"GRPO"} and set(explicit["reference"]) == {"PSN"}
    assert explicit.set_index("statistic").loc["pass@1", "mean"] == pytest.approx(-6.25)


def test_a_per_problem_statistic_of_choice_and_no_per_run_one():
    from psnlib.replication.analysis.claim_stats import ENTROPY, THROUGHPUT

    table = summaries.paired_differences(problems(), "GRPO", PROFILE, statistics=[ENTROPY])
    assert table["statistic"].tolist() == ["entropy", "entropy"]
    assert table["mean"].tolist() == [0.0, 0.0] and set(table["unit"]) == {"nats"}
    with pytest.raises(ValueError, match="not a mean of per-problem values"):
        summaries.paired_differences(problems(), "GRPO", PROFILE, statistics=[THROUGHPUT])


def test_the_readable_table_shows_both_sides_the_difference_and_the_note():
    table = summaries.paired_table(summaries.paired_differences(problems(), "GRPO", PROFILE))
    assert list(table.index) == ["PSN - GRPO", "one seed - GRPO"]
    assert list(table.columns) == ["pass@1", "pass@2", "seeds", "note"]
    # pass@2: means over seeds 40/72 and 37/72, difference 3/72 = +4.17 points, sd 4.17,
    # interval 4.17 -/+ 4.303 * 4.17 / sqrt(3) = [-6.18, +14.52]
    assert table.loc["PSN - GRPO", "pass@2"] == "55.6 - 51.4 = +4.2 [-6.2, +14.5]"
    assert table.loc["one seed - GRPO", "pass@1"] == "25.0 - 25.0 = +0.0"
    assert table.loc["one seed - GRPO", "note"] == summaries.ONE_SEED
    assert table.loc["PSN - GRPO", "seeds"] == 3


def test_the_paired_figure_has_a_panel_per_statistic_and_the_means(tmp_path):
    per_seed = summaries.paired_seed_differences(problems(), "GRPO", PROFILE)
    intervals = summaries.difference_intervals(per_seed)
    grid = plots.plot_paired_differences(per_seed, intervals)
    assert set(grid.axes_dict) == {"pass@1", "pass@2"}
    ax = grid.axes_dict["pass@1"]
    means = [c.get_offsets() for c in ax.collections if c.get_label() == "mean over seeds"]
    assert len(means) == 1
    assert sorted(means[0][:, 0].tolist()) == pytest.approx([0.0, 6.25])
    assert plots.save_figure(grid, tmp_path / "paired.png").stat().st_size > 0


def test_the_paired_figure_draws_the_same_dots_whatever_the_global_random_state():
    """A fresh clone's make reproduce re-makes the committed figures: seaborn's jitter comes
    from NumPy's global generator, so it is seeded for the plot and the caller's state kept."""
    per_seed = summaries.paired_seed_differences(problems(), "GRPO", PROFILE)
    intervals = summaries.difference_intervals(per_seed)

    def dots(global_seed: int) -> np.ndarray:
        np.random.seed(global_seed)
        grid = plots.plot_paired_differences(per_seed, intervals)
        ax = grid.axes_dict["pass@1"]
        strip = [c for c in ax.collections if c.get_label() != "mean over seeds"]
        plt.close(grid.figure)
        return np.concatenate([c.get_offsets() for c in strip])

    assert np.array_equal(dots(1), dots(2))
    np.random.seed(3)
    expected = np.random.uniform(size=4)
    np.random.seed(3)
    plt.close(plots.plot_paired_differences(per_seed, intervals).figure)
    assert np.array_equal(np.random.uniform(size=4), expected)  # the caller's state is back


def test_training_curves_ignore_a_tag_column_named_value(tmp_path):
    """A swept variant's tags (sweep, value) are columns of its logs; they are not metrics."""
    logs = pd.DataFrame(
        {"policy": "scope=step", "seed": 0, "sweep": "scope", "value": "step"}
        | {"step": [1, 2, 3], "entropy": [1.0, 0.9, 0.8]}
    )
    grid = plots.plot_training(logs, ["entropy"])
    assert set(grid.axes_dict) == {"entropy"}
