"""What a training rollout records beside its tokens, for ``PSNGRPOTrainer``.

``SampledLogps``: the behaviour log-probs of rollouts that TRL's ``generate`` samples (the
``rollout_engine="generate"`` path; ``psnlib.sampling`` returns them itself).
``self_certainties``: Eq. SC of the diversity scheduler's clean answers, by one teacher-forced
forward of the clean policy.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from psnlib.schedulers import self_certainty


class SampledLogps:
    """Records, while ``generate`` runs, each sampled token's log-prob under the sampling weights.

    A forward hook keeps the temperature-scaled log-softmax of the last position; the next
    decoding step's input token is the one sampled from it. Same definition as TRL's log-probs.
    """

    def __init__(self, model: nn.Module, temperature: float) -> None:
        self.model, self.temperature = model, temperature
        self.steps: list[torch.Tensor] = []  # one (B, 1) per decoded token but the last
        self.last: torch.Tensor | None = None  # (B, V)

    def __enter__(self) -> SampledLogps:
        self.handle = self.model.register_forward_hook(self.hook, with_kwargs=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()

    def hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        input_ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]  # (B, t)
        if self.last is not None:
            self.steps.append(self.last.gather(1, input_ids[:, -1:]))  # (B, 1)
        self.last = torch.log_softmax(output.logits[:, -1].float() / self.temperature, dim=-1)

    def logps(self, completion_ids: list[list[int]]) -> list[list[float]]:
        """The log-probs of each (unpadded) completion, in the list-of-lists form TRL expects."""
        final = len(self.steps)  # position of the token sampled from `self.last`
        last_tokens = [ids[final] if len(ids) > final else 0 for ids in completion_ids]
        last_tokens = torch.tensor(last_tokens, device=self.last.device)[:, None]  # (B, 1)
        table = torch.cat([*self.steps, self.last.gather(1, last_tokens)], dim=1)  # (B, L)
        return [row[: len(ids)].tolist() for row, ids in zip(table, completion_ids, strict=True)]


@torch.no_grad()
def self_certainties(
    model: nn.Module, prompts: list[list[int]], completions: list[list[int]], pad_token_id: int
) -> list[float]:
    """Eq. SC of each completion: the mean over its positions of ``KL(U || p)`` of the raw
    next-token distribution it was sampled from (an empty completion: its first one)."""
    texts = [p + c for p, c in zip(prompts, completions, strict=True)]
    width = max(len(p) + max(len(c), 1) for p, c in zip(prompts, completions, strict=True))
    ids = torch.full((len(texts), width), pad_token_id, dtype=torch.long)  # (R, T) right-padded
    mask = torch.zeros((len(texts), width), dtype=torch.long)  # (R, T)
    for r, text in enumerate(texts):
        ids[r, : len(text)], mask[r, : len(text)] = torch.tensor(text), 1
    logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).logits
    return [
        self_certainty(logits[r, len(p) - 1 : len(p) - 1 + max(len(c), 1)].float()).mean().item()
        for r, (p, c) in enumerate(zip(prompts, completions, strict=True))
    ]
