"""Many samples per problem from a causal LM: the cost behind every pass@k figure.

``sample_tokens`` draws ``n`` completions for each prompt and returns their token ids (and, on
request, per-token log-probs and entropies). It decodes up to ``batch_size`` rows at once with
the model's own modules and a KV cache written in place, and keeps the batch full: rows leave at
EOS and new rows join as *cohorts* (a cohort: rows that joined together, with one prefill of
their prompts and a time axis of its own, so attention never spans more than a row's history).
Within a cohort, rows with the same token history so far share one decoded *node*: each prompt's
prefill runs once, and each distinct prefix of its samples is decoded once (about half the tokens
of 256 samples of a low-entropy policy). Everything but attention runs on all nodes together.

Sampling is by inverse CDF with one uniform per row and step. The uniforms of prompt ``i`` come
from a generator seeded by ``(seed, i)``, so sample ``j`` of prompt ``i`` depends on the seed, the
prompt, ``i`` and ``j`` only (up to floating-point rounding), not on the batch size or the other
prompts. Rows join in order of prompt length, so padding is small.

The decoder runs Llama-layout models (Llama, Qwen2: the testbed's families and the GPU profiles'
models). A ``vllm.LLM`` passed as ``model`` is sampled with vLLM instead (GPU users; same call,
same result type, no entropies).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

LLAMA_LAYOUT = ("llama", "qwen2")  # model types the decoder runs
ADMIT_FRACTION = 0.5  # new rows join once this share of the batch is free (fewer cohorts)
COMPACT_FRACTION = 0.25  # a cohort packs its nodes once this share of its slots is dead

try:  # the GPU engine; absent on the CPU testbed
    import vllm
except ImportError:
    vllm = None


@dataclass(frozen=True)
class Samples:
    """``n`` completions of each of P prompts, as token ids.

    ``tokens[i, j, :lengths[i, j]]`` is sample j of prompt i (its EOS included, if it ended);
    later positions hold ``pad_token_id``. ``logprobs`` and ``entropies`` (when requested) are of
    the sampling distribution ``softmax(logits / temperature)`` (temperature 1 when greedy) at
    each position, 0 past the end.
    """

    tokens: torch.Tensor  # (P, n, L) long
    lengths: torch.Tensor  # (P, n) long
    logprobs: torch.Tensor | None = None  # (P, n, L) float
    entropies: torch.Tensor | None = None  # (P, n, L) float


def prompt_seed(seed: int, index: int) -> int:
    """The seed of prompt ``index``'s random stream (stable across processes)."""
    digest = hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


# ----------------------------------------------------------------------------- decoder


