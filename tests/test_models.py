"""Tokenizer and tiny-policy round trips, and clear errors for bad names and paths."""

import json

import pytest
import torch

from psnlib.cache import Damaged
from psnlib.models import (
    TINY_SIZES,
    build_tokenizer,
    check_saved_policy,
    count_parameters,
    load_policy,
    load_saved_policy,
    save_policy,
    tiny_policy,
)
from psnlib.tasks.countdown import CHARSET


def test_tokenizer_is_one_token_per_character():
    tok = build_tokenizer()
    text = "7 3 5 4->22:7*3=21,21+5=26,26-4=22"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert len(tok) == len(CHARSET) + 4  # <pad> <bos> <eos> <unk>
    eos = tok.eos_token_id
    assert tok.decode([*ids, eos, tok.pad_token_id], skip_special_tokens=True) == text


def test_tokenizer_save_reload_roundtrip(tmp_path):
    tok = build_tokenizer()
    tok.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    again = AutoTokenizer.from_pretrained(tmp_path)
    text = "12 9 1 1->99:12*9=108,108-9=99"
    assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert again.decode(again(text)["input_ids"]) == text
    assert (again.pad_token_id, again.eos_token_id) == (tok.pad_token_id, tok.eos_token_id)
    assert again.padding_side == "left"


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_policy_save_load_roundtrip(tmp_path, family):
    tok = build_tokenizer()
    model = tiny_policy(family, "smoke", tok, seed=3)
    save_policy(model, tok, tmp_path / "p", meta={"hello": 1})
    loaded, tok2 = load_policy(tmp_path / "p", dtype=torch.float32)
    assert type(loaded) is type(model)
    for (n1, p1), (n2, p2) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert n1 == n2 and torch.equal(p1, p2)
    x = torch.tensor([tok("3 4->7:", add_special_tokens=False)["input_ids"]])
    torch.testing.assert_close(model(x).logits, loaded(x).logits, rtol=0, atol=0)
    assert tok2.get_vocab() == tok.get_vocab()
    text = "12 9 1 1->99:12*9=108,108-9=99"  # spaces matter: a family tokenizer would drop them
    assert tok2(text)["input_ids"] == tok(text)["input_ids"]
    assert tok2.decode(tok2(text)["input_ids"]) == text


def test_tiny_policy_deterministic_and_sized():
    a, b = tiny_policy("qwen2", "base", seed=0), tiny_policy("qwen2", "base", seed=0)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    c = tiny_policy("qwen2", "base", seed=1)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))
    assert 0.9e6 < count_parameters(a) < 1.2e6  # the DESIGN's ~1.05M reference model
    assert count_parameters(tiny_policy("llama", "weak")) < count_parameters(a)
    assert set(TINY_SIZES) >= {"smoke", "weak", "base", "large"}


def test_bad_names_and_paths(tmp_path):
    with pytest.raises(ValueError, match=r"unknown model family 'gpt2'.*allowed.*llama"):
        tiny_policy("gpt2")
    with pytest.raises(ValueError, match=r"unknown tiny model size 'huge'"):
        tiny_policy("qwen2", "huge")
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ValueError, match="is not a model directory"):
        load_policy(tmp_path)
    with pytest.raises(ValueError, match="is a file"):
        load_policy(tmp_path / "notes.txt")
    with pytest.raises(ValueError, match="neither an existing directory nor a hub id"):
        load_policy(tmp_path / "missing" / "ckpt")


@pytest.fixture
def saved(tmp_path):
    tok = build_tokenizer()
    return save_policy(tiny_policy(size="smoke", tokenizer=tok), tok, tmp_path / "p", meta={})


def test_a_whole_saved_policy_passes_the_check_and_loads(saved):
    check_saved_policy(saved)
    model, _ = load_saved_policy(saved)
    assert next(model.parameters()).dtype == torch.float32


@pytest.mark.parametrize(
    ("name", "keep", "error"),
    [  # keep: how many of the file's n bytes are left; None: the file is gone
        ("model.safetensors", lambda n: n - 100, r"model.safetensors is \d+ bytes where its"),
        ("model.safetensors", lambda n: 50, "model.safetensors is truncated: 50 bytes, shorter"),
        ("model.safetensors", lambda n: 3, "model.safetensors is truncated: 3 bytes"),
        ("config.json", lambda n: n // 2, "config.json does not parse"),
        ("tokenizer.json", lambda n: n // 2, "tokenizer.json does not parse"),
        ("config.json", None, "config.json is missing"),
        ("tokenizer_config.json", None, "tokenizer_config.json is missing"),
    ],
)
def test_a_truncated_or_missing_file_is_damage(saved, name, keep, error):
    data = (saved / name).read_bytes()
    (saved / name).unlink()
    if keep is not None:
        (saved / name).write_bytes(data[: keep(len(data))])
    with pytest.raises(Damaged, match=error):
        check_saved_policy(saved)
    with pytest.raises(Damaged, match=error):
        load_saved_policy(saved)


def test_no_weights_or_a_missing_shard_is_damage(saved):
    index = {"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}}
    (saved / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(Damaged, match="model-00002-of-00002.safetensors, a shard of .* missing"):
        check_saved_policy(saved)
    (saved / "model.safetensors.index.json").unlink()
    (saved / "model.safetensors").unlink()
    with pytest.raises(Damaged, match="holds no \\*.safetensors weights"):
        check_saved_policy(saved)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_policy_with_a_non_finite_weight_is_never_saved(tmp_path, bad):
    tok = build_tokenizer()
    model = tiny_policy(size="smoke", tokenizer=tok)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[3, 5] = bad
    with pytest.raises(ValueError, match=r"refusing to save the policy .*/p: its model.layers.1"):
        save_policy(model, tok, tmp_path / "p")
    assert list(tmp_path.iterdir()) == []
