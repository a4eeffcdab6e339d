"""The loss's forward without its padding: rows grouped by completion length.

TRL scores a batch of rollouts in one forward over ``(B, prompt + longest completion)``: every
row is padded to the longest completion of the batch. On the testbed (completions of 10 to 48
tokens, ~15-token prompts) 20-40% of the forward's and backward's tokens are padding. Here the
rows are sorted by completion length and cut into ``groups`` groups, and each group runs TRL's
forward cut to its own longest completion; the log-probs (and entropies) are put back in the
batch's order and width, 0 past each group's width.

A causal model's outputs at a position do not depend on later positions, so the numbers are
those of the padded forward up to rounding: on the testbed's policy the log-probs agree to 2e-6
and the gradients to float32 rounding (``tests/test_length_groups.py`` checks both against one
padded forward). With 4 groups, one captured batch of 128 rollouts took 40% less CPU time
forward and backward; early in training, with less spread in length, the saving is smaller
(README, "Performance").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

Forward = Callable[..., tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]]


def completion_widths(completion_mask: torch.Tensor) -> torch.Tensor:
    """Per row, the position after its last completion token (B,): 0 for a fully masked row."""
    L = completion_mask.shape[1]
    position = torch.arange(1, L + 1, device=completion_mask.device)  # (L,)
    return (completion_mask.bool() * position).amax(dim=1)  # (B,)


def grouped_forward(
    forward: Forward,
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    groups: int,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor | None, None]:
    """``forward`` (TRL's ``_get_per_token_logps_and_entropies``) over ``groups`` groups of rows
    of similar completion length, each without trailing padding; same result shapes (B, T).

    ``input_ids`` and ``attention_mask`` (B, P + T) hold left-padded prompts then right-padded
    completions (T = ``logits_to_keep``). ``kwargs`` go to ``forward`` unchanged (text only: no
    MoE auxiliary loss).
    """
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    B, T = input_ids.shape[0], logits_to_keep
    widths = completion_widths(attention_mask[:, -T:])  # (B,)
    order = widths.argsort(descending=True, stable=True)  # (B,) longest first
    logps, entropies = [], []
    for rows in order.tensor_split(min(groups, B)):
        width = max(1, int(widths[rows].max()))  # the group's longest completion
        cut = input_ids.shape[1] - T + width  # prompt + width columns
        lp, ent, _ = forward(
            model, input_ids[rows, :cut], attention_mask[rows, :cut], width, **kwargs
        )
        logps.append(F.pad(lp, (0, T - width)))  # (b, T)
        if ent is not None:
            entropies.append(F.pad(ent, (0, T - width)))
    back = order.argsort()  # (B,) each row's place in the sorted order
    return torch.cat(logps)[back], (torch.cat(entropies)[back] if entropies else None), None
