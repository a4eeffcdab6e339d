"""Tokenizer and tiny-policy round trips, and clear errors for bad names and paths."""

import pytest
import torch

from psnlib.models import (
    TINY_SIZES,
    build_tokenizer,
    count_parameters,
    load_policy,
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
