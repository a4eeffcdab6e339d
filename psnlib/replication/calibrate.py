"""Sigma from the KL it induces: the PSN noise scale calibrated on a policy, once per profile.

An absolute sigma means different things on different policies (the tiny testbed's MLP weights
have an RMS of ~0.04, a 7B model's ~0.01), so the papers' Variant I fixes the per-token KL
instead (3e-3 to 5e-3). ``calibrate_sigma`` measures, at a few sigmas, the per-token KL of
completions sampled under ``W~ = W + sigma * eps`` (``psnlib.noise.perturbed``, one noise draw
per ``index``): the trainer's proxy ``d = mean over sampled tokens of log pi_noisy(a_t) - log
pi_clean(a_t)`` (``psn/kl_proxy``, ``psnlib.tis.kl_proxy``) and, fitted on, its conditional
expectation (the exact KL of the next-token distributions at the same positions, far less noisy
at a few thousand tokens). It fits ``KL = c * sigma^b`` in log-log space (b ~ 2: KL is second
order in a small perturbation; a random or saturated policy departs from it) and solves
``sigma = (target / c)^(1/b)``. The result is also
reported as ``sigma / RMS`` of the perturbed weights, the scale-free number to compare across
models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.noise import NoiseConfig, check_sigma, perturbed, target_parameters
from psnlib.sampling import Samples, sample_prompts
from psnlib.tis import kl_proxy, tis_weights


@dataclass(frozen=True)
class Calibration:
    """The sigma that induces ``target_kl`` per token, and the measurements it was fitted on."""

    target_kl: float
    sigma: float  # (target_kl / c) ** (1 / b)
    c: float  # fitted KL per token = c * sigma ** b
    b: float  # fitted exponent: ~2 where the noise is a small perturbation
    weight_rms: float  # RMS of the perturbed weights
    points: pd.DataFrame  # per sigma: sigma, sigma_over_rms, kl, kl_proxy, tis_ess, tokens

    def sigma_for(self, kl: float) -> float:
        """The sigma the fit gives for another per-token KL."""
        return (kl / self.c) ** (1 / self.b)

    @property
    def sigma_over_rms(self) -> float:
        """The calibrated sigma as a share of the perturbed weights' RMS."""
        return self.sigma / self.weight_rms


def weight_rms(model: PreTrainedModel, targets: str | tuple[str, ...] = "mlp") -> float:
    """RMS over all the weights a noise config with ``targets`` perturbs, pooled."""
    params = target_parameters(model, NoiseConfig(targets=targets).targets).values()
    square_sum = sum(p.detach().double().pow(2).sum().item() for p in params)
    return math.sqrt(square_sum / sum(p.numel() for p in params))


@torch.no_grad()
def token_logps(model: PreTrainedModel, prompts: list[list[int]], samples: Samples) -> torch.Tensor:
    """Teacher-forced next-token log-distributions (temperature 1) of ``model`` at every sampled
    position: (P, n, L, V). ``samples`` are ``sample_tokens``' output for ``prompts``."""
    P, n, L = samples.tokens.shape
    out = []
    for i, prompt in enumerate(prompts):
        p = len(prompt)
        ids = torch.cat([torch.tensor(prompt).expand(n, p), samples.tokens[i]], dim=1)  # (n, p+L)
        logits = model(input_ids=ids.to(model.device)).logits[:, p - 1 : -1].float().cpu()
        out.append(torch.log_softmax(logits, -1))  # (n, L, V): predicts sampled token t at t
    return torch.stack(out)


