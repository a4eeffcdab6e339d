"""Splits: disjointness by hash slot, reproducibility, difficulty levels, SFT corpus."""

import statistics

import pytest

from psnlib.tasks.countdown import Problem, count_solutions, distinct_solutions, is_linear, verify
from psnlib.tasks.generate import generate_problems
from psnlib.tasks.splits import (
    BENCHMARKS,
    FIVE_SLOTS,
    ID_SLOTS,
    MAIN_BENCHMARK,
    RL_SLOTS,
    SFT_SLOTS,
    TUNE_EXCLUDED,
    difficulty_level,
    load_benchmark,
    problem_slot,
    rl_train_set,
    sft_corpus,
)


def keys(dataset):
    return {Problem(tuple(r["numbers"]), r["target"]).key for r in dataset}


def slots_of(dataset):
    return {problem_slot(k) for k in keys(dataset)}


def test_slot_is_stable_across_processes():
    assert problem_slot(((3, 4, 5, 7), 22)) == 778
    assert problem_slot(((1, 1, 1, 1), 4)) == 123


def test_registry():
    assert set(BENCHMARKS) == {f"countdown-l{i}" for i in range(1, 6)} | {
        "countdown-div",
        "countdown-5num",
    } | {f"countdown-l{i}-tune" for i in range(1, 6)}
    assert MAIN_BENCHMARK == "countdown-l3" and BENCHMARKS[MAIN_BENCHMARK].role == "OlympiadBench"
    roles = [BENCHMARKS[f"countdown-l{i}"].role for i in range(1, 6)]
    assert roles == ["AMC23", "Minerva", "OlympiadBench", "AIME25", "AIME24"]
    assert {s.kind for s in BENCHMARKS.values()} == {"id", "ood", "tune"}
    assert BENCHMARKS["countdown-div"].role == "GPQA-Diamond"
    assert BENCHMARKS["countdown-5num"].role == "LiveCodeBench"
    ranges = [SFT_SLOTS, RL_SLOTS, *{s.slots for s in BENCHMARKS.values()}]
    covered = [slot for lo, hi in ranges for slot in range(lo, hi)]
    assert len(covered) == len(set(covered)) == 1000


def test_all_splits_are_pairwise_disjoint():
    """Every pair of splits, each drawn with two seeds, shares no problem key (a tuning benchmark
    against the evaluation stream of its reported level, seed 0: test below)."""
    splits = {
        name: keys(load_benchmark(name, 30)) | keys(load_benchmark(name, 30, seed=1))
        for name in BENCHMARKS
        if BENCHMARKS[name].kind != "tune"
    }
    splits["rl"] = keys(rl_train_set(300)) | keys(rl_train_set(300, seed=5))
    splits["sft"] = keys(sft_corpus(1000)) | keys(sft_corpus(300, seed=2, style="linear"))
    for a, keys_a in splits.items():
        for b, keys_b in splits.items():
            assert a == b or not keys_a & keys_b, (a, b)


@pytest.mark.parametrize("level", [1, 3, 5])
def test_a_tuning_benchmark_is_its_level_without_any_problem_a_reported_evaluation_draws(level):
    tune = load_benchmark(f"countdown-l{level}-tune", 100)
    assert set(tune["benchmark"]) == {f"countdown-l{level}-tune"}
    problems = [Problem(tuple(n), t) for n, t in zip(tune["numbers"], tune["target"], strict=True)]
    assert {difficulty_level(p) for p in problems} == {level}
    assert all(ID_SLOTS[0] <= problem_slot(p.key) < ID_SLOTS[1] for p in problems)
    reported = keys(load_benchmark(f"countdown-l{level}", TUNE_EXCLUDED))  # evaluations: seed 0
    assert not keys(tune) & reported and len(keys(tune)) == 100
    other_seed = keys(load_benchmark(f"countdown-l{level}-tune", 100, seed=1))
    assert not other_seed & reported and other_seed != keys(tune)


