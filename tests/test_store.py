"""Result store: config hashes, weight fingerprints, round trips, caching, resuming, bad names."""

import json
import re
import warnings

import pandas as pd
import pytest
import torch

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute.store import ResultStore, config_hash, weights_fingerprint

TABLE = pd.DataFrame(
    {
        "prompt": ["7 3 5 4->22:", "1 2->3:"],
        "numbers": [[7, 3, 5, 4], [1, 2]],
        "correct": [3, 0],
        "diversity": [0.25, float("nan")],
        "solutions": [4.0, None],
        "solved": [True, False],
    }
)


def test_config_hash_ignores_key_order_and_sees_every_value():
    a = {"run": "base", "eval": {"samples": 256, "ks": [1, 2]}, "seed": 0}
    b = {"seed": 0, "eval": {"ks": [1, 2], "samples": 256}, "run": "base"}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({**a, "seed": 1})
    assert config_hash(a) != config_hash({**a, "eval": {"samples": 256, "ks": [1, 4]}})


def test_weights_fingerprint_follows_the_weights():
    tok = build_tokenizer()
    model, same = tiny_policy("qwen2", "smoke", tok, seed=0), tiny_policy("qwen2", "smoke", tok)
    assert weights_fingerprint(model) == weights_fingerprint(same)
    assert weights_fingerprint(model) != weights_fingerprint(tiny_policy("qwen2", "smoke", tok, 1))
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[3, 5] += 1e-3  # one value, likely not sampled
    assert weights_fingerprint(model) != weights_fingerprint(same)


def test_weights_fingerprint_does_not_depend_on_the_thread_count():
    # a one-thread reproduce worker stores results that a multi-thread notebook must find; the
    # tensor is large enough (4M values) that torch splits its sums over threads
    model = torch.nn.Linear(2048, 2048)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = weights_fingerprint(model)
        torch.set_num_threads(4)
        assert weights_fingerprint(model) == one
        assert torch.get_num_threads() == 4  # the caller's setting is restored
    finally:
        torch.set_num_threads(threads)


def test_parts_round_trip_and_live_under_profile_label_and_hash(tmp_path):
    config = {"run": "base", "seed": 0}
    store = ResultStore.for_run("cpu", "base", config, root=tmp_path)
    assert store.path == tmp_path / "cpu" / f"base-{config_hash(config)}"
    assert json.loads((store.path / "config.json").read_text()) == config
    assert store.parts() == [] and store.load("countdown-l1") is None
    store.save("countdown-l1", {"problems": TABLE, "curves": TABLE[["correct"]]})
    back = store.load("countdown-l1")
    pd.testing.assert_frame_equal(back["problems"], TABLE)
    pd.testing.assert_frame_equal(back["curves"], TABLE[["correct"]])
    assert store.parts() == ["countdown-l1"]
    assert [p.name for p in store.path.iterdir() if p.name.startswith(".")] == []  # no temp files
    other = ResultStore.for_run("cpu", "base", {**config, "seed": 1}, root=tmp_path)
    assert other.path != store.path and other.parts() == []


def test_cached_computes_once_and_resumes_after_a_failure(tmp_path):
    store = ResultStore.for_run("smoke", "base", {"x": 1}, root=tmp_path)
    calls = []

    def compute(part):
        calls.append(part)
        if part == "b" and calls.count("b") == 1:
            raise RuntimeError("interrupted")
        return {"t": TABLE.assign(part=part)}

    store.cached("a", lambda: compute("a"))
    with pytest.raises(RuntimeError, match="interrupted"):
        store.cached("b", lambda: compute("b"))
    assert store.parts() == ["a"]  # the failed part left nothing behind
    again = ResultStore.for_run("smoke", "base", {"x": 1}, root=tmp_path)
    tables = {p: again.cached(p, lambda p=p: compute(p)) for p in ("a", "b")}
    assert calls == ["a", "b", "b"]  # "a" was loaded, "b" computed once more
    assert tables["b"]["t"]["part"].tolist() == ["b", "b"] and again.parts() == ["a", "b"]


