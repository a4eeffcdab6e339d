"""Many samples per problem from a causal LM: the cost behind every pass@k figure.

``sample_tokens`` draws ``n`` completions for each prompt and returns their token ids (and, on
request, per-token log-probs and entropies). It decodes one token per step for up to
``batch_size`` rows at once, with the model's own modules and a KV cache written in place, and
keeps the batch full: rows leave at EOS and new rows join as *cohorts*. A cohort is a set of rows
that joined together: one prefill of their prompts (each prompt once, its KV shared by all its
samples) and a time axis of their own, so attention never spans more than a row's own history.
Everything but attention (norms, projections, MLP, head) runs on all rows together.

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
COMPACT_FRACTION = 0.25  # compact a cohort once this share of its rows is done; refill likewise

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
    """Rows that joined together: one prefill of their prompts, then a time axis of their own.

    Attention of a row's query covers its prompt and its own generated tokens. The prompt part is
    shared by all samples of a prompt, so it is two batched matmuls against the KV of all the
    cohort's prompts, other prompts' slots masked out (a cohort holds few prompts). The generated
    part is per row, in a sequence-first cache (T, b, H, D) with KV heads repeated to H: for one
    query per row that is elementwise work over long contiguous rows, several times faster on CPU
    than b x H tiny matmuls.
    """

    def __init__(
        self, cache: DynamicCache, mask: torch.Tensor, prompt_of: torch.Tensor, heads: int, new: int
    ) -> None:
        P, W = mask.shape  # (P, W): 1 on prompt tokens, 0 on left padding
        b = len(prompt_of)
        self.prompt_keys, self.prompt_values = [], []  # per layer (H, D, P*W), (H, P*W, D)
        self.keys, self.values = [], []  # per layer (new, b, H, D)
        for layer in cache.layers:
            k, v = (
                (x * mask[:, None, :, None]).repeat_interleave(heads // x.shape[1], dim=1)
                for x in (layer.keys, layer.values)
            )  # (P, H, W, D), zeros on padding
            self.prompt_keys.append(k.permute(1, 3, 0, 2).reshape(heads, -1, P * W))
            self.prompt_values.append(v.permute(1, 0, 2, 3).reshape(heads, P * W, -1))
            self.keys.append(k.new_empty((new, b, heads, k.shape[-1])))
            self.values.append(v.new_empty((new, b, heads, v.shape[-1])))
        own = (prompt_of[:, None, None] == torch.arange(P, device=mask.device)[:, None]) & (
            mask == 1
        )  # (b, P, W): the row's own prompt tokens
        self.prompt_bias = torch.zeros(own.shape, dtype=k.dtype, device=k.device)
        self.prompt_bias = self.prompt_bias.masked_fill(~own, float("-inf")).view(b, P * W)
        self.s = 0  # tokens generated so far: the slot of the next one

    def __len__(self) -> int:
        return len(self.prompt_bias)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Store k, v (b, H, D) at the current slot; attention of the scaled query q (b, H, D)."""
        keys, values, s = self.keys[layer], self.values[layer], self.s
        keys[s], values[s] = k, v
        prompt = torch.baddbmm(self.prompt_bias, q.transpose(0, 1), self.prompt_keys[layer])
        own = (keys[: s + 1] * q).sum(-1).permute(2, 1, 0)  # (H, b, s + 1); prompt (H, b, P*W)
        weights = torch.cat([prompt, own], dim=-1).softmax(-1)  # (H, b, P*W + s + 1)
        y = torch.bmm(weights[..., : prompt.shape[-1]], self.prompt_values[layer])  # (H, b, D)
        mine = weights[..., prompt.shape[-1] :].permute(2, 1, 0)[..., None]  # (s + 1, b, H, 1)
        return y.transpose(0, 1) + (mine * values[: s + 1]).sum(0)  # (b, H, D)

    def keep(self, rows: torch.Tensor) -> None:
        self.keys = [k[:, rows] for k in self.keys]
        self.values = [v[:, rows] for v in self.values]
        self.prompt_bias = self.prompt_bias[rows]


