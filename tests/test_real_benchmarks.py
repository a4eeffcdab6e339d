"""Real benchmark loaders on fixture files in each hub data set's format, and the math reward."""

from __future__ import annotations

import json
import threading

import pandas as pd
import pytest

from psnlib.tasks.math_reward import choice_letter, last_boxed, math_reward
from psnlib.tasks.real import (
    BOXED_INSTRUCTION,
    REAL_BENCHMARKS,
    load_real_benchmark,
    real_benchmark_names,
)

# Rows in each hub data set's own field names (only the fields that matter), and the file
# format the hub stores it in.
FIXTURES: dict[str, tuple[str, list[dict]]] = {
    "aime24": (
        "parquet",
        [
            {"ID": "2024-I-1", "Problem": "Find $x$.", "Solution": "...", "Answer": 204},
            {"ID": "2024-I-2", "Problem": "Find $y$.", "Solution": "...", "Answer": 25},
        ],
    ),
    "aime25": (
        "jsonl",
        [{"problem": "Compute $a$.", "answer": "70", "id": "0"}],
    ),
    "amc23": (
        "parquet",
        [{"id": 7, "question": "What is $1+1$?", "answer": 2.0, "url": "https://aops/2023"}],
    ),
    "math500": (
        "jsonl",
        [
            {
                "problem": "Simplify $\\frac{2}{4}$.",
                "solution": "...",
                "answer": "\\frac{1}{2}",
                "subject": "Algebra",
                "level": 1,
                "unique_id": "test/algebra/1.json",
            }
        ],
    ),
    "minerva": (
        "jsonl",
        [{"question": "Speed of light in m/s?", "answer": "3e8"}],
    ),
    "olympiadbench": (
        "parquet",
        [
            {
                "id": 2231,
                "question": "Find all $n$.",
                "solution": ["..."],
                "final_answer": ["1", "2"],
                "language": "English",
            }
        ],
    ),
    "gpqa-diamond": (
        "csv",
        [
            {
                "Record ID": f"rec{i}",
                "Question": f"Question {i}?",
                "Correct Answer": f"right {i}",
                "Incorrect Answer 1": f"wrong {i}a",
                "Incorrect Answer 2": f"wrong {i}b",
                "Incorrect Answer 3": f"wrong {i}c",
            }
            for i in range(8)
        ],
    ),
    "simplerl-math-l3to5": (
        "parquet",
        [{"question": "Solve $2x=6$.", "gt_answer": "3", "level": "Level 3"}],
    ),
}


def write_fixture(directory, fmt: str, rows: list[dict]):
    path = directory / f"data.{fmt}"
    if fmt == "parquet":
        pd.DataFrame(rows).to_parquet(path)
    elif fmt == "csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_loader_produces_testbed_columns(tmp_path, name):
    fmt, rows = FIXTURES[name]
    ds = load_real_benchmark(name, data_files=write_fixture(tmp_path, fmt, rows))
    assert ds.column_names == ["prompt", "answer", "id", "answer_type"]
    assert len(ds) == len(rows)
    spec = REAL_BENCHMARKS[name]
    for out, raw in zip(ds, rows, strict=True):
        assert str(raw[spec.question_field]) in out["prompt"]
        assert "\\boxed{}" in out["prompt"]
        assert isinstance(out["answer"], str) and out["answer"]
        assert isinstance(out["id"], str) and out["id"]


def test_field_values_are_mapped(tmp_path):
    aime = load_real_benchmark("aime24", data_files=write_fixture(tmp_path, *FIXTURES["aime24"]))
    assert aime["answer"] == ["204", "25"] and aime["id"] == ["2024-I-1", "2024-I-2"]
    assert aime[0]["prompt"] == f"Find $x$.\n\n{BOXED_INSTRUCTION}"
    amc = load_real_benchmark("amc23", data_files=write_fixture(tmp_path, *FIXTURES["amc23"]))
    assert amc["answer"] == ["2"] and amc["id"] == ["7"]  # the data set's id column
    olymp = load_real_benchmark(
        "olympiadbench", data_files=write_fixture(tmp_path, *FIXTURES["olympiadbench"])
    )
    assert olymp["answer"] == ["1, 2"] and olymp["id"] == ["2231"]


def test_simplerl_rows_load_in_both_layouts(tmp_path):
    """SimpleRL-Zoo's own fields (question / gt_answer) and verl's (a chat prompt, the answer
    in reward_model.ground_truth) give the same problem; verl's user message, which already asks
    for the boxed answer, is kept as it is."""
    ask = "Solve $2x=6$."
    verl = [
        {
            "data_source": "simplelr_math",
            "prompt": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": f"{ask}\n{BOXED_INSTRUCTION}"},
            ],
            "reward_model": {"style": "rule", "ground_truth": "3"},
            "extra_info": {"index": 0},
        }
    ]
    own = load_real_benchmark(
        "simplerl-math-l3to5", data_files=write_fixture(tmp_path, *FIXTURES["simplerl-math-l3to5"])
    )
    (tmp_path / "verl").mkdir()
    other = load_real_benchmark(
        "simplerl-math-l3to5", data_files=write_fixture(tmp_path / "verl", "parquet", verl)
    )
    assert own["answer"] == other["answer"] == ["3"] and own["id"] == other["id"]
    assert own[0]["prompt"] == f"{ask}\n\n{BOXED_INSTRUCTION}"
    assert other[0]["prompt"] == f"{ask}\n{BOXED_INSTRUCTION}"  # the user message, verbatim
    with pytest.raises(ValueError, match=r"'question' \(or any layout of .*'prompt'"):
        load_real_benchmark(
            "simplerl-math-l3to5", data_files=write_fixture(tmp_path, "jsonl", [{"q": "1"}])
        )


