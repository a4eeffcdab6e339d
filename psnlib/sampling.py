"""Many samples per problem from a causal LM: the cost behind every pass@k figure.

``sample_tokens`` draws ``n`` completions for each prompt and returns their token ids (and, on
request, per-token log-probs and entropies); ``sample_rows`` draws a different number of
completions per prompt (training rollouts). Up to ``batch_size`` rows are decoded at once by
``psnlib.decoder.TreeDecoder`` (a KV cache written in place; rows with the same token history
decoded once), and the batch is kept full: rows leave at EOS and new rows join in cohorts once
half the batch is free.

Sampling is by inverse CDF with one uniform per row and step. The uniforms of prompt ``i`` come
from a generator seeded by ``(seed, i)``, so sample ``j`` of prompt ``i`` depends on the seed, the
prompt, ``i``, ``j`` and ``n`` (the largest count) only, up to floating-point rounding: not on the
batch size or the other prompts. Rows join in order of prompt length, so padding is small.

The decoder runs Llama-layout models (Llama, Qwen2, Qwen3: the testbed's families and the GPU
profiles' models). A ``vllm.LLM`` passed as ``model`` is sampled with vLLM instead (GPU users;
same call, same result type, no entropies).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.decoder import Route, TreeDecoder

ADMIT_FRACTION = 0.5  # new rows join once this share of the batch is free (fewer cohorts)

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
    each position, 0 past the end. ``sample_rows`` returns the same fields with the prompt and
    sample axes flattened into rows: (R, L) and (R,), prompt-major.
    """

    tokens: torch.Tensor  # (P, n, L) long
    lengths: torch.Tensor  # (P, n) long
    logprobs: torch.Tensor | None = None  # (P, n, L) float
    entropies: torch.Tensor | None = None  # (P, n, L) float

    def view(self, *shape: int) -> Samples:
        """The same samples with the leading axes reshaped (the last, L, kept)."""
        L = self.tokens.shape[-1]
        stats = [None if x is None else x.view(*shape, L) for x in (self.logprobs, self.entropies)]
        return Samples(self.tokens.view(*shape, L), self.lengths.view(*shape), *stats)


def prompt_seed(seed: int, index: int) -> int:
    """The seed of prompt ``index``'s random stream (stable across processes)."""
    digest = hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


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
        self.n, self.seed = n, seed  # n: the most samples of any prompt
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