def kl_at_sigma(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    sigma: float,
    *,
    n: int = 16,
    draws: int = 4,
    targets: str | tuple[str, ...] = "mlp",
    max_new_tokens: int = 48,
    seed: int = 0,
) -> dict[str, float]:
    """Per-token KL(pi_noisy || pi_clean) along ``n`` completions per prompt sampled (temperature
    1) under each of ``draws`` noise draws of ``sigma``, pooled over all sampled tokens.

    ``kl_proxy`` is the trainer's estimate (``psnlib.tis.kl_proxy``: the log-ratio of the sampled
    tokens); ``kl`` is its conditional expectation, the exact KL of the next-token distributions
    at the same positions: same mean, far less Monte-Carlo noise. ``tis_ess``: the normalised
    effective sample size of the token-level TIS weights (cap 10) over all those tokens, the
    trainer's ``tis/ess``. ``tokens``: how many.
    """
    check_sigma(sigma)
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    kl = proxy = w_sum = w_squares = 0.0
    tokens = 0
    for index in range(draws):
        config = NoiseConfig(sigma=sigma, targets=targets, seed=seed)
        with perturbed(model, config, step=0, index=index):
            samples = sample_prompts(
                model,
                tokenizer,
                prompts,
                n,
                max_new_tokens=max_new_tokens,
                seed=seed + index,
                with_stats=True,
                progress=False,
            )
            noisy = token_logps(model, ids, samples)  # (P, n, L, V)
        clean = token_logps(model, ids, samples)  # (P, n, L, V)
        mask = torch.arange(samples.tokens.shape[-1]) < samples.lengths[..., None]  # (P, n, L)
        count = int(mask.sum())
        per_position = (noisy.exp() * (noisy - clean)).sum(-1)  # (P, n, L): exact KL
        kl += per_position[mask].sum().item()
        sampled = clean.gather(-1, samples.tokens[..., None])[..., 0]  # (P, n, L)
        proxy += kl_proxy(sampled, samples.logprobs, mask).item() * count
        w = tis_weights(sampled, samples.logprobs, mask)[mask]  # (N,) min(pi_clean / pi_noisy, C)
        w_sum, w_squares = w_sum + w.sum().item(), w_squares + w.square().sum().item()
        tokens += count
    n = max(tokens, 1)
    ess = w_sum**2 / (n * w_squares) if w_squares else 1.0
    return {"kl": kl / n, "kl_proxy": proxy / n, "tis_ess": ess, "tokens": tokens}


def calibrate_sigma(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    target_kl: float = 0.004,
    sigmas: tuple[float, ...] = (0.005, 0.01, 0.02),
    **kwargs: object,
) -> Calibration:
    """The sigma whose noise induces ``target_kl`` per token on ``model`` (module doc).

    Measures ``kl_at_sigma`` (its keyword arguments: n, draws, targets, max_new_tokens, seed) at
    each of ``sigmas``, fits ``log KL = log c + b log sigma`` by least squares (b = 2 with one
    sigma) and solves. Choose ``sigmas`` around the answer: the power law holds locally. The
    policy's weights are restored after each draw.
    """
    if not (isinstance(target_kl, int | float) and math.isfinite(target_kl) and target_kl > 0):
        raise ValueError(f"target_kl must be a finite number > 0 (per token), got {target_kl!r}")
    if not sigmas or any(check_sigma(s) == 0 for s in sigmas):
        raise ValueError(f"sigmas must be one or more numbers > 0, got {sigmas!r}")
    if not prompts:
        raise ValueError("calibrate_sigma needs at least one prompt")
    rms = weight_rms(model, kwargs.get("targets", "mlp"))
    rows = []
    for sigma in sigmas:
        rows.append(
            {"sigma": sigma, "sigma_over_rms": sigma / rms}
            | kl_at_sigma(model, tokenizer, prompts, sigma, **kwargs)
        )
    points = pd.DataFrame(rows)
    if not (points["kl"] > 0).all():
        raise ValueError(
            f"the measured KL is not positive at every sigma of {list(sigmas)} "
            f"({list(points['kl'])}): use larger sigmas"
        )
    log_s, log_kl = np.log(points["sigma"]), np.log(points["kl"])
    fit = np.polyfit(log_s, log_kl, 1) if len(points) > 1 else (2.0,)  # log KL = log c + b log s
    b = float(fit[0])
    c = float(np.exp((log_kl - b * log_s).mean()))
    return Calibration(target_kl, (target_kl / c) ** (1 / b), c, b, rms, points)
