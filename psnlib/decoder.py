"""A tree-structured KV-cache decoder for Llama-layout causal LMs (Llama, Qwen2 and Qwen3, whose
attention adds an RMSNorm of each head's query and key): the engine of psnlib.sampling.

Rows (prompt x sample) are decoded in *cohorts*: rows that joined together, with one prefill of
their prompts and a time axis of their own, so attention never spans more than a row's history.
Within a cohort, rows with the same token history so far share one decoded *node*: each prompt's
prefill runs once and each distinct prefix of its samples is decoded once. Everything but
attention runs on all nodes of all cohorts together, through the model's own linear layers, so
in-place weight noise and per-row noise (``psnlib.noise.perturbed_rows``) apply.

A ``route`` callback, if given, is called before every model forward with the prompt index of
each batch row, so a caller can treat rows by prompt (e.g. per-prompt weight noise).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel

LLAMA_LAYOUT = ("llama", "qwen2", "qwen3")  # model types the decoder runs
COMPACT_FRACTION = 0.25  # a cohort packs its nodes once this share of its slots is dead
MASKED_PROMPTS = 8  # cohorts of at most this many prompts attend to all prompts, masked
Route = Callable[[torch.Tensor], None]  # called with the prompt index of each row (B,)


def decodable(model: PreTrainedModel) -> bool:
    """Whether the decoder runs ``model``: a Llama-layout model type, full attention."""
    config = model.config
    return config.model_type in LLAMA_LAYOUT and not getattr(config, "use_sliding_window", False)


def check_decodable(model: PreTrainedModel) -> None:
    """Raise a ValueError unless the decoder runs ``model`` (Llama layout, full attention)."""
    if not decodable(model):
        raise ValueError(
            f"the psnlib decoder runs Llama-layout models {LLAMA_LAYOUT} with full attention, "
            f"got model_type {model.config.model_type!r}; for other models pass a vllm.LLM to "
            "sample_tokens, or use rollout_engine='generate' in PSNGRPOConfig"
        )


def prefill(
    model: PreTrainedModel, prompts: list[list[int]], pad_token_id: int
) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
    """One forward over the left-padded prompts: last logits (P, V), cache, mask (P, W)."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)  # (P, W)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)  # (P, W)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, W)
    cache = DynamicCache(config=model.config)
    out = model(
        input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, logits_to_keep=1
    )
    return out.logits[:, -1].float(), cache, mask


