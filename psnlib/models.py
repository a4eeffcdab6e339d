"""Tokenizer and policies: tiny ``transformers`` models here, real ones by hub name elsewhere.

The CPU testbed uses a character tokenizer (one token per character of the Countdown alphabet)
and ~1M-parameter Qwen2 / Llama models. Everything is a stock ``transformers`` object, so the same
``load_policy(name_or_path)`` call loads a hub model for a GPU user and a local directory here, and
TRL's trainers accept the result unchanged.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from psnlib.cache import Damaged, load_json
from psnlib.io import atomic_save, atomic_write_json
from psnlib.tasks.countdown import CHARSET

META_FILE = "psnlib_meta.json"  # how a policy was built (written beside the weights)
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")  # "gpt2", "Qwen/Qwen2.5-Math-7B"


def build_tokenizer(charset: str = CHARSET) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: ids 0-3 are <pad>, <bos>, <eos>, <unk>, then one per char.

    No special token is added on encoding: a prompt such as ``7 3 5 4->22:`` is exactly its
    characters, and generation stops at <eos>. Padding is on the left, as generation wants.
    """
    if len(set(charset)) != len(charset) or not charset:
        raise ValueError(f"charset must be non-empty with distinct characters, got {charset!r}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({ch: len(SPECIAL_TOKENS) + i for i, ch in enumerate(charset)})
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one per char
    backend.decoder = decoders.Fuse()  # join characters back without separators
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=256,
    )


@dataclass(frozen=True)
class TinySize:
    """Shape of a tiny policy."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int


# "base" is the reference testbed model (~1.05M parameters with the Qwen2 family);
# "weak" is the prefix writer; "large" is the "does it work at a larger size" model.
TINY_SIZES: dict[str, TinySize] = {
    "smoke": TinySize(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    ),
    "weak": TinySize(
        hidden_size=96, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256
    ),
    "base": TinySize(
        hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512
    ),
    "large": TinySize(
        hidden_size=192, num_hidden_layers=6, num_attention_heads=6, intermediate_size=768
    ),
}
FAMILIES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}


def tiny_policy(
    family: str = "qwen2",
    size: str = "base",
    tokenizer: PreTrainedTokenizerBase | None = None,
    seed: int = 0,
    max_positions: int = 128,
) -> PreTrainedModel:
    """A randomly initialised tiny causal LM of a ``transformers`` family, deterministic in seed."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; allowed: {sorted(FAMILIES)}")
    if size not in TINY_SIZES:
        raise ValueError(f"unknown tiny model size {size!r}; allowed: {sorted(TINY_SIZES)}")
    tokenizer = tokenizer or build_tokenizer()
    shape = TINY_SIZES[size]
    config_cls, model_cls = FAMILIES[family]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_attention_heads,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def load_policy(
    name_or_path: str | os.PathLike, dtype: torch.dtype | str = "auto", **kwargs
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` from a local directory or, for users with the hub, a hub id.

    A local path that exists but holds no model is an error here, before anything is downloaded.
    """
    path = Path(name_or_path)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"policy path {str(path)!r} is a file; pass a model directory")
        weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
        if not (path / "config.json").exists() or not weights:
            raise ValueError(
                f"{str(path)!r} is not a model directory: it needs config.json and *.safetensors "
                f"weights (found: {sorted(p.name for p in path.iterdir())[:10]})"
            )
    elif not HUB_ID.fullmatch(str(name_or_path)):
        raise ValueError(
            f"policy {str(name_or_path)!r} is neither an existing directory nor a hub id 'org/name'"
        )
    tokenizer = _load_tokenizer(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _load_tokenizer(name_or_path: str | os.PathLike) -> PreTrainedTokenizerBase:
    """``AutoTokenizer``, except for a plain ``tokenizer.json`` tokenizer saved locally.

    transformers 5 maps a saved plain tokenizer (class ``TokenizersBackend``) to the model
    family's own tokenizer class (``Qwen2Tokenizer`` for a Qwen2 config), which rebuilds the
    pre-tokenizer and silently drops our character tokenizer's spaces. Load those files as they are.
    """
    config = Path(name_or_path) / "tokenizer_config.json"
    if config.exists():
        declared = json.loads(config.read_text()).get("tokenizer_class")
        if declared in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(name_or_path)
    return AutoTokenizer.from_pretrained(name_or_path)


def check_saved_policy(path: str | os.PathLike) -> None:
    """Raise ``Damaged`` (naming the file) unless ``path`` holds a whole policy as
    ``save_policy`` writes it: ``config.json`` and ``tokenizer_config.json`` present, every JSON
    file parsing, the shards of a weights index present, and every ``*.safetensors`` file
    complete. A file that cannot be read for another reason raises its ``OSError``."""
    path = Path(path)
    parsed = {file.name: load_json(file) for file in sorted(path.glob("*.json"))}
    for name in ("config.json", "tokenizer_config.json"):
        if name not in parsed:
            raise Damaged(f"{path / name} is missing")
    index = path / "model.safetensors.index.json"
    listed = parsed.get(index.name, {"weight_map": {}})
    weight_map = listed.get("weight_map") if isinstance(listed, dict) else None
    if not isinstance(weight_map, dict):
        raise Damaged(f"{index} has no weight_map")
    for name in sorted(set(weight_map.values())):
        if not (path / name).exists():
            raise Damaged(f"{path / name}, a shard of {index}, is missing")
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        raise Damaged(f"{path} holds no *.safetensors weights")
    for file in weights:
        _check_safetensors(file)


def safetensors_extent(file: Path) -> tuple[int, int | None]:
    """A safetensors file's size in bytes, and the size its header says it has: the 8-byte
    header length, the JSON header and the tensors' data; None where the file is shorter than
    its header. A header that does not parse is a ``ValueError``; an ``OSError`` reading the
    file propagates."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        length = int.from_bytes(f.read(8), "little")
        if size < 8 or 8 + length > size:
            return size, None
        try:
            header = json.loads(f.read(length))
            ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise ValueError(f"its header does not parse ({err!r})") from err
    return size, 8 + length + max(ends, default=0)


def _check_safetensors(file: Path) -> None:
    """Raise ``Damaged`` unless ``file`` is a whole safetensors file (``safetensors_extent``)."""
    try:
        size, expected = safetensors_extent(file)
    except ValueError as err:
        raise Damaged(f"{file}: {err}") from err
    if expected is None:
        raise Damaged(f"{file} is truncated: {size} bytes, shorter than its header")
    if size != expected:
        raise Damaged(f"{file} is {size} bytes where its header says {expected}: truncated")


def load_saved_policy(
    path: str | os.PathLike,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A policy that ``save_policy`` wrote (a cache entry), in float32; ``Damaged`` if its files
    are not whole (``check_saved_policy``)."""
    check_saved_policy(path)
    return load_policy(path, dtype=torch.float32)


def check_finite(model: torch.nn.Module, what: str) -> None:
    """Raise ``ValueError`` naming ``what`` and the first floating tensor of ``model``'s state
    that holds a NaN or an infinity."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{what}: its {name} holds non-finite values (NaN or inf)")


def save_policy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    path: str | os.PathLike,
    meta: dict | None = None,
) -> Path:
    """Save model, tokenizer and optional ``psnlib_meta.json`` atomically (temp dir, rename).
    A model with a non-finite weight is refused (``ValueError``) and nothing is written."""
    check_finite(model, f"refusing to save the policy {path}")

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if meta is not None:
            atomic_write_json(tmp / META_FILE, meta)

    return atomic_save(path, save)


def count_parameters(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
