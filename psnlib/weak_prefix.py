"""Weak-model guidance: weak solutions, entropy-based (or random) truncation, prefix branches.

Once before training, a weak policy (smaller, another family) writes one solution per question;
the solution is split into steps, and the frozen target *base* policy scores each step by its
mean token entropy ``H_j`` (teacher-forced on the question and the steps before it). The prefix
is steps ``1..L*`` with ``L* = argmax_L (H_L - H_{L+1})``: the weak text just before the target's
entropy drops most. During training each question group takes the prefix branch with probability
``p``: its rollouts continue ``prompt + weak_prefix`` and the reward judges ``prefix + completion``.

Conventions (the edge cases, decided here):

- A step keeps its separator: ``split_steps("7*3=21,21+5=26")`` is ``["7*3=21,", "21+5=26"]``,
  so ``"".join(steps) == text`` and a prefix ends with its separator ("7*3=21,"), ready for the
  next step. ``H_j`` averages over the step's tokens, its separator included.
- ``L*`` ranges over ``1..n-1`` for ``n >= 2`` steps (``H_{L+1}`` must exist), so a prefix never
  holds the whole weak solution; ties go to the smallest ``L``. With fewer than 2 steps (a
  one-step or an empty solution) ``L* = 0``: the prefix is "" and the branch is a plain rollout.
  Random truncation (the ablation) cuts uniformly on the same support ``1..n-1``.
- Texts cross between policies as text: the weak solution is decoded, then re-tokenised with the
  target's tokenizer, step by step (each step tokenised on its own). Any vocabulary works, but a
  step the target tokenizer can only map to its unknown token raises ValueError.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.cache import read_json
from psnlib.io import atomic_write_json
from psnlib.paths import data_dir
from psnlib.sampling import generate_samples
from psnlib.tasks.countdown import ATTEMPT_SEP

# Bump when the recipe changes in a way the cache key does not see (2: the decoder's einsum
# attention, issue 18: sampled prefixes change at rounding level).
CACHE_VERSION = 2
TRUNCATIONS = ("entropy", "random")
_SAVE_INFO = ("_name_or_path", "architectures", "dtype", "torch_dtype", "transformers_version")
COLUMNS = ("weak_solution", "weak_prefix", "prefix_steps", "step_entropy")  # added by build
# What a value of each column must be, in a cache entry as when computed.
VALID: dict[str, Callable[[object], bool]] = {
    "weak_solution": lambda v: isinstance(v, str),
    "weak_prefix": lambda v: isinstance(v, str),
    "prefix_steps": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "step_entropy": lambda v: (
        isinstance(v, list)
        and all(
            isinstance(h, int | float) and not isinstance(h, bool) and math.isfinite(h) for h in v
        )
    ),
}


# ----------------------------------------------------------------------------- steps


def _split_after(separator: str) -> Callable[[str], list[str]]:
    """A splitter that ends a step after each match of ``separator`` (kept with the step)."""
    pattern = re.compile(rf".*?(?:{separator})|.+", re.S)
    return lambda text: pattern.findall(text)


SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    # "7*3=21,21+5=26" -> ["7*3=21,", "21+5=26"]; an attempt's end (ATTEMPT_SEP) ends a step too
    "countdown": _split_after(f"[,{ATTEMPT_SEP}]"),
    "math": _split_after(r"\n+|[.!?](?:\s+|$)"),  # newlines and sentence ends ("3.5" is no end)
}


def split_steps(text: str, task: str = "countdown") -> list[str]:
    """The steps of ``text`` with their separators kept: ``"".join(steps) == text``."""
    if task not in SPLITTERS:
        raise ValueError(f"no step splitter for task {task!r}; known: {sorted(SPLITTERS)}")
    return SPLITTERS[task](text)


# ----------------------------------------------------------------------------- truncation


def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if tokenizer.unk_token_id is not None and tokenizer.unk_token_id in ids:
        raise ValueError(
            f"the target tokenizer cannot represent {text!r} (it maps to the unknown token "
            f"{tokenizer.unk_token!r}): the weak policy writes characters outside its vocabulary"
        )
    return ids


@torch.no_grad()
def step_entropies(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    steps: list[list[str]],
    *,
    batch_size: int = 16,
) -> list[list[float]]:
    """``out[i][j]``: mean entropy of ``softmax(logits)`` of ``model`` over the tokens of step j
    of example i, teacher-forced on prompt i and its steps before j.

    ``batch_size`` rows run in one forward (memory: ``batch_size x length x vocab`` floats).
    """
    if len(prompts) != len(steps):
        raise ValueError(f"lengths differ: prompts={len(prompts)}, steps={len(steps)}")
    rows, bounds = [], []  # per example: token ids, and each step's [start, end) positions
    for prompt, pieces in zip(prompts, steps, strict=True):
        ids = _encode(tokenizer, prompt)
        if not ids:
            raise ValueError(f"prompts must tokenise to at least one token, got {prompt!r}")
        spans = []
        for piece in pieces:
            piece_ids = _encode(tokenizer, piece)
            if not piece_ids:
                raise ValueError(f"step {piece!r} tokenises to no tokens")
            spans.append((len(ids), len(ids) + len(piece_ids)))
            ids = ids + piece_ids
        rows.append(ids)
        bounds.append(spans)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    out: list[list[float]] = []
    for first in range(0, len(rows), batch_size):
        chunk = rows[first : first + batch_size]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)  # (B, L), right-padded
        mask = torch.zeros((len(chunk), width), dtype=torch.long)  # (B, L)
        for i, row in enumerate(chunk):
            ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
        logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).logits
        logp = logits[:, :-1].float().log_softmax(-1)  # (B, L-1, V): predicts token t+1 at t
        entropy = -(logp.exp() * logp).sum(-1).cpu()  # (B, L-1)
        for i, spans in enumerate(bounds[first : first + batch_size]):
            out.append([entropy[i, a - 1 : b - 1].mean().item() for a, b in spans])
    model.train(was_training)
    return out


def entropy_cut(entropies: Sequence[float]) -> int:
    """``L* = argmax_{1 <= L < n} (H_L - H_{L+1})`` (1-based; ties: the smallest L); 0 if n < 2."""
    if any(h != h or abs(h) == float("inf") for h in entropies):
        raise ValueError(f"step entropies must be finite, got {list(entropies)}")
    drops = [entropies[L - 1] - entropies[L] for L in range(1, len(entropies))]
    return 1 + max(range(len(drops)), key=drops.__getitem__) if drops else 0


def random_cut(num_steps: int, rng: random.Random) -> int:
    """A uniform cut in ``1..num_steps-1`` (the support of ``entropy_cut``); 0 if < 2 steps."""
    if num_steps < 0:
        raise ValueError(f"num_steps must be >= 0, got {num_steps}")
    return rng.randint(1, num_steps - 1) if num_steps >= 2 else 0


# ----------------------------------------------------------------------------- build + cache


def fingerprint(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of a policy: class, config, vocabulary and every weight's bytes (and dtype).

    Config entries that only record where or how a model was saved are left out, so a policy
    and its saved-and-loaded copy share one fingerprint.
    """
    h = hashlib.sha256(type(model).__name__.encode())
    config = {k: v for k, v in model.config.to_dict().items() if k not in _SAVE_INFO}
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    for name, p in model.named_parameters():
        h.update(f"{name}{tuple(p.shape)}{p.dtype}".encode())
        h.update(p.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def build_prefixes(
    dataset: Dataset,
    target_model: PreTrainedModel,
    target_tokenizer: PreTrainedTokenizerBase,
    weak_model: PreTrainedModel,
    weak_tokenizer: PreTrainedTokenizerBase,
    *,
    truncation: str = "entropy",
    temperature: float = 0.4,
    seed: int = 0,
    task: str = "countdown",
    max_new_tokens: int = 48,
    batch_size: int = 16,
    root: Path | None = None,
    progress: bool = True,
) -> Dataset:
    """``dataset`` (a ``prompt`` column) plus the columns ``COLUMNS``, cached on disk.

    ``weak_solution``: the weak policy's sample (n=1, ``temperature``, ``seed``);
    ``weak_prefix``: its steps ``1..prefix_steps`` joined (see the module conventions);
    ``step_entropy``: ``H_j`` per step under the target (empty with random truncation, where
    the target model is not run). The result is cached under ``root`` (default
    ``data/cache/weak_prefixes``) by a hash of the prompts, both policies (weights, config,
    vocabulary) and every setting but ``batch_size`` and ``progress``.
    """
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation={truncation!r} is not allowed: use one of {TRUNCATIONS}")
    if task not in SPLITTERS:
        raise ValueError(f"no step splitter for task {task!r}; known: {sorted(SPLITTERS)}")
    if "prompt" not in dataset.column_names:
        raise ValueError(f"dataset needs a 'prompt' column, has {dataset.column_names}")
    prompts = list(dataset["prompt"])
    settings = dict(
        truncation=truncation,
        temperature=temperature,
        seed=seed,
        task=task,
        max_new_tokens=max_new_tokens,
    )
    key = {
        "v": CACHE_VERSION,
        "prompts": hashlib.sha256(json.dumps(prompts).encode()).hexdigest(),
        "weak": fingerprint(weak_model, weak_tokenizer),
        "target": fingerprint(target_model, target_tokenizer) if truncation == "entropy" else "",
        "settings": settings,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    root = Path(root) if root is not None else data_dir() / "cache" / "weak_prefixes"
    path = root / f"{task}-{truncation}-{digest}.json"
    columns = _cached_columns(path, len(prompts))
    if columns is None:
        policies = (target_model, target_tokenizer, weak_model, weak_tokenizer)
        columns = _compute(prompts, *policies, batch_size=batch_size, progress=progress, **settings)
        atomic_write_json(path, {"key": key, "columns": columns})
    for prefix in columns["weak_prefix"]:
        _encode(target_tokenizer, prefix)  # the target must read every prefix (cached ones too)
    dataset = dataset.remove_columns([c for c in COLUMNS if c in dataset.column_names])
    for name in COLUMNS:
        dataset = dataset.add_column(name, columns[name])
    return dataset


def _cached_columns(path: Path, rows: int) -> dict[str, list] | None:
    """The columns cached in ``path``, or None if there are none. A damaged entry (not JSON,
    truncated, or without a list of ``rows`` values for each of ``COLUMNS``) is ignored with a
    warning naming the file, and recomputed."""
    stored = read_json(path, "weak-prefix cache entry")
    columns = stored.get("columns") if isinstance(stored, dict) else None
    if isinstance(columns, dict) and all(
        isinstance(columns.get(name), list)
        and len(columns[name]) == rows
        and all(map(VALID[name], columns[name]))
        for name in COLUMNS
    ):
        return columns
    if stored is not None:  # valid JSON, but not this entry's columns
        warnings.warn(
            f"ignoring the damaged weak-prefix cache entry {path}: expected a list of {rows} "
            f"values for each of {list(COLUMNS)} (texts, step counts >= 0, lists of finite "
            "entropies; no nulls); recomputing it",
            stacklevel=3,
        )
    return None


def _compute(
    prompts: list[str],
    target_model: PreTrainedModel,
    target_tokenizer: PreTrainedTokenizerBase,
    weak_model: PreTrainedModel,
    weak_tokenizer: PreTrainedTokenizerBase,
    *,
    truncation: str,
    temperature: float,
    seed: int,
    task: str,
    max_new_tokens: int,
    batch_size: int,
    progress: bool,
) -> dict[str, list]:
    """The columns of ``build_prefixes``, computed now."""
    solutions = generate_samples(
        weak_model,
        weak_tokenizer,
        prompts,
        1,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        progress=progress,
    )
    solutions = [samples[0] for samples in solutions]
    steps = [split_steps(text, task) for text in solutions]
    if truncation == "entropy":
        entropies = step_entropies(
            target_model, target_tokenizer, prompts, steps, batch_size=batch_size
        )
        cuts = [entropy_cut(h) for h in entropies]
    else:  # the ablation: the target model is not run
        rng = random.Random(f"weak-prefix-random/{seed}")
        entropies = [[] for _ in steps]
        cuts = [random_cut(len(pieces), rng) for pieces in steps]
    prefixes = ["".join(pieces[:cut]) for pieces, cut in zip(steps, cuts, strict=True)]
    return {
        "weak_solution": solutions,
        "weak_prefix": prefixes,
        "prefix_steps": cuts,
        "step_entropy": entropies,
    }


# ----------------------------------------------------------------------------- training time


def choose_prefixed(num_groups: int, p: float, seed: int, step: int) -> torch.Tensor:
    """Which of a step's ``num_groups`` prompt groups take the prefix branch: (num_groups,) bool.

    Each group independently with probability ``p``; deterministic in ``(seed, step)``. Call it
    with the global number of groups on every process and slice, so processes agree.
    """
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        raise ValueError(f"prefix probability p must be in [0, 1], got {p}")
    if num_groups < 0:
        raise ValueError(f"num_groups must be >= 0, got {num_groups}")
    digest = hashlib.blake2b(f"weak-prefix/{seed}/{step}".encode(), digest_size=8).digest()
    g = torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)
    return torch.rand(num_groups, generator=g) < p  # rand is in [0, 1): p=1 takes every group