def test_olympiadbench_context_comes_before_the_question(tmp_path):
    fmt, rows = FIXTURES["olympiadbench"]
    rows = [
        {**rows[0], "context": "A sequence has $a_1 = 1$."},
        {**rows[0], "id": 2232, "context": None},
    ]
    ds = load_real_benchmark("olympiadbench", data_files=write_fixture(tmp_path, fmt, rows))
    assert ds[0]["prompt"] == f"A sequence has $a_1 = 1$.\n\nFind all $n$.\n\n{BOXED_INSTRUCTION}"
    assert ds[1]["prompt"] == f"Find all $n$.\n\n{BOXED_INSTRUCTION}"


def test_local_directory_and_subset(tmp_path):
    fmt, rows = FIXTURES["gpqa-diamond"]
    write_fixture(tmp_path, fmt, rows)
    full = load_real_benchmark("gpqa-diamond", data_files=tmp_path)
    assert len(full) == 8
    sub = load_real_benchmark("gpqa-diamond", n=3, data_files=tmp_path, seed=1)
    assert len(sub) == 3 and set(sub["id"]) <= set(full["id"])
    assert sub["id"] == load_real_benchmark("gpqa-diamond", n=3, data_files=tmp_path, seed=1)["id"]
    with pytest.raises(ValueError, match="n=9"):
        load_real_benchmark("gpqa-diamond", n=9, data_files=tmp_path)


def test_gpqa_options_are_shuffled_reproducibly(tmp_path):
    path = write_fixture(tmp_path, *FIXTURES["gpqa-diamond"])
    a = load_real_benchmark("gpqa-diamond", data_files=path, seed=0)
    b = load_real_benchmark("gpqa-diamond", data_files=path, seed=0)
    assert a.to_list() == b.to_list()
    assert set(a["answer_type"]) == {"choice"}
    for row in a:
        i = row["id"].removeprefix("rec")
        assert f"{row['answer']}) right {i}\n" in row["prompt"]
        for letter in "ABCD":
            assert f"\n{letter}) " in row["prompt"]
    assert len(set(a["answer"])) > 1  # the correct option is not always in one place
    c = load_real_benchmark("gpqa-diamond", data_files=path, seed=7)
    assert c["prompt"] != a["prompt"]


@pytest.mark.parametrize(
    ("name", "renamed"),
    [("math500", "answer"), ("aime24", "Problem"), ("gpqa-diamond", "Incorrect Answer 2")],
)
def test_renamed_field_names_data_set_and_field(tmp_path, name, renamed):
    fmt, rows = FIXTURES[name]
    rows = [{(k + "_v2" if k == renamed else k): v for k, v in r.items()} for r in rows]
    with pytest.raises(ValueError) as err:
        load_real_benchmark(name, data_files=write_fixture(tmp_path, fmt, rows))
    message = str(err.value)
    assert REAL_BENCHMARKS[name].title in message and REAL_BENCHMARKS[name].hub_id in message
    assert repr(renamed) in message and f"{renamed}_v2" in message


def test_unknown_benchmark_lists_known_names():
    with pytest.raises(KeyError) as err:
        load_real_benchmark("aime2099")
    for name in ("aime24", "math500", "gpqa-diamond"):
        assert name in str(err.value)


def test_livecodebench_is_out_of_scope():
    assert "livecodebench" in real_benchmark_names("ood")
    with pytest.raises(NotImplementedError, match="sandbox"):
        load_real_benchmark("livecodebench")


def test_registry_documents_every_benchmark():
    assert set(real_benchmark_names("eval")) == {
        "aime24",
        "aime25",
        "amc23",
        "math500",
        "minerva",
        "olympiadbench",
    }
    assert real_benchmark_names("train") == ["simplerl-math-l3to5"]
    for spec in REAL_BENCHMARKS.values():
        assert "/" in spec.hub_id and spec.split and spec.question_field and spec.answer_field


# The math reward.