class Cohort:
    """Rows that joined together, decoded as a tree: one *node* per distinct token history.

    Samples of one prompt that drew the same tokens so far have the same next-token
    distribution, so each distinct history is decoded once, however many rows share it (with a
    low-entropy policy, about half the tokens of 256 samples per prompt). A node starts at each
    prompt and splits when its rows draw different tokens.

    Attention of a node's query covers its prompt and its own generated tokens. For the prompt
    part, a cohort of few prompts (evaluation: many samples of each) runs two batched matmuls
    against the KV of all its prompts, other prompts' slots masked out; a cohort of many prompts
    (training rollouts, one prompt per rollout under per-rollout noise) gathers each node's own
    prompt KV instead, at a cost that does not grow with the number of prompts. The generated
    part is per node, in a sequence-first cache (T, m, H, D) with KV heads repeated to H, and
    runs as two einsums (scores, then the weighted sum of values): 2-10x faster on CPU than
    elementwise products over (T, m, H, D) and faster than m x H tiny matmuls over a node-first
    layout (the more so the longer the history).
    """

    def __init__(
        self,
        cache: DynamicCache,
        mask: torch.Tensor,
        prompt_index: torch.Tensor,
        heads: int,
        new: int,
        capacity: int,
    ) -> None:
        P, W = mask.shape  # (P, W): 1 on prompt tokens, 0 on left padding
        self.prompt_keys, self.prompt_values = [], []  # per layer (P, H, W, D), padding zeroed
        self.keys, self.values = [], []  # per layer (new, capacity, H, D): nodes' own tokens
        for layer in cache.layers:
            k, v = (
                (x * mask[:, None, :, None]).repeat_interleave(heads // x.shape[1], dim=1)
                for x in (layer.keys, layer.values)
            )  # (P, H, W, D)
            self.prompt_keys.append(k.contiguous())
            self.prompt_values.append(v.contiguous())
            self.keys.append(k.new_empty((new, capacity, heads, k.shape[-1])))
            self.values.append(v.new_empty((new, capacity, heads, v.shape[-1])))
        self.prompt_bias = torch.zeros((P, W), dtype=k.dtype, device=k.device)
        self.prompt_bias.masked_fill_(mask == 0, float("-inf"))  # (P, W): -inf on padding
        self.masked = P <= MASKED_PROMPTS
        if self.masked:  # all prompts' KV side by side, (H, D, P*W) and (H, P*W, D)
            self.prompt_keys = [x.permute(1, 3, 0, 2).flatten(2) for x in self.prompt_keys]
            self.prompt_values = [x.permute(1, 0, 2, 3).flatten(1, 2) for x in self.prompt_values]
            own = torch.eye(P, dtype=torch.bool, device=k.device)[:, :, None] & (mask == 1)
            self.prompt_bias = torch.zeros((P, P * W), dtype=k.dtype, device=k.device)
            self.prompt_bias.masked_fill_(~own.view(P, P * W), float("-inf"))  # (P, P*W)
        self.positions = torch.zeros(capacity, dtype=torch.long, device=k.device)
        self.positions[:P] = mask.sum(-1)
        self.local = torch.zeros(capacity, dtype=torch.long, device=k.device)
        self.local[:P] = torch.arange(P, device=k.device)  # each node's prompt in this cohort
        self.prompt = torch.zeros(capacity, dtype=torch.long, device=k.device)
        self.prompt[:P] = prompt_index  # the caller's index of each node's prompt
        self.m, self.s = P, 0  # nodes (slots in use) and tokens generated so far
        self.bias = self.prompt_bias  # this step's (m, W) or (m, P*W) rows of it, set by layer 0

    def __len__(self) -> int:
        return self.m

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Store k, v (m, H, D) at the current slot; attention of the scaled query q (m, H, D)."""
        m, s = self.m, self.s
        keys, values = self.keys[layer][: s + 1, :m], self.values[layer][: s + 1, :m]
        keys[s], values[s] = k, v
        local = self.local[:m]
        if layer == 0:  # the same for every layer of this step
            self.bias = self.prompt_bias.index_select(0, local)  # (m, W) or, masked, (m, P*W)
        bias = self.bias
        if self.masked:
            prompt = torch.baddbmm(bias, q.transpose(0, 1), self.prompt_keys[layer]).transpose(0, 1)
        else:
            prompt_keys = self.prompt_keys[layer].index_select(0, local)  # (m, H, W, D)
            prompt = (prompt_keys * q[:, :, None]).sum(-1) + bias[:, None]  # (m, H, W)
        own = torch.einsum("tmhd,mhd->mht", keys, q)  # (m, H, s + 1): q . k_t per node
        weights = torch.cat([prompt, own], dim=-1).softmax(-1)  # (m, H, W' + s + 1)
        W = prompt.shape[-1]
        if self.masked:
            y = torch.bmm(weights[..., :W].transpose(0, 1), self.prompt_values[layer])
            y = y.transpose(0, 1)  # (m, H, D)
        else:
            prompt_values = self.prompt_values[layer].index_select(0, local)  # (m, H, W, D)
            y = (weights[..., :W, None] * prompt_values).sum(2)  # (m, H, D)
        return y + torch.einsum("mht,tmhd->mhd", weights[..., W:], values)  # (m, H, D)

    def split(self, parent: torch.Tensor) -> torch.Tensor:
        """Give the children of the nodes their slots; child c continues node ``parent[c]``
        (sorted). A node's first child keeps its slot; the others get new slots with a copy of
        its history. Nodes without children stay, dead, until a quarter of the slots are: then
        child c moves to slot c. Returns the children's slots."""
        first = torch.ones_like(parent, dtype=torch.bool)
        first[1:] = parent[1:] != parent[:-1]
        extra = (~first).nonzero()[:, 0]
        dead = self.m - int(first.sum())
        if self.m + len(extra) <= len(self.positions) and dead < COMPACT_FRACTION * self.m:
            slots = parent.clone()
            slots[extra] = self.m + torch.arange(len(extra), device=parent.device)
            self._move(parent[extra], slots[extra])
            self.m += len(extra)
        else:
            slots = torch.arange(len(parent), device=parent.device)
            self._move(parent, slots)
            self.m = len(parent)
        return slots

    def _move(self, source: torch.Tensor, target: torch.Tensor) -> None:
        """Copy the history (filled slots, position, prompt) of nodes ``source`` into slots
        ``target``."""
        for cache in (*self.keys, *self.values):  # 2-3x faster than cache[:s, target] = ...
            history = cache[: self.s]  # (s, capacity, H, D)
            history.index_copy_(1, target, history.index_select(1, source))
        for index in (self.positions, self.local, self.prompt):
            index[target] = index[source]


class TreeDecoder:
    """Llama-layout decoder layers over the nodes of all cohorts, one token per node and step.

    Runs the model's own linear layers, embedding, rotary embedding and head, so in-place weight
    noise and patched ``nn.Linear`` forwards apply; norms, the MLP's gating and attention are done
    here (the same arithmetic, fewer ops). ``route`` (optional) is called before every forward
    with the prompt index of each row of that forward.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        max_new_tokens: int,
        pad_token_id: int,
        route: Route | None = None,
    ) -> None:
        check_decodable(model)
        config = model.config
        self.model, self.base = model, model.model
        self.heads = config.num_attention_heads, config.num_key_value_heads
        self.qk_norm = hasattr(self.base.layers[0].self_attn, "q_norm")  # Qwen3
        self.max_new, self.pad = max_new_tokens, pad_token_id
        self.route = route
        self.cohorts: list[Cohort] = []

    def add(self, prompts: list[list[int]], index: list[int], rows: int) -> torch.Tensor:
        """A cohort of ``rows`` rows whose nodes start at ``prompts`` (caller's indices
        ``index``), after all other nodes; the prompts' next-token logits (P, V)."""
        index = torch.tensor(index, device=self.model.device)
        if self.route is not None:
            self.route(index)
        logits, cache, mask = prefill(self.model, prompts, self.pad)
        self.cohorts.append(Cohort(cache, mask, index, self.heads[0], self.max_new, rows))
        return logits

    def split(self, parent: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Child c continues node ``parent[c]`` (sorted) with ``token[c]``. Returns each child's
        node in the next step, and the token every node of the next step reads (padding for
        dead ones); a cohort without children is gone."""
        cohorts, slots, feed = [], [], []
        start = 0
        for cohort in self.cohorts:
            mine = (parent >= start) & (parent < start + len(cohort))
            start += len(cohort)
            if mine.any():
                local = cohort.split(parent[mine] - (start - len(cohort)))
                slots.append(local + sum(len(c) for c in cohorts))
                feed.append(torch.full((len(cohort),), self.pad, device=parent.device))
                feed[-1][local] = token[mine]
                cohorts.append(cohort)
        self.cohorts = cohorts
        empty = parent[:0]
        return torch.cat(slots) if slots else empty, torch.cat(feed) if feed else empty

    def step(self, tokens: torch.Tensor) -> torch.Tensor:  # (N,) -> (N, V)
        B, (H, KV) = len(tokens), self.heads
        sizes = [len(c) for c in self.cohorts]
        positions = torch.cat([c.positions[: len(c)] for c in self.cohorts])  # (N,)
        if self.route is not None:
            self.route(torch.cat([c.prompt[: len(c)] for c in self.cohorts]))  # (N,)
        h = self.base.embed_tokens(tokens)  # (N, C)
        cos, sin = self.base.rotary_emb(h, positions[:, None])  # (N, 1, D)
        for i, layer in enumerate(self.base.layers):
            attn, mlp = layer.self_attn, layer.mlp
            x = rms_norm(layer.input_layernorm, h)
            qk = torch.cat([attn.q_proj(x), attn.k_proj(x)], -1).view(B, H + KV, -1)
            if self.qk_norm:  # Qwen3: an RMSNorm of each head's query and key, then the rotation
                q, k = qk.split([H, KV], dim=1)
                qk = torch.cat([rms_norm(attn.q_norm, q), rms_norm(attn.k_norm, k)], dim=1)
            q, k = rotate(qk, cos, sin).split([H, KV], dim=1)  # (N, H, D), (N, KV, D)
            v = attn.v_proj(x).view(B, KV, -1)  # (N, KV, D)
            if KV < H:  # grouped-query attention: one KV head per H // KV query heads
                k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            qkv = (q * attn.scaling).split(sizes), k.split(sizes), v.split(sizes)
            y = torch.cat([c.attend(i, *part) for c, *part in zip(self.cohorts, *qkv, strict=True)])
            h = h + attn.o_proj(y.view(B, -1))
            x = rms_norm(layer.post_attention_layernorm, h)
            h = h + mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)).mul_(mlp.up_proj(x)))
        for cohort in self.cohorts:
            cohort.s += 1
            cohort.positions += 1
        return self.model.lm_head(rms_norm(self.base.norm, h)).float()


def rms_norm(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A Llama / Qwen2 / Qwen3 RMSNorm module applied as one fused op (over the last axis)."""
    return F.rms_norm(x, module.weight.shape, module.weight, module.variance_epsilon)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (B, H, D) at per-row angles cos, sin (B, 1, D)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