class _Decoder:
    """Llama-layout decoder layers over cohorts of rows, one token per row and step.

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
        self.positions = torch.zeros(0, dtype=torch.long, device=model.device)  # (B,)

    def add(self, prompts: list[list[int]], prompt_of: torch.Tensor) -> torch.Tensor:
        """A cohort of rows, row r a sample of ``prompts[prompt_of[r]]``; their logits (b, V)."""
        logits, cache, mask = _prefill(self.model, prompts, self.pad)
        prompt_of = prompt_of.to(mask.device)
        self.cohorts.append(_Cohort(cache, mask, prompt_of, self.heads[0], self.max_new))
        self.positions = torch.cat([self.positions, mask[prompt_of].sum(-1)])
        return logits[prompt_of]

    def compact(self, live: torch.Tensor) -> torch.Tensor:
        """Drop the done rows of cohorts where enough are done: which rows remain, (B,) bool."""
        kept, cohorts = [], []
        for cohort, alive in zip(
            self.cohorts, live.split([len(c) for c in self.cohorts]), strict=True
        ):
            if (~alive).sum() >= COMPACT_FRACTION * len(alive):
                cohort.keep(alive.nonzero()[:, 0])
                kept.append(alive)
            else:
                kept.append(torch.ones_like(alive))
            if len(cohort):
                cohorts.append(cohort)
        self.cohorts, kept = cohorts, torch.cat(kept)
        self.positions = self.positions[kept]
        return kept

    def step(self, tokens: torch.Tensor) -> torch.Tensor:  # (B,) -> (B, V)
        B, (H, KV) = len(tokens), self.heads
        sizes = [len(c) for c in self.cohorts]
        h = self.base.embed_tokens(tokens)  # (B, C)
        cos, sin = self.base.rotary_emb(h, self.positions[:, None])  # (B, 1, D)
        for i, layer in enumerate(self.base.layers):
            attn, mlp = layer.self_attn, layer.mlp
            x = _norm(layer.input_layernorm, h)
            qk = torch.cat([attn.q_proj(x), attn.k_proj(x)], -1).view(B, H + KV, -1)
            q, k = _rotate(qk, cos, sin).split([H, KV], dim=1)  # (B, H, D), (B, KV, D)
            v = attn.v_proj(x).view(B, KV, -1)  # (B, KV, D)
            if KV < H:  # grouped-query attention: one KV head per H // KV query heads
                k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            qkv = (q * attn.scaling).split(sizes), k.split(sizes), v.split(sizes)
            y = torch.cat([c.attend(i, *part) for c, *part in zip(self.cohorts, *qkv, strict=True)])
            h = h + attn.o_proj(y.view(B, -1))
            x = _norm(layer.post_attention_layernorm, h)
            h = h + mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)).mul_(mlp.up_proj(x)))
        for cohort in self.cohorts:
            cohort.s += 1
        self.positions = self.positions + 1
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
    P, L = len(prompts), max_new_tokens
    order = sorted(range(P), key=lambda i: len(prompts[i]))
    queue = [(i, j) for i in order for j in range(n)]  # rows still to join
    tokens = torch.full((P * n, L), pad_token_id, dtype=torch.long)  # row i * n + j
    lengths = torch.zeros(P * n, dtype=torch.long)
    logprobs, entropies = torch.zeros((P * n, L)), torch.zeros((P * n, L))
    decoder, streams = _Decoder(model, max_new_tokens, pad_token_id), _Streams(n, seed)
    row = torch.zeros(0, dtype=torch.long)  # (B,) the row i * n + j of each batch row
    steps = torch.zeros(0, dtype=torch.long)  # (B,) tokens generated so far
    live = torch.zeros(0, dtype=torch.bool)  # (B,) not done
    logits = torch.zeros((0, model.config.vocab_size), device=model.device)  # (B, V)
    bar = tqdm(total=P * n, desc="sampling", unit="sample", disable=not progress)
    while queue or len(row):
        free = batch_size - len(row)
        if queue and free >= COMPACT_FRACTION * batch_size:
            new, queue = queue[:free], queue[free:]
            ids = sorted({i for i, _ in new})
            prompt_of = torch.tensor([ids.index(i) for i, _ in new])
            logits = torch.cat([logits, decoder.add([prompts[i] for i in ids], prompt_of)])
            streams.add([i for i, _ in new])
            row = torch.cat([row, torch.tensor([i * n + j for i, j in new])])
            steps = torch.cat([steps, torch.zeros(len(new), dtype=torch.long)])
            live = torch.cat([live, torch.ones(len(new), dtype=torch.bool)])
        uniforms = streams.draw(row % n).to(logits.device) if temperature > 0 else None
        token, logp = _pick(logits, uniforms, temperature)
        token = torch.where(live, token.cpu(), pad_token_id)
        at = live.nonzero()[:, 0]
        tokens[row[at], steps[at]] = token[at]
        if with_stats:
            logp = logp[at.to(logp.device)].cpu()
            logprobs[row[at], steps[at]] = logp.gather(-1, token[at, None])[:, 0]
            entropies[row[at], steps[at]] = -(logp.exp() * logp).nan_to_num().sum(-1)
        steps += live.long()
        lengths[row[at]] = steps[at]
        live &= (token != eos_token_id) & (steps < L)
        bar.update(len(at) - int(live[at].sum()))
        kept = decoder.compact(live.to(logits.device)).cpu()
        if not kept.all():
            at = kept.nonzero()[:, 0]
            streams.keep(at)
            row, steps, live, token = row[at], steps[at], live[at], token[at]
        logits = decoder.step(token.to(logits.device)) if len(row) else logits[:0]
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
    batch_size: int = 1024,
    seed: int = 0,
    with_stats: bool = False,
    progress: bool = True,
) -> Samples:
    """``n`` completions of each tokenized prompt, as token ids (see ``Samples``).

    ``temperature == 0`` decodes greedily. ``batch_size`` counts rows (prompt x sample) decoded
    together; it changes speed and memory, not the result. ``with_stats`` also returns the
    log-probs and entropies (vLLM: its own log-probs, no entropies).
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
    batch_size: int = 1024,
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
