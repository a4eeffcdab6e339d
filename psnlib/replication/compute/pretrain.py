"""SFT pre-training of the testbed's base and weak policies, built on demand and cached.

The *base* policy (Qwen2 family) is trained on correct chains drawn uniformly from all the chains
of each problem, so it spreads probability over many solution paths: the broad coverage that RL
later narrows. The *weak* policy (a smaller Llama) sees only "linear" chains (each step extends the
previous result), a different strategy, so its prefixes are unfamiliar to the base policy.

Built policies are cached under ``data/cache/policies/<family>-<size>-<style>-<hash>/``: the hash
covers every setting, so a changed setting builds a new policy and an unchanged one is loaded. A
*committed starting point* (``results/start/policies/<same name>/``, its weights' fingerprint in
``fingerprints.json`` beside it; ``psnlib.replication.compute.starting_points``) comes first: it is
loaded, never rebuilt or removed, so every machine starts every run from the same weights.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.cache import Damaged, load_cached, load_json
from psnlib.locks import exclusive
from psnlib.models import (
    META_FILE,
    build_tokenizer,
    load_policy,
    load_saved_policy,
    save_policy,
    tiny_policy,
)
from psnlib.replication.compute.store import weights_fingerprint
from psnlib.replication.plan.policies import CACHE_VERSION, committed_policy, policy_dir
from psnlib.replication.plan.profiles import PolicySpec, Profile, get_profile
from psnlib.tasks import sft_corpus

# What build_policy writes beside a built policy's weights, and what its readers use.
BUILT_META_KEYS = ("spec", "train_seconds", "final_loss", "loss_curve")
IGNORE = -100  # label of positions that carry no loss (prompt, padding)


def encode_sft(
    prompts: list[str], completions: list[str], tokenizer: PreTrainedTokenizerBase
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids`` and ``labels`` (loss on completion + <eos> only), both (N, L)."""
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
    rows = [p + c + [tokenizer.eos_token_id] for p, c in zip(p_ids, c_ids, strict=True)]
    L = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), L), tokenizer.pad_token_id, dtype=torch.long)  # (N, L)
    labels = torch.full((len(rows), L), IGNORE, dtype=torch.long)  # (N, L)
    for i, (row, p) in enumerate(zip(rows, p_ids, strict=True)):
        input_ids[i, : len(row)] = torch.tensor(row)
        labels[i, len(p) : len(row)] = input_ids[i, len(p) : len(row)]
    return input_ids, labels


def lr_at(
    step: int, steps: int, peak: float, warmup_frac: float = 0.05, floor: float = 0.1
) -> float:
    """Linear warm-up, then cosine decay to ``floor * peak``."""
    warmup = max(1, int(warmup_frac * steps))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def sft_train(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    desc: str = "SFT",
    on_step: Callable[[int, list[float]], None] | None = None,
) -> list[float]:
    """Next-token cross-entropy on the labelled positions; returns the per-step losses.

    ``on_step(step, losses)``, if given, runs after each optimizer step (1-based) with the losses
    so far, e.g. to evaluate along the way; training mode is restored after it."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    model.train()
    losses: list[float] = []
    order = torch.randperm(len(input_ids), generator=g)
    cursor = 0
    bar = tqdm(range(steps), desc=desc, mininterval=2.0)
    for step in bar:
        if cursor + batch_size > len(order):
            order, cursor = torch.randperm(len(input_ids), generator=g), 0
        idx = order[cursor : cursor + batch_size]
        cursor += batch_size
        x, y = input_ids[idx], labels[idx]  # (B, L)
        width = int((y != IGNORE).any(0).nonzero().max()) + 1  # trim trailing padding columns
        x, y = x[:, :width], y[:, :width]
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr)
        logits = model(input_ids=x).logits[:, :-1]  # (B, L-1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if on_step is not None:
            on_step(step + 1, losses)
            model.train()
    model.eval()
    return losses


def build_policy(
    spec: PolicySpec, root: Path | None = None, force: bool = False
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Path]:
    """Load the policy ``spec`` describes: from the hub / a path, the cache, or by SFT now."""
    if spec.name_or_path is not None:
        model, tokenizer = load_policy(spec.name_or_path)
        return model, tokenizer, Path(spec.name_or_path)
    if spec.sft_steps <= 0 or spec.sft_batch_size <= 0 or spec.sft_examples <= 0:
        raise ValueError(
            f"a tiny policy needs sft_steps, sft_batch_size and sft_examples > 0, got {spec}"
        )
    if spec.sft_max_misses < 0:
        raise ValueError(f"sft_max_misses={spec.sft_max_misses} is not allowed: use >= 0")
    committed = None if root is not None or force else committed_policy(spec)
    if committed is not None:
        return (*_load_committed(committed), committed)
    path = policy_dir(spec, root)
    loaded = None if force else _cached(path)
    if loaded is None:
        with exclusive(path, f"building the policy {path.name}", wait=True):
            loaded = None if force else _cached(path)  # built meanwhile by the lock's last owner?
            if loaded is None:
                return (*_sft_policy(spec, path), path)
    return loaded[0].eval(), loaded[1], path


def _load_committed(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A committed starting policy; one that is damaged is an error naming it (never removed:
    it is tracked in git)."""
    try:
        model, tokenizer = _load_built(path)
    except Damaged as err:
        raise ValueError(
            f"the committed starting policy {path} is damaged ({err}): restore it with "
            f"`git checkout -- {path}`"
        ) from err
    return model.eval(), tokenizer


