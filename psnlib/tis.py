"""Truncated importance sampling (TIS): reweight tokens sampled by the noisy policy.

Rollouts come from the noisy weights ``W~`` but gradients update the clean ``W``. Each token's
policy-gradient loss is multiplied by the detached, truncated ratio

    w_t = min(pi_clean(a_t) / pi_noisy(a_t), C)                       (Eq. TIS, token level)

or, at sequence level, by one weight per rollout from the summed log-probs

    w = min(exp(sum_t log pi_clean(a_t) - log pi_noisy(a_t)), C)      (Eq. TIS, sequence level)

The paper uses token level with C = 10; without TIS, PSN does worse than plain GRPO.

Masked sequence-level importance sampling (``sequence_mask``, the 3PO-style correction for
in-group diverse noise, arXiv 2608.09805): a rollout whose sequence ratio leaves the band
``[1/C, C]`` is masked out of the loss, one inside it keeps its untruncated ratio,

    r = exp(sum_t log pi_clean(a_t) - log pi_noisy(a_t)),
    w = r * 1[1/C <= r <= C]                                          (Eq. MIS, sequence level)

so a rollout the clean policy would rarely write contributes nothing rather than a capped weight.
"""

from __future__ import annotations

import math

import torch

LEVELS = ("token", "sequence", "sequence_mask")
MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: far above any cap, far below float32 overflow


def check_tis(cap: float, level: str) -> None:
    """Raise a ValueError naming the value if ``cap`` or ``level`` is not allowed."""
    if not isinstance(cap, int | float) or not math.isfinite(cap) or cap <= 0:
        raise ValueError(f"TIS cap must be a finite number > 0 (the paper uses 10), got {cap!r}")
    if level not in LEVELS:
        raise ValueError(f"unknown TIS level {level!r}; allowed: {', '.join(LEVELS)}")


def tis_weights(
    clean_logps: torch.Tensor,
    behaviour_logps: torch.Tensor,
    mask: torch.Tensor,
    cap: float = 10.0,
    level: str = "token",
) -> torch.Tensor:
    """Detached TIS weights: (B, T) at token level, (B, 1) at sequence level and masked sequence
    level (``sequence_mask``: 0 for a rollout whose ratio leaves ``[1/cap, cap]``, Eq. MIS).

    ``clean_logps`` and ``behaviour_logps`` are the log-probs of the sampled tokens, (B, T), under
    the clean and the noisy policy; ``mask`` (B, T) marks real completion tokens. Masked positions
    get weight 1. Log-ratios are clamped to ``MAX_LOG_RATIO`` before ``exp``, so huge ratios give
    exactly ``cap`` instead of overflowing.
    """
    check_tis(cap, level)
    mask = mask.bool()
    log_ratio = (clean_logps.detach() - behaviour_logps.detach()).float()  # (B, T)
    log_ratio = torch.where(mask, log_ratio, torch.zeros_like(log_ratio))  # padding may hold junk
    if level == "sequence_mask":
        log_r = log_ratio.sum(dim=-1, keepdim=True)  # (B, 1): log r
        inside = log_r.abs() <= math.log(cap)  # 1/C <= r <= C: exp cannot overflow there
        return torch.where(inside, log_r.clamp(max=MAX_LOG_RATIO).exp(), 0.0)  # Eq. MIS
    if level == "sequence":
        log_ratio = log_ratio.sum(dim=-1, keepdim=True)  # (B, 1)
    return log_ratio.clamp(max=MAX_LOG_RATIO).exp().clamp(max=cap)  # Eq. TIS: min(ratio, C)


def kl_proxy(
    clean_logps: torch.Tensor, behaviour_logps: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``d = mean_t (log pi_noisy(a_t) - log pi_clean(a_t))`` over the sampled tokens, a scalar.

    A Monte-Carlo estimate of KL(pi_noisy || pi_clean), since the tokens come from pi_noisy; the
    adaptive sigma scheduler (Variant I) steers it towards a target.
    """
    mask = mask.bool()
    diff = (behaviour_logps.detach() - clean_logps.detach()).float()[mask]  # (N,)
    return diff.mean() if diff.numel() else diff.new_zeros(())


def tis_diagnostics(weights: torch.Tensor, mask: torch.Tensor, cap: float) -> dict[str, float]:
    """Mean, max, fraction at the cap and normalised effective sample size of the weights.

    Token-level weights (B, T) are summarised over the masked tokens; sequence-level weights
    (B, 1) over the rollouts. ``ess = (sum w)^2 / (n * sum w^2)`` lies in (0, 1]: 1 when all
    weights are equal, ~1/n when one dominates.
    """
    if weights.size(-1) == 1 and mask.size(-1) != 1:
        w = weights[:, 0].float()  # (B,)
    else:
        w = weights.float()[mask.bool()]  # (N,)
    if w.numel() == 0:
        return {"mean": 1.0, "max": 1.0, "frac_capped": 0.0, "ess": 1.0}
    return {
        "mean": w.mean().item(),
        "max": w.max().item(),
        "frac_capped": (w >= cap).float().mean().item(),
        "ess": (w.sum().square() / (w.numel() * w.square().sum())).item(),
    }