@pytest.mark.parametrize(
    ("profile", "label", "part"),
    [("cpu", "../up", "a"), ("cpu/x", "base", "a"), ("cpu", "base", "a b"), ("", "base", "a")],
)
def test_bad_names(tmp_path, profile, label, part):
    with pytest.raises(ValueError, match="must be a file-safe name"):
        ResultStore.for_run(profile, label, {}, root=tmp_path).part_path(part)


# ------------------------------------------------------------- valid JSON, wrong content
# An evaluation part must hold "problems" and "curves" (evaluation.evaluate_benchmarks), each with
# the columns its readers use and at least one row; a part that parses but lacks one is named in
# one warning and recomputed, never used (issue 39: ``{"tables": {}}`` dropped a benchmark from
# GRPO's average without a word).
REQUIRED = {"problems": ("n", "correct"), "curves": ("k", "pass_at_k")}
GOOD = {
    "problems": pd.DataFrame({"n": [4, 4], "correct": [1, 0]}),
    "curves": pd.DataFrame({"k": [1, 2], "pass_at_k": [0.125, 0.25]}),
}
SHORT = [
    ({}, r"no table 'problems'; no table 'curves'"),
    ({"problems": GOOD["problems"]}, r"no table 'curves'"),
    ({**GOOD, "problems": GOOD["problems"][["n"]]}, r"table 'problems' has no column 'correct'"),
    ({**GOOD, "curves": GOOD["curves"].iloc[:0]}, r"table 'curves' has no rows"),
]


@pytest.mark.parametrize(("tables", "what"), SHORT, ids=["empty", "table", "column", "rows"])
def test_a_part_lacking_what_is_required_is_named_once_and_recomputed(tmp_path, tables, what):
    store = ResultStore(tmp_path)
    store.save("countdown-l1", tables)
    path = re.escape(str(store.part_path("countdown-l1")))
    calls = []

    def compute():
        calls.append(1)
        return GOOD

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = store.cached("countdown-l1", compute, required=REQUIRED)
    assert len(caught) == 1, [str(w.message) for w in caught]  # one warning, naming both
    assert re.search(rf"{path}: {what}", str(caught[0].message)), str(caught[0].message)
    assert calls == [1]  # recomputed, never used
    pd.testing.assert_frame_equal(got["problems"], GOOD["problems"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stored again, whole: loaded without a word
        again = store.cached("countdown-l1", compute, required=REQUIRED)
    assert calls == [1]
    pd.testing.assert_frame_equal(again["curves"], GOOD["curves"])


def test_required_table_names_need_the_tables_with_rows_and_nothing_required_is_as_before(
    tmp_path,
):
    store = ResultStore(tmp_path)
    store.save("noise", {"problems": GOOD["problems"], "time": pd.DataFrame(columns=["seconds"])})
    with pytest.warns(UserWarning, match=r"noise\.json: table 'time' has no rows"):
        assert store.load("noise", required=("problems", "time")) is None
    with pytest.warns(UserWarning, match=r"noise\.json: no table 'result'"):
        assert store.load("noise", required=["problems", "result"]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.load("noise", required=("problems",))["problems"]["n"].tolist() == [4, 4]
        assert list(store.load("noise")) == ["problems", "time"]  # the default takes any tables
        store.save("empty", {})
        assert store.load("empty") == {}
    with pytest.raises(TypeError, match="got the string 'problems'"):
        store.load("noise", required="problems")  # not the table names p, r, o, ...


def test_computed_tables_lacking_what_is_required_are_an_error_and_not_saved(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(ValueError, match=r"computed result part 'l1' .*: no table 'curves'"):
        store.cached("l1", lambda: {"problems": GOOD["problems"]}, required=REQUIRED)
    assert store.parts() == []


@pytest.mark.parametrize("stored", [{"tables": []}, {"tables": "x"}])
def test_a_part_whose_tables_are_not_a_mapping_is_damaged_and_recomputed(tmp_path, stored):
    store = ResultStore(tmp_path)
    store.part_path("l1").parent.mkdir(parents=True, exist_ok=True)
    store.part_path("l1").write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match=rf"damaged result part {re.escape(str(tmp_path))}"):
        got = store.cached("l1", lambda: GOOD)
    assert list(got) == ["problems", "curves"]
    assert store.load("l1")["curves"]["k"].tolist() == [1, 2]  # stored again, whole