def _cached(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase] | None:
    """The built policy cached at ``path``, or None (a damaged entry is removed)."""
    return load_cached(path, _load_built, "policy") if path.exists() else None


def _sft_policy(spec: PolicySpec, path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Build the tiny policy ``spec`` describes by SFT now, and cache it at ``path``."""
    tokenizer = build_tokenizer()
    model = tiny_policy(spec.family, spec.size, tokenizer, seed=spec.seed)  # validates names
    start = time.perf_counter()
    corpus = sft_corpus(
        spec.sft_examples, seed=spec.seed, style=spec.sft_style, max_misses=spec.sft_max_misses
    )
    input_ids, labels = encode_sft(list(corpus["prompt"]), list(corpus["completion"]), tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        losses = sft_train(
            model,
            input_ids,
            labels,
            steps=spec.sft_steps,
            batch_size=spec.sft_batch_size,
            lr=spec.sft_lr,
            seed=spec.seed,
            desc=f"SFT {spec.family}-{spec.size}",
        )
    meta = {
        "spec": asdict(spec),
        "train_seconds": round(time.perf_counter() - start, 1),
        "final_loss": sum(losses[-50:]) / len(losses[-50:]),
        "loss_curve": losses[:: max(1, len(losses) // 100)],
        "cache_version": CACHE_VERSION,
        "fingerprint": weights_fingerprint(model.eval()),
    }
    save_policy(model, tokenizer, path, meta=meta)
    return model, tokenizer


def policy_meta(path: Path) -> dict:
    """The ``psnlib_meta.json`` written beside a built policy or a finished run; ``Damaged``
    (naming the file) if it is missing, does not parse or is not a JSON object."""
    file = Path(path) / META_FILE
    meta = load_json(file)
    if not isinstance(meta, dict):
        raise Damaged(f"{file} holds a JSON {type(meta).__name__}, not an object")
    return meta


def _load_built(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A cached built policy; ``Damaged`` if its files or its record are not whole."""
    missing = [key for key in BUILT_META_KEYS if key not in policy_meta(path)]
    if missing:
        raise Damaged(f"{Path(path) / META_FILE} lacks {missing}")
    return load_saved_policy(path)


def base_policy(profile: str | Profile = "cpu", **kwargs):
    """The profile's base (target) policy: ``(model, tokenizer, path)``."""
    return build_policy(get_profile(profile).base, **kwargs)


def weak_policy(profile: str | Profile = "cpu", **kwargs):
    """The profile's weak (prefix-writing) policy: ``(model, tokenizer, path)``."""
    return build_policy(get_profile(profile).weak, **kwargs)