def _decode(
    model: PreTrainedModel,
    prompts: list[list[int]],
    counts: list[int],
    *,
    eos_token_id: list[int],
    pad_token_id: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int,
    seed: int,
    with_stats: bool,
    progress: bool,
    route: Route | None,
) -> Samples:
    """``counts[i]`` samples of prompt i, as rows (R, L): row ``first[i] + j`` is its sample j."""
    R, L, V = sum(counts), max_new_tokens, model.config.vocab_size
    first = [sum(counts[:i]) for i in range(len(counts))]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    queue = [(i, j) for i in order for j in range(counts[i])]  # rows still to join
    tokens = torch.full((R, L), pad_token_id, dtype=torch.long)
    lengths = torch.zeros(R, dtype=torch.long)
    logprobs, entropies = torch.zeros((R, L)), torch.zeros((R, L))
    eos = torch.tensor(eos_token_id)
    decoder = TreeDecoder(model, max_new_tokens, pad_token_id, route)
    streams = _Streams(max(counts, default=1), seed)
    row = torch.zeros(0, dtype=torch.long)  # (B,) the row first[i] + j of each unfinished row
    sample = torch.zeros(0, dtype=torch.long)  # (B,) its sample index j
    node = torch.zeros(0, dtype=torch.long)  # (B,) its node: its token history so far
    steps = torch.zeros(0, dtype=torch.long)  # (B,) tokens generated so far
    logits = torch.zeros((0, V), device=model.device)  # (N, V) per node
    bar = tqdm(total=R, desc="sampling", unit="sample", disable=not progress)
    while queue or len(row):
        free = batch_size - len(row)
        if queue and free >= ADMIT_FRACTION * batch_size:
            new, queue = queue[:free], queue[free:]
            ids = sorted({i for i, _ in new})
            node = torch.cat([node, len(logits) + torch.tensor([ids.index(i) for i, _ in new])])
            logits = torch.cat([logits, decoder.add([prompts[i] for i in ids], ids, len(new))])
            streams.add([i for i, _ in new])
            row = torch.cat([row, torch.tensor([first[i] + j for i, j in new])])
            sample = torch.cat([sample, torch.tensor([j for _, j in new])])
            steps = torch.cat([steps, torch.zeros(len(new), dtype=torch.long)])
        uniforms = streams.draw(sample).to(logits.device) if temperature > 0 else None
        token, logp = _pick(logits[node.to(logits.device)], uniforms, temperature)
        token = token.cpu()
        tokens[row, steps] = token
        if with_stats:
            logp = logp.cpu()
            logprobs[row, steps] = logp.gather(-1, token[:, None])[:, 0]
            entropies[row, steps] = -(logp.exp() * logp).nan_to_num().sum(-1)
        steps += 1
        lengths[row] = steps
        going = (~torch.isin(token, eos) & (steps < L)).nonzero()[:, 0]
        bar.update(len(row) - len(going))
        streams.keep(going)
        row, sample, node, steps = row[going], sample[going], node[going], steps[going]
        token = token[going]
        children, child = torch.unique(node * V + token, return_inverse=True)  # by parent
        slots, feed = decoder.split(*(x.to(logits.device) for x in (children // V, children % V)))
        node = slots.cpu()[child]
        logits = decoder.step(feed) if len(row) else logits[:0]
    bar.close()
    return Samples(tokens, lengths, *((logprobs, entropies) if with_stats else (None, None)))


def sample_rows(
    model: PreTrainedModel,
    prompts: list[list[int]],
    counts: Sequence[int],
    *,
    eos_token_id: int | Sequence[int],
    pad_token_id: int | None = None,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    batch_size: int = 2048,
    seed: int = 0,
    with_stats: bool = False,
    progress: bool = True,
    route: Route | None = None,
) -> Samples:
    """``counts[i]`` completions of tokenized prompt i, as rows (R, L), prompt-major.

    ``temperature == 0`` decodes greedily. ``eos_token_id``: one id or several (a row ends at
    any). ``batch_size`` counts rows (prompt x sample) decoded together; it changes speed and
    memory (up to ``batch_size x max_new_tokens`` cached tokens per layer), not the result.
    ``with_stats`` also returns the log-probs and entropies (vLLM: its own log-probs, no
    entropies). ``route``, if given, is called before every model forward with the prompt index
    of each row of that forward (``psnlib.noise.perturbed_rows`` routes rows to their noise).
    """
    counts = list(counts)
    if len(counts) != len(prompts) or any(c < 0 for c in counts):
        raise ValueError(
            f"counts must hold one count >= 0 per prompt ({len(prompts)}), got {counts[:10]}"
        )
    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError(
            f"batch_size and max_new_tokens must be >= 1, got {batch_size}, {max_new_tokens}"
        )
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    empty = [i for i, p in enumerate(prompts) if len(p) == 0]
    if empty:
        raise ValueError(f"prompts must be non-empty, got empty prompt(s) at {empty[:10]}")
    eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
    settings = dict(
        eos_token_id=eos,
        pad_token_id=eos[0] if pad_token_id is None else pad_token_id,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        with_stats=with_stats,
    )
    if vllm is not None and isinstance(model, vllm.LLM):
        if route is not None:
            raise ValueError("route needs the psnlib decoder; vLLM runs its own forwards")
        return _sample_vllm(model, prompts, counts, **settings)
    with torch.inference_mode():  # no autograd bookkeeping: ~4% less CPU than no_grad, same numbers
        samples = _decode(
            model,
            prompts,
            counts,
            batch_size=batch_size,
            progress=progress,
            route=route,
            **settings,
        )
    fields = (samples.tokens, samples.lengths, samples.logprobs, samples.entropies)
    return Samples(*(None if x is None else x.clone() for x in fields))  # plain tensors again


def sample_tokens(
    model: PreTrainedModel, prompts: list[list[int]], n: int, **kwargs: object
) -> Samples:
    """``n`` completions of each tokenized prompt, as token ids (P, n, L): see ``Samples``.

    Takes ``sample_rows``' keyword arguments.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return sample_rows(model, prompts, [n] * len(prompts), **kwargs).view(len(prompts), n)


def sample_prompts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    n: int,
    **kwargs: object,
) -> Samples:
    """``sample_tokens`` of text prompts, with the tokenizer's EOS and padding tokens."""
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    return sample_tokens(
        model,
        ids,
        n,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **kwargs,
    )


def _sample_vllm(
    llm,
    prompts: list[list[int]],
    counts: list[int],
    *,
    pad_token_id: int,
    max_new_tokens: int,
    **settings,
) -> Samples:
    """``sample_rows`` with vLLM: one request per prompt, seeded by ``prompt_seed``."""
    params = [
        vllm.SamplingParams(
            n=count,
            temperature=settings["temperature"],
            max_tokens=max_new_tokens,
            stop_token_ids=settings["eos_token_id"],
            seed=prompt_seed(settings["seed"], i),
            logprobs=0 if settings["with_stats"] else None,
        )
        for i, count in enumerate(counts)
    ]
    inputs = [vllm.inputs.TokensPrompt(prompt_token_ids=p) for p in prompts]
    outputs = llm.generate(inputs, params, use_tqdm=False)
    tokens = torch.full((sum(counts), max_new_tokens), pad_token_id, dtype=torch.long)
    logprobs, lengths = torch.zeros(tokens.shape), torch.zeros(len(tokens), dtype=torch.long)
    r = 0
    for request in outputs:
        for completion in request.outputs:
            ids = list(completion.token_ids)
            tokens[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            lengths[r] = len(ids)
            if completion.logprobs is not None:
                chosen = [step[t].logprob for step, t in zip(completion.logprobs, ids, strict=True)]
                logprobs[r, : len(ids)] = torch.tensor(chosen)
            r += 1
    return Samples(tokens, lengths, logprobs if settings["with_stats"] else None)


def decode(tokenizer: PreTrainedTokenizerBase, samples: Samples) -> list[list[str]]:
    """The completions as text (special tokens dropped): ``out[i][j]`` is sample j of prompt i."""
    P, n, _ = samples.tokens.shape
    rows = samples.tokens.reshape(P * n, -1).tolist()
    lengths = samples.lengths.reshape(-1).tolist()
    ids = [tuple(row[:length]) for row, length in zip(rows, lengths, strict=True)]
    distinct = list(dict.fromkeys(ids))  # each distinct completion decoded once
    text_of = dict(zip(distinct, batch_decode(tokenizer, distinct), strict=True))
    texts = [text_of[row] for row in ids]
    return [texts[i * n : (i + 1) * n] for i in range(P)]


def batch_decode(tokenizer: PreTrainedTokenizerBase, ids: Sequence[Sequence[int]]) -> list[str]:
    """``tokenizer.batch_decode(ids, skip_special_tokens=True)``, the same strings. A fast
    tokenizer that cleans up no spaces is decoded by its Rust backend in one call: its
    ``batch_decode`` makes that call once per sequence (3x the CPU time on evaluation batches)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or tokenizer.clean_up_tokenization_spaces:
        return tokenizer.batch_decode(ids, skip_special_tokens=True)
    return backend.decode_batch([list(row) for row in ids], skip_special_tokens=True)


def generate_samples(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    n: int,
    **kwargs: object,
) -> list[list[str]]:
    """``n`` completions for every text prompt, decoded: ``out[i][j]`` is sample j of prompt i.

    Deterministic for a seed; takes ``sample_rows``' keyword arguments (``temperature == 0``
    decodes greedily).
    """
    return decode(tokenizer, sample_prompts(model, tokenizer, prompts, n, **kwargs))