def _prefill(
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


class _Cohort:
    """Rows that joined together, decoded as a tree: one *node* per distinct token history.

    Samples of one prompt that drew the same tokens so far have the same next-token
    distribution, so each distinct history is decoded once, however many rows share it (with a
    low-entropy policy, about half the tokens of 256 samples per prompt). A node starts at each
    prompt and splits when its rows draw different tokens.

    Attention of a node's query covers its prompt and its own generated tokens. The prompt part
    is two batched matmuls against the KV of all the cohort's prompts, other prompts' slots
    masked out (a cohort holds few prompts). The generated part is per node, in a
    sequence-first cache (T, m, H, D) with KV heads repeated to H: for one query per node that is
    elementwise work over long contiguous rows, several times faster on CPU than m x H tiny
    matmuls.
    """

    def __init__(
        self, cache: DynamicCache, mask: torch.Tensor, heads: int, new: int, capacity: int
    ) -> None:
        P, W = mask.shape  # (P, W): 1 on prompt tokens, 0 on left padding
        self.prompt_keys, self.prompt_values = [], []  # per layer (H, D, P*W), (H, P*W, D)
        self.keys, self.values = [], []  # per layer (new, capacity, H, D): nodes' own tokens
        for layer in cache.layers:
            k, v = (
                (x * mask[:, None, :, None]).repeat_interleave(heads // x.shape[1], dim=1)
                for x in (layer.keys, layer.values)
            )  # (P, H, W, D), zeros on padding
            self.prompt_keys.append(k.permute(1, 3, 0, 2).reshape(heads, -1, P * W))
            self.prompt_values.append(v.permute(1, 0, 2, 3).reshape(heads, P * W, -1))
            self.keys.append(k.new_empty((new, capacity, heads, k.shape[-1])))
            self.values.append(v.new_empty((new, capacity, heads, v.shape[-1])))
        prompts = torch.arange(P, device=mask.device)
        own = (prompts[:, None, None] == prompts[:, None]) & (mask == 1)  # (P, P, W)
        self.prompt_bias = torch.full((capacity, P * W), float("-inf"), dtype=k.dtype)
        self.prompt_bias = self.prompt_bias.to(k.device)  # (capacity, P*W): 0 on own prompt
        self.prompt_bias[:P].masked_fill_(own.view(P, P * W), 0.0)
        self.positions = torch.zeros(capacity, dtype=torch.long, device=k.device)
        self.positions[:P] = mask.sum(-1)
        self.m, self.s = P, 0  # nodes (slots in use) and tokens generated so far

    def __len__(self) -> int:
        return self.m

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Store k, v (m, H, D) at the current slot; attention of the scaled query q (m, H, D)."""
        m, s = self.m, self.s
        keys, values = self.keys[layer][: s + 1, :m], self.values[layer][: s + 1, :m]
        keys[s], values[s] = k, v
        prompt = torch.baddbmm(self.prompt_bias[:m], q.transpose(0, 1), self.prompt_keys[layer])
        own = (keys * q).sum(-1).permute(2, 1, 0)  # (H, m, s + 1); prompt (H, m, P*W)
        weights = torch.cat([prompt, own], dim=-1).softmax(-1)  # (H, m, P*W + s + 1)
        y = torch.bmm(weights[..., : prompt.shape[-1]], self.prompt_values[layer])  # (H, m, D)
        mine = weights[..., prompt.shape[-1] :].permute(2, 1, 0)[..., None]  # (s + 1, m, H, 1)
        return y.transpose(0, 1) + (mine * values).sum(0)  # (m, H, D)

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
        """Copy the history (filled slots, prompt bias, position) of nodes ``source`` into
        slots ``target``."""
        for cache in (*self.keys, *self.values):
            cache[: self.s, target] = cache[: self.s, source]
        self.prompt_bias[target] = self.prompt_bias[source]
        self.positions[target] = self.positions[source]


class _Decoder:
    """Llama-layout decoder layers over the nodes of all cohorts, one token per node and step.

    Runs the model's own linear layers, embedding, rotary embedding and head, so in-place weight
    noise and patched ``nn.Linear`` forwards apply; norms, the MLP's gating and attention are done
    here (the same arithmetic, fewer ops).
    """

    def __init__(self, model: PreTrainedModel, max_new_tokens: int, pad_token_id: int) -> None:
        config = model.config
        if config.model_type not in LLAMA_LAYOUT or getattr(config, "use_sliding_window", False):
            raise ValueError(
                f"sample_tokens decodes Llama-layout models {LLAMA_LAYOUT} with full attention, "
                f"got model_type {config.model_type!r}; for other models pass a vllm.LLM"
            )
        self.model, self.base = model, model.model
        self.heads = config.num_attention_heads, config.num_key_value_heads
        self.max_new, self.pad = max_new_tokens, pad_token_id
        self.cohorts: list[_Cohort] = []

    def add(self, prompts: list[list[int]], rows: int) -> torch.Tensor:
        """A cohort of ``rows`` rows whose nodes start at ``prompts`` (after all other nodes);
        the prompts' next-token logits (P, V)."""
        logits, cache, mask = _prefill(self.model, prompts, self.pad)
        self.cohorts.append(_Cohort(cache, mask, self.heads[0], self.max_new, rows))
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
        h = self.base.embed_tokens(tokens)  # (N, C)
        cos, sin = self.base.rotary_emb(h, positions[:, None])  # (N, 1, D)
        for i, layer in enumerate(self.base.layers):
            attn, mlp = layer.self_attn, layer.mlp
            x = _norm(layer.input_layernorm, h)
            qk = torch.cat([attn.q_proj(x), attn.k_proj(x)], -1).view(B, H + KV, -1)
            q, k = _rotate(qk, cos, sin).split([H, KV], dim=1)  # (N, H, D), (N, KV, D)
            v = attn.v_proj(x).view(B, KV, -1)  # (N, KV, D)
            if KV < H:  # grouped-query attention: one KV head per H // KV query heads
                k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            qkv = (q * attn.scaling).split(sizes), k.split(sizes), v.split(sizes)
            y = torch.cat([c.attend(i, *part) for c, *part in zip(self.cohorts, *qkv, strict=True)])
            h = h + attn.o_proj(y.view(B, -1))
            x = _norm(layer.post_attention_layernorm, h)
            h = h + mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)).mul_(mlp.up_proj(x)))
        for cohort in self.cohorts:
            cohort.s += 1
            cohort.positions += 1
        return self.model.lm_head(_norm(self.base.norm, h)).float()


