"""Result store: config hashes, weight fingerprints, round trips, caching, resuming, bad names."""

import json

import pandas as pd
import pytest
import torch

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.store import ResultStore, config_hash, weights_fingerprint

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
