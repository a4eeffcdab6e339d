"""Many samples per problem from a causal LM, batched across problems."""

from __future__ import annotations

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase


@torch.no_grad()
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
    if n < 1 or batch_size < 1 or max_new_tokens < 1:
        raise ValueError(
            f"n, batch_size, max_new_tokens must be >= 1, got {n}, {batch_size}, {max_new_tokens}"
        )
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    rows = [p for p in prompts for _ in range(n)]
    texts: list[str] = []
    sample = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for start in tqdm(range(0, len(rows), batch_size), desc="sampling", disable=not progress):
            enc = tokenizer(
                rows[start : start + batch_size],
                return_tensors="pt",
                padding=True,
                padding_side="left",
                add_special_tokens=False,
            )
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                **(sample if temperature > 0 else {"do_sample": False}),
            )
            texts += tokenizer.batch_decode(
                out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True
            )
    return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
