"""Noisy rollouts on vLLM: PSN-GRPO's rollouts sampled by TRL's vLLM engine (``use_vllm=True``).

vLLM holds its own copy of the policy's weights, which TRL refreshes with
``VLLMGeneration.sync_weights()`` (colocate mode: ``load_weights`` into the in-process engine;
server mode: an NCCL broadcast to ``trl vllm-serve``). PSN rollouts need that copy to hold
``W + sigma * eps_k``. ``noisy_weights`` does it without touching the training weights: while it
is active, the parameter stream that ``sync_weights`` walks yields ``W + sigma * eps_k`` for every
targeted weight, drawn exactly as ``psnlib.noise.perturbed`` draws it (seeded by the parameter's
name in the model, the step and the noise index), so vLLM samples the same noisy policy as the
transformers path. Each weight is noised as TRL gathers it, which keeps DeepSpeed ZeRO-3 right
(there an in-place perturbation would see each process's empty shard, not the weight). With the
released code's site, ``every_parameter``, every weight of the stream is noised, embeddings and
norms included, at step or rollout scope; a head tied to the embedding is streamed once, as the
embedding, and vLLM ties it.

``generate_noisy`` samples rows that carry noise indices: one sync and one ``generate`` call per
distinct index (``step`` scope: one per replica, ``noise_replicas`` per step; ``rollout`` scope:
one per noise sample, G per step; ``CLEAN`` rows, the diversity scheduler's clean pairs, one more
on the clean weights). The behaviour log-probs are vLLM's (after temperature: TRL runs vLLM with
``processed_logprobs``), so the TIS weight ``min(pi_clean / pi_noisy, C)`` is TRL's own vLLM
importance-sampling correction, which ``PSNGRPOConfig`` sets from ``use_tis``, ``tis_level`` and
``tis_cap``.

Afterwards vLLM holds noisy weights: the trainer marks its copy stale (TRL's
``_last_loaded_step``), so the next clean generation (evaluation) syncs the clean weights first.
The training weights are only read, so they stay bit-exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

from psnlib.noise import CLEAN, NoiseConfig, draw_noise, target_parameters

# The sampling settings under which TRL 1.16's vLLM importance-sampling weight is unbiased: its
# behaviour log-probs are the full softmax's, so any truncation of it (top_p < 1, top_k > 0,
# min_p > 0) samples from another distribution than the one the weight assumes.
UNTRUNCATED = {"top_p": (1.0,), "top_k": (0, -1, None), "min_p": (0.0, None)}


def check_tis_sampling(settings: dict[str, Any], generation_kwargs: dict[str, Any] | None) -> None:
    """With PSN's TIS on vLLM (TRL's importance-sampling correction), refuse a sampler that
    truncates the distribution (``UNTRUNCATED``, in ``settings`` or ``generation_kwargs``): a
    ValueError naming each setting and what it must be."""
    given = {**settings, **{k: v for k, v in (generation_kwargs or {}).items() if k in UNTRUNCATED}}
    wrong = {
        name: given[name] for name, allowed in UNTRUNCATED.items() if given.get(name) not in allowed
    }
    if wrong:
        raise ValueError(
            f"use_tis with use_vllm: TRL's vLLM importance-sampling weight is biased under a "
            f"truncated sampler, got {wrong}; set top_p=1, top_k=0 (or -1, None) and min_p=0 "
            "(or None), or use_tis=False"
        )


def noise_groups(noise: list[int]) -> dict[int, list[int]]:
    """The rows of each noise index, indices in ascending order (``CLEAN`` first): the same order
    on every process, so the syncs (collective under DeepSpeed and in server mode) line up."""
    groups: dict[int, list[int]] = {}
    for row, index in enumerate(noise):
        groups.setdefault(index, []).append(row)
    return dict(sorted(groups.items()))


@contextmanager
def noisy_weights(
    generation: Any,
    model: nn.Module,
    config: NoiseConfig,
    step: int,
    index: int,
    sigma: float,
) -> Iterator[None]:
    """While active, ``generation.sync_weights()`` sends ``W + sigma * eps(step, index)`` for the
    weights ``config.targets`` picks in ``model`` and the clean weights for the others.

    ``generation`` is TRL's ``VLLMGeneration`` (or anything with its ``_iter_named_params`` and
    ``_fix_param_name_to_vllm``). ``CLEAN`` or ``sigma == 0`` sends the clean weights. A targeted
    weight that the sync never sent (a name TRL renamed, e.g. under PEFT) is an error.
    """
    if index == CLEAN or sigma == 0:
        yield
        return
    targets = {
        generation._fix_param_name_to_vllm(name): name
        for name in target_parameters(model, config.targets)
    }
    clean_stream = generation._iter_named_params  # the bound method: gathers, then yields
    sent: set[str] = set()

    def stream() -> Iterator[tuple[str, Any]]:
        for name, param in clean_stream():
            source = targets.get(name)
            if source is not None:
                sent.add(name)
                param = param + draw_noise(param, source, config, step, index, sigma)  # W~
            yield name, param

    generation._iter_named_params = stream  # an instance attribute shadows the method
    try:
        yield
    finally:
        del generation._iter_named_params
    missing = sorted(set(targets) - sent)
    if missing:
        raise RuntimeError(
            f"the vLLM weight sync never sent the noise targets {missing[:5]} "
            f"({len(missing)} in all): their names differ in TRL's stream; noise not applied"
        )


def generate_noisy(
    generation: Any,
    model: nn.Module,
    config: NoiseConfig,
    step: int,
    sigma: float,
    prompt_ids: list[list[int]],
    noise: list[int],
) -> tuple[list[list[int]], list[list[float]]]:
    """Sample one completion per row of ``prompt_ids`` on vLLM, row b under noise index
    ``noise[b]`` (``CLEAN``: the clean weights): per distinct index, sync the weights under that
    noise, then generate that index's rows. Returns the completions' token ids and their
    behaviour log-probs (vLLM's, one per token). vLLM is left holding the last index's weights.
    """
    if sigma == 0:  # every noise sample is the clean policy: one sync
        noise = [CLEAN] * len(noise)
    completions: list[list[int]] = [[] for _ in prompt_ids]
    logps: list[list[float]] = [[] for _ in prompt_ids]
    for index, rows in noise_groups(noise).items():
        with noisy_weights(generation, model, config, step, index, sigma):
            generation.sync_weights()
        # One completion per row: the rows of one index are whole groups only in step scope.
        _, ids, row_logps, _ = generation.generate(
            prompts=[prompt_ids[r] for r in rows], images=None, num_generations=1
        )
        for r, completion, token_logps in zip(rows, ids, row_logps, strict=True):
            completions[r] = list(completion)
            logps[r] = [top[0] for top in token_logps]  # the sampled token's log-prob
    return completions, logps
