"""Tables derived from compare's results, on small hand-made tables with known answers."""

import numpy as np
import pandas as pd
import pytest

from psnlib.replication.analysis import summaries


def curves() -> pd.DataFrame:
    """Two policies x two seeds (base: one) x two benchmarks x k in (1, 2, 4)."""
    rows = []
    values = {
        ("base", "b1"): [0.1, 0.3, 0.6],
        ("base", "b2"): [0.0, 0.1, 0.4],
        ("GRPO", "b1"): [0.3, 0.4, 0.5],
        ("GRPO", "b2"): [0.2, 0.3, 0.35],
    }
    for (policy, bench), vals in values.items():
        for seed in (0,) if policy == "base" else (0, 1):
            for k, v in zip((1, 2, 4), vals, strict=True):
                shift = 0.1 * seed if policy == "GRPO" else 0.0
                rows.append(
                    {"policy": policy, "seed": seed, "benchmark": bench, "k": k}
                    | {"pass_at_k": v + shift, "lo": 0.0, "hi": 1.0, "seconds": 1.0}
                )
    return pd.DataFrame(rows)


def problems() -> pd.DataFrame:
    rows = []
    correct = {"GRPO": [3, 0, 1], "PSN": [2, 1, 0]}
    for policy, counts in correct.items():
        for seed in (0, 1):
            for i, c in enumerate(counts):
                rows.append(
                    {"policy": policy, "seed": seed, "benchmark": "b1", "prompt": f"p{i}"}
                    | {"numbers": [1, 2], "target": 3, "n": 4, "correct": c + seed % 2}
                    | {"diversity": 0.5 + 0.1 * seed, "step_validity": np.nan if i else 1.0}
                )
    return pd.DataFrame(rows)


def test_average_is_the_mean_over_benchmarks_per_seed():
    table = summaries.with_average(curves())
    avg = table[table.benchmark == summaries.AVERAGE].set_index(["policy", "seed", "k"])
    assert avg.loc[("GRPO", 1, 1), "pass_at_k"] == pytest.approx((0.4 + 0.3) / 2)
    assert avg.loc[("base", 0, 4), "pass_at_k"] == pytest.approx(0.5)
    assert len(avg) == 9


def test_summary_aggregates_seeds_and_keeps_ks():
    s = summaries.summarize(curves(), ks=(1, 4)).set_index(["policy", "benchmark", "k"])
    assert sorted(set(s.index.get_level_values("k"))) == [1, 4]
    assert s.loc[("GRPO", "b1", 1), "mean"] == pytest.approx(0.35)
    assert s.loc[("GRPO", "b1", 1), "seeds"] == 2
    assert s.loc[("base", "b1", 1), "seeds"] == 1 and np.isnan(s.loc[("base", "b1", 1), "sem"])


def test_metrics_table_and_headline():
    s = summaries.summarize(curves())
    metrics = summaries.passk_metrics(s)
    assert list(metrics["GRPO"]["b1"]) == ["1", "2", "4"]
    assert metrics["base"]["b2"]["4"] == pytest.approx(0.4)
    table = summaries.pass_table(s, (1, 4))
    assert list(table.index) == ["GRPO", "base"] or list(table.index) == ["base", "GRPO"]
    assert table.loc["base", "b1 pass@1"] == "10.0"  # one seed: no spread
    assert table.loc["GRPO", "b1 pass@1"].startswith("35.0 ± ")
    line = summaries.headline(s, "b1", (1, 4))
    assert "GRPO (2 seed(s)): pass@1 35.0 ± " in line and "base (1 seed(s)): pass@1 10.0" in line


def test_crossover_is_the_first_k_where_the_base_catches_up():
    table = summaries.crossover(curves(), "base", "GRPO").set_index(["benchmark", "seed"])
    assert table.loc[("b1", 0), "crossover_k"] == 4  # 0.6 >= 0.5, but 0.3 < 0.4 at k = 2
    assert table.loc[("b1", 1), "crossover_k"] == 4  # 0.6 >= 0.6
    assert np.isnan(table.loc[("b2", 1), "crossover_k"])  # 0.4 < 0.45: never within n
    assert table.loc[("b2", 0), "crossover_k"] == 4  # 0.4 >= 0.35
    assert table.loc[("b1", 0), "GRPO pass@4"] == pytest.approx(0.5)


def test_solved_only_counts_both_ways_at_the_same_seed():
    only = summaries.solved_only(problems(), "GRPO").set_index("seed")
    assert only.loc[0, "only_policy"] == 1  # p1: PSN 1, GRPO 0
    assert only.loc[0, "only_reference"] == 1  # p2: GRPO 1, PSN 0
    assert only.loc[1, "only_policy"] == 0  # seed 1 adds one correct sample everywhere
    example = summaries.solved_only_example(problems(), "PSN", "GRPO", seed=0)
    assert example["prompt"] == "p1" and (example["correct_a"], example["correct_b"]) == (1, 0)
    assert example["target"] == 3  # the problem's own columns, to show it
    assert summaries.solved_only_example(problems(), "PSN", "GRPO", seed=1) is None


def test_per_seed_means_skip_nan_and_pool_benchmarks():
    long = summaries.per_seed_means(problems(), ["solved", "diversity", "step_validity"])
    got = long.set_index(["policy", "seed", "metric"])["value"]
    assert got[("GRPO", 0, "solved")] == pytest.approx(2 / 3)
    assert got[("PSN", 1, "diversity")] == pytest.approx(0.6)
    assert got[("PSN", 0, "step_validity")] == 1.0  # NaNs skipped
    agg = summaries.response_summary(problems(), ["diversity"]).set_index("policy")
    assert agg.loc["PSN", "mean"] == pytest.approx(0.55) and agg.loc["PSN", "seeds"] == 2
    pooled = summaries.per_seed_means(problems(), ["solved"], by_benchmark=False)
    assert "benchmark" not in pooled.columns and len(pooled) == 4


def test_last_steps_average_the_tail_of_each_log():
    logs = pd.DataFrame(
        {"policy": "GRPO", "seed": 0, "step": [3, 1, 2], "entropy": [1.0, 9.0, 3.0]}
    )
    tail = summaries.last_steps(logs, ["entropy"], steps=2)
    assert tail["value"].item() == pytest.approx(2.0)
