"""Group advantages: GRPO's normalised rewards and Pass@k training (Chen et al. 2025).

Both take rewards shaped (groups, G), one row per prompt, and return advantages of the same shape.
A group whose rewards are all equal carries no signal and gets zero advantage.
"""

from __future__ import annotations

import math

import torch

GRPO_EPS = 1e-4  # TRL's GRPOTrainer: (r - mean) / (std + 1e-4)


def grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """``A_i = (r_i - mean(r)) / (std(r) + 1e-4)`` per group, with torch's unbiased std (as TRL)."""
    if rewards.size(1) == 1:  # a lone rollout has no group to compare with
        return torch.zeros_like(rewards)
    mean = rewards.mean(dim=1, keepdim=True)  # (groups, 1)
    std = rewards.std(dim=1, keepdim=True)  # (groups, 1)
    advantages = (rewards - mean) / (std + GRPO_EPS)  # Eq. GRPO advantage
    return torch.where(std > 0, advantages, torch.zeros_like(advantages))


def passk_advantages(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """Pass@k-training advantages for binary rewards (a reward > 0.5 counts as correct).

    Per group of N rollouts with N_neg wrong ones (Chen et al. 2025, arXiv 2508.10751):

        R     = 1 - C(N_neg, k) / C(N, k)          the group's pass@k
        s     = sqrt(R (1 - R))
        A_pos = (1 - R) / s
        A_neg = (1 - R - C(N_neg - 1, k - 1) / C(N - 1, k - 1)) / s

    and 0 where s = 0 (all right or all wrong). For k = 1 this is GRPO with the population std.
    """
    n = rewards.size(1)  # N, the group size
    if not 1 <= k <= n:
        raise ValueError(f"passk_k must be between 1 and the group size {n}, got {k}")
    correct = rewards > 0.5  # (groups, N)
    n_neg = (~correct).sum(dim=1)  # (groups,)
    # Exact ratios of big integers, tabulated for every possible N_neg in 0..N.
    fail_all = [math.comb(m, k) / math.comb(n, k) for m in range(n + 1)]
    fail_rest = [
        math.comb(m - 1, k - 1) / math.comb(n - 1, k - 1) if m else 0.0 for m in range(n + 1)
    ]
    table = torch.tensor([fail_all, fail_rest], dtype=torch.float64, device=rewards.device)
    passk = 1.0 - table[0, n_neg]  # Eq. R = 1 - C(N_neg, k) / C(N, k), (groups,)
    s = (passk * (1.0 - passk)).sqrt()  # Eq. s = sqrt(R (1 - R))
    safe_s = torch.where(s > 0, s, torch.ones_like(s))
    a_pos = (1.0 - passk) / safe_s  # Eq. A_pos
    a_neg = (1.0 - passk - table[1, n_neg]) / safe_s  # Eq. A_neg
    advantages = torch.where(correct, a_pos[:, None], a_neg[:, None])  # (groups, N)
    advantages = torch.where(s[:, None] > 0, advantages, torch.zeros_like(advantages))
    return advantages.to(rewards.dtype if rewards.is_floating_point() else torch.float32)