@pytest.mark.parametrize(
    ("gold", "completion", "expected"),
    [
        ("204", "so the answer is \\boxed{204}.", 1.0),
        ("204", "first \\boxed{12}, then corrected: \\boxed{204}", 1.0),
        ("204", "first \\boxed{204}, then corrected: \\boxed{12}", 0.0),
        ("\\frac{1}{2}", "\\boxed{0.5}", 1.0),
        ("0.5", "\\boxed{\\frac{1}{2}}", 1.0),
        ("\\frac{1}{2}", "\\boxed{\\dfrac12}", 1.0),
        ("2\\sqrt{2}", "\\boxed{\\sqrt{8}}", 1.0),
        ("2\\sqrt{2}", "\\boxed{\\sqrt{6}}", 0.0),
        ("70", "\\boxed{71}", 0.0),
        ("70", "The answer is 70.", 0.0),  # no boxed answer
        ("x+1", "\\boxed{1 + x}", 1.0),
        # gold answers in text mode, as the data sets write them (issue 20): wrapped as a boxed
        # answer before parsing
        ("\\$18.90", "\\boxed{18.90}", 1.0),
        ("\\$18.90", "\\boxed{\\$18.90}", 1.0),
        ("\\$18.90", "\\boxed{18.91}", 0.0),
        ("$\\frac{3}{4}$", "\\boxed{\\frac34}", 1.0),
        ("\\frac{3}{4}", "\\boxed{0.75}", 1.0),
        ("3\\sqrt{3}", "\\boxed{\\sqrt{27}}", 1.0),
        ("\\sqrt{2}/2", "\\boxed{\\frac{\\sqrt2}{2}}", 1.0),
        ("(2, -1)", "\\boxed{(2,-1)}", 1.0),
        ("(2, -1)", "\\boxed{(-1,2)}", 0.0),
        ("[0, 1)", "\\boxed{[0,1)}", 1.0),
        ("(0, 1]", "\\boxed{(0,1)}", 0.0),
        ("(-\\infty, 3]", "\\boxed{(-\\infty,3]}", 1.0),
        ("\\boxed{7}", "\\boxed{7}", 1.0),
    ],
)
def test_math_reward_known_answers(gold, completion, expected):
    assert math_reward([completion], [gold]) == [expected]


def test_math_reward_conversations_prefix_and_types():
    conv = [{"role": "assistant", "content": "\\boxed{3}"}]
    assert math_reward([conv], ["3"]) == [1.0]
    assert math_reward(["{3}"], ["3"], prefix=["\\boxed"]) == [1.0]
    out = math_reward(
        ["\\boxed{B}", "\\boxed{\\text{(C)}}", "The answer is D", "\\boxed{A}"],
        ["B", "C", "D", "B"],
        answer_type=["choice"] * 4,
    )
    assert out == [1.0, 1.0, 1.0, 0.0]
    # Without an answer_type column a single-letter gold is multiple choice.
    assert math_reward(["\\boxed{(A)}", "\\boxed{C}"], ["A", "A"]) == [1.0, 0.0]


def test_math_reward_on_loaded_gpqa_rows(tmp_path):
    ds = load_real_benchmark(
        "gpqa-diamond", data_files=write_fixture(tmp_path, *FIXTURES["gpqa-diamond"])
    )
    right = [f"\\boxed{{{a}}}" for a in ds["answer"]]
    wrong = [f"\\boxed{{{'A' if a != 'A' else 'B'}}}" for a in ds["answer"]]
    assert math_reward(right, ds["answer"], answer_type=ds["answer_type"]) == [1.0] * len(ds)
    assert math_reward(wrong, ds["answer"], answer_type=ds["answer_type"]) == [0.0] * len(ds)


def test_math_reward_mismatched_lengths():
    with pytest.raises(ValueError, match="completions=2, answer=1"):
        math_reward(["\\boxed{1}", "\\boxed{2}"], ["1"])
    with pytest.raises(ValueError, match="answer_type=1"):
        math_reward(["\\boxed{1}", "\\boxed{2}"], ["1", "2"], answer_type=["math"])
    with pytest.raises(ValueError, match="answer_type"):
        math_reward(["\\boxed{1}"], ["1"], answer_type=["code"])


def test_math_reward_outside_main_thread():
    result = []
    thread = threading.Thread(target=lambda: result.extend(math_reward(["\\boxed{0.5}"], ["1/2"])))
    thread.start()
    thread.join()
    assert result == [1.0]


def test_boxed_and_letter_extraction():
    assert last_boxed("\\boxed{\\frac{1}{2}} and \\boxed{x^{2}}") == "x^{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed") is None
    assert choice_letter("\\boxed{\\text{B}}") == "B"
    assert choice_letter("\\boxed{42}") is None


@pytest.mark.parametrize("name", ["olympiadbench", "simplerl-math-l3to5", "math500"])
def test_hub_path_asks_for_the_registered_id_config_and_split(monkeypatch, name):
    import datasets

    import psnlib.tasks.real as real

    calls = []
    rows = FIXTURES[name][1]

    def fake_load_dataset(path, name=None, **kwargs):
        calls.append((path, name, kwargs))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(real, "load_dataset", fake_load_dataset)
    ds = load_real_benchmark(name)
    spec = REAL_BENCHMARKS[name]
    expected = {"split": spec.split}
    if spec.hub_data_files:
        expected["data_files"] = {spec.split: spec.hub_data_files}
    assert calls == [(spec.hub_id, spec.config, expected)]
    assert len(ds) == len(rows)