def _norm(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A Llama / Qwen2 RMSNorm module applied as one fused op."""
    return F.rms_norm(x, module.weight.shape, module.weight, module.variance_epsilon)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (B, H, D) at per-row angles cos, sin (B, 1, D)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


# ----------------------------------------------------------------------------- sampling loop


def _pick(
    logits: torch.Tensor, uniforms: torch.Tensor | None, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens (B,) from logits (B, V), and the log-softmax of the sampling distribution."""
    logp = torch.log_softmax(logits / (temperature or 1.0), dim=-1)  # (B, V)
    if uniforms is None:
        return logits.argmax(-1), logp
    cdf = logp.exp().cumsum(-1)  # (B, V)
    x = (uniforms * cdf[:, -1]).unsqueeze(-1)  # (B, 1), scaled so rounding never overshoots
    return torch.searchsorted(cdf, x, right=True)[:, 0].clamp_max(cdf.shape[-1] - 1), logp


class _Streams:
    """The random streams of the rows in the batch: one generator per group of rows that joined
    together from one prompt, so each row's k-th uniform is the k-th draw of its prompt's stream.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed
        self.generators: list[torch.Generator] = []
        self.group = torch.zeros(0, dtype=torch.long)  # (B,) the generator of each row

    def add(self, prompt_of: list[int]) -> None:
        """Rows that joined, row r from prompt ``prompt_of[r]`` (consecutive per prompt)."""
        ids, local = torch.tensor(prompt_of).unique_consecutive(return_inverse=True)
        first = len(self.generators)
        self.generators += [torch.Generator().manual_seed(prompt_seed(self.seed, i)) for i in ids]
        self.group = torch.cat([self.group, first + local])

    def keep(self, rows: torch.Tensor) -> None:
        used, self.group = self.group[rows].unique(return_inverse=True)
        self.generators = [self.generators[g] for g in used.tolist()]

    def draw(self, samples: torch.Tensor) -> torch.Tensor:
        """One uniform per row (B,) of sample index ``samples`` (B,); advances every stream."""
        u = torch.stack([torch.rand(self.n, generator=g) for g in self.generators])  # (G, n)
        return u[self.group, samples.cpu()]


@torch.no_grad()
def _decode(
    model: PreTrainedModel,
    prompts: list[list[int]],
    n: int,
    *,
    eos_token_id: int,
    pad_token_id: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int,
    seed: int,
    with_stats: bool,
    progress: bool,
) -> Samples:
    P, L, V = len(prompts), max_new_tokens, model.config.vocab_size
    order = sorted(range(P), key=lambda i: len(prompts[i]))
    queue = [(i, j) for i in order for j in range(n)]  # rows still to join
    tokens = torch.full((P * n, L), pad_token_id, dtype=torch.long)  # row i * n + j
    lengths = torch.zeros(P * n, dtype=torch.long)
    logprobs, entropies = torch.zeros((P * n, L)), torch.zeros((P * n, L))
    decoder, streams = _Decoder(model, max_new_tokens, pad_token_id), _Streams(n, seed)
    row = torch.zeros(0, dtype=torch.long)  # (B,) the row i * n + j of each unfinished row
    node = torch.zeros(0, dtype=torch.long)  # (B,) its node: its token history so far
    steps = torch.zeros(0, dtype=torch.long)  # (B,) tokens generated so far
    logits = torch.zeros((0, V), device=model.device)  # (N, V) per node
    bar = tqdm(total=P * n, desc="sampling", unit="sample", disable=not progress)
    while queue or len(row):
        free = batch_size - len(row)
        if queue and free >= ADMIT_FRACTION * batch_size:
            new, queue = queue[:free], queue[free:]
            ids = sorted({i for i, _ in new})
            node = torch.cat([node, len(logits) + torch.tensor([ids.index(i) for i, _ in new])])
            logits = torch.cat([logits, decoder.add([prompts[i] for i in ids], len(new))])
            streams.add([i for i, _ in new])
            row = torch.cat([row, torch.tensor([i * n + j for i, j in new])])
            steps = torch.cat([steps, torch.zeros(len(new), dtype=torch.long)])
        uniforms = streams.draw(row % n).to(logits.device) if temperature > 0 else None
        token, logp = _pick(logits[node.to(logits.device)], uniforms, temperature)
        token = token.cpu()
        tokens[row, steps] = token
        if with_stats:
            logp = logp.cpu()
            logprobs[row, steps] = logp.gather(-1, token[:, None])[:, 0]
            entropies[row, steps] = -(logp.exp() * logp).nan_to_num().sum(-1)
        steps += 1
        lengths[row] = steps
        going = ((token != eos_token_id) & (steps < L)).nonzero()[:, 0]
        bar.update(len(row) - len(going))
        streams.keep(going)
        row, node, steps, token = row[going], node[going], steps[going], token[going]
        children, child = torch.unique(node * V + token, return_inverse=True)  # by parent
        slots, feed = decoder.split(*(x.to(logits.device) for x in (children // V, children % V)))
        node = slots.cpu()[child]
        logits = decoder.step(feed) if len(row) else logits[:0]
    bar.close()
    stats = (logprobs.view(P, n, L), entropies.view(P, n, L)) if with_stats else (None, None)
    return Samples(tokens.view(P, n, L), lengths.view(P, n), *stats)


def sample_tokens(
    model: PreTrainedModel,
    prompts: list[list[int]],
    n: int,
    *,
    eos_token_id: int,
    pad_token_id: int | None = None,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    batch_size: int = 2048,
    seed: int = 0,
    with_stats: bool = False,
    progress: bool = True,
) -> Samples:
    """``n`` completions of each tokenized prompt, as token ids (see ``Samples``).

    ``temperature == 0`` decodes greedily. ``batch_size`` counts rows (prompt x sample) decoded
    together; it changes speed and memory (up to ``batch_size x max_new_tokens`` cached tokens
    per layer), not the result. ``with_stats`` also returns the log-probs and entropies (vLLM:
    its own log-probs, no entropies).
    """
    if n < 1 or batch_size < 1 or max_new_tokens < 1:
        raise ValueError(
            f"n, batch_size, max_new_tokens must be >= 1, got {n}, {batch_size}, {max_new_tokens}"
        )
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    empty = [i for i, p in enumerate(prompts) if len(p) == 0]
    if empty:
        raise ValueError(f"prompts must be non-empty, got empty prompt(s) at {empty[:10]}")
    settings = dict(
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id if pad_token_id is None else pad_token_id,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        with_stats=with_stats,
    )
    if vllm is not None and isinstance(model, vllm.LLM):
        return _sample_vllm(model, prompts, n, **settings)
    return _decode(model, prompts, n, batch_size=batch_size, progress=progress, **settings)


def _sample_vllm(
    llm, prompts: list[list[int]], n: int, *, pad_token_id: int, max_new_tokens: int, **settings
) -> Samples:
    """``sample_tokens`` with vLLM: one request per prompt, seeded by ``prompt_seed``."""
    params = [
        vllm.SamplingParams(
            n=n,
            temperature=settings["temperature"],
            max_tokens=max_new_tokens,
            stop_token_ids=[settings["eos_token_id"]],
            seed=prompt_seed(settings["seed"], i),
            logprobs=0 if settings["with_stats"] else None,
        )
        for i in range(len(prompts))
    ]
    inputs = [vllm.inputs.TokensPrompt(prompt_token_ids=p) for p in prompts]
    outputs = llm.generate(inputs, params, use_tqdm=False)
    tokens = torch.full((len(prompts), n, max_new_tokens), pad_token_id, dtype=torch.long)
    logprobs, lengths = torch.zeros(tokens.shape), torch.zeros(tokens.shape[:2], dtype=torch.long)
    for i, request in enumerate(outputs):
        for j, completion in enumerate(request.outputs):
            ids = list(completion.token_ids)
            tokens[i, j, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            lengths[i, j] = len(ids)
            if completion.logprobs is not None:
                chosen = [step[t].logprob for step, t in zip(completion.logprobs, ids, strict=True)]
                logprobs[i, j, : len(ids)] = torch.tensor(chosen)
    return Samples(tokens, lengths, logprobs if settings["with_stats"] else None)


def decode(tokenizer: PreTrainedTokenizerBase, samples: Samples) -> list[list[str]]:
    """The completions as text (special tokens dropped): ``out[i][j]`` is sample j of prompt i."""
    P, n, _ = samples.tokens.shape
    rows = samples.tokens.reshape(P * n, -1).tolist()
    lengths = samples.lengths.reshape(-1).tolist()
    texts = tokenizer.batch_decode(
        [row[:length] for row, length in zip(rows, lengths, strict=True)], skip_special_tokens=True
    )
    return [texts[i * n : (i + 1) * n] for i in range(P)]


def generate_samples(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    n: int,
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    batch_size: int = 2048,
    seed: int = 0,
    progress: bool = True,
) -> list[list[str]]:
    """``n`` completions for every prompt (``out[i][j]`` is sample j of prompt i), decoded.

    Deterministic for a seed. ``temperature == 0`` decodes greedily.
    """
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    samples = sample_tokens(
        model,
        ids,
        n,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        seed=seed,
        progress=progress,
    )
    return decode(tokenizer, samples)