def test_splits_stay_in_their_slots_and_are_reproducible():
    assert all(RL_SLOTS[0] <= s < RL_SLOTS[1] for s in slots_of(rl_train_set(200)))
    assert all(SFT_SLOTS[0] <= s < SFT_SLOTS[1] for s in slots_of(sft_corpus(300)))
    assert all(
        FIVE_SLOTS[0] <= s < FIVE_SLOTS[1] for s in slots_of(load_benchmark("countdown-5num", 30))
    )
    for make in (
        lambda seed: load_benchmark(MAIN_BENCHMARK, 50, seed=seed),
        lambda seed: rl_train_set(100, seed=seed),
        lambda seed: sft_corpus(200, seed=seed),
    ):
        assert make(3).to_dict() == make(3).to_dict()
        assert make(3).to_dict() != make(4).to_dict()


def test_columns():
    bench = load_benchmark("countdown-div", 5)
    assert bench.column_names == ["prompt", "numbers", "target", "benchmark"]
    row = bench[0]
    assert row["prompt"] == Problem(tuple(row["numbers"]), row["target"]).prompt
    assert row["benchmark"] == "countdown-div"
    assert rl_train_set(3).column_names == bench.column_names
    assert sft_corpus(3).column_names == ["prompt", "completion", "numbers", "target"]
    assert len(load_benchmark("countdown-l1", 0)) == 0


def test_levels_are_graded_and_benchmarks_match_their_spec():
    mean_solutions = []
    for level in range(1, 6):
        bench = load_benchmark(f"countdown-l{level}", 40)
        problems = [Problem(tuple(r["numbers"]), r["target"]) for r in bench]
        assert all(difficulty_level(p) == level for p in problems)
        assert all(len(p.numbers) == 4 and 1 <= p.target <= 99 for p in problems)
        mean_solutions.append(statistics.mean(distinct_solutions(p) for p in problems))
    assert mean_solutions == sorted(mean_solutions, reverse=True)
    assert mean_solutions[0] > 3 * mean_solutions[-1]
    for r in load_benchmark("countdown-div", 30):
        problem = Problem(tuple(r["numbers"]), r["target"])
        assert count_solutions(problem, "+-*") == 0 < count_solutions(problem, "+-*/")
    assert all(len(r["numbers"]) == 5 for r in load_benchmark("countdown-5num", 30))


def test_level_thresholds_give_roughly_equal_shares():
    problems = generate_problems(1500, seed=2024)  # the RL distribution
    levels = [difficulty_level(p) for p in problems]
    shares = [levels.count(level) / len(levels) for level in range(1, 6)]
    assert all(0.13 < share < 0.28 for share in shares), shares


def test_sft_corpus_mix_styles_and_pool():
    corpus = sft_corpus(1000, seed=1)
    five = [r for r in corpus if len(r["numbers"]) == 5]
    div = [r for r in corpus if len(r["numbers"]) == 4 and "/" in r["completion"]]
    assert len(five) == len(div) == 100
    for r in corpus:
        assert verify(Problem(tuple(r["numbers"]), r["target"]), r["completion"]).correct
    linear = sft_corpus(300, seed=1, style="linear", mix={"main": 1, "5num": 1})
    assert all(is_linear(r["completion"]) for r in linear)
    assert sum(len(r["numbers"]) == 5 for r in linear) == 150
    pooled = sft_corpus(100, mix={"main": 1.0}, pool_cap=10)
    assert len(set(pooled["prompt"])) == 10 and len(set(pooled["completion"])) > 10


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="countdown-l1.*countdown-l5"):
        load_benchmark("aime24", 10)
    with pytest.raises(ValueError, match="style='greedy'"):
        sft_corpus(10, style="greedy")
    with pytest.raises(ValueError, match="mix=.*code"):
        sft_corpus(10, mix={"main": 1.0, "code": 0.5})
    with pytest.raises(ValueError, match="n=-1"):
        rl_train_set(-1)
