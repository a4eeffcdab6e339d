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

import argparse
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.noise import NoiseConfig, check_sigma, perturbed, target_parameters
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.replication.plan import arms
from psnlib.replication.plan.experiments import main_benchmark
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.sampling import Samples, sample_prompts
from psnlib.tasks import load_benchmark
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


def check_target_kl(target_kl: float) -> None:
    """A per-token KL target must be a finite number > 0: a ValueError naming it otherwise."""
    if not (isinstance(target_kl, int | float) and math.isfinite(target_kl) and target_kl > 0):
        raise ValueError(f"target_kl must be a finite number > 0 (per token), got {target_kl!r}")


def power_law(x: pd.Series, kl: pd.Series) -> tuple[float, float]:
    """``(c, b)`` of ``KL = c * x^b`` fitted by least squares in log-log space,
    ``log KL = log c + b log x`` (b = 2, second order, from a single point)."""
    log_x, log_kl = np.log(x), np.log(kl)
    b = float(np.polyfit(log_x, log_kl, 1)[0]) if len(x) > 1 else 2.0
    return float(np.exp((log_kl - b * log_x).mean())), b


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
    check_target_kl(target_kl)
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
    c, b = power_law(points["sigma"], points["kl"])
    return Calibration(target_kl, (target_kl / c) ** (1 / b), c, b, rms, points)


@torch.no_grad()
def kl_at_temperature(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    temperature: float,
    *,
    n: int = 16,
    max_new_tokens: int = 48,
    seed: int = 0,
) -> dict[str, float]:
    """Per-token KL(pi_T || pi_1) along ``n`` completions per prompt sampled at ``temperature``:
    the exact KL of the next-token distributions ``softmax(z / T)`` and ``softmax(z)`` at the
    sampled positions, pooled over all sampled tokens. It is what ``kl_at_sigma`` measures for
    noise (the sampling policy against the clean T = 1 policy, along the sampling policy's own
    samples), so a temperature and a sigma can be matched on it. ``tokens``: how many."""
    if not (isinstance(temperature, int | float) and 0 < temperature < math.inf):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    samples = sample_prompts(
        model,
        tokenizer,
        prompts,
        n,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        progress=False,
    )
    clean = token_logps(model, ids, samples)  # (P, n, L, V): log softmax(z)
    hot = torch.log_softmax(clean / temperature, -1)  # (P, n, L, V): log softmax(z / T)
    mask = torch.arange(samples.tokens.shape[-1]) < samples.lengths[..., None]  # (P, n, L)
    per_position = (hot.exp() * (hot - clean)).sum(-1)  # (P, n, L)
    tokens = int(mask.sum())
    return {"kl": per_position[mask].sum().item() / max(tokens, 1), "tokens": tokens}


def temperature_for_kl(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    target_kl: float,
    temperatures: tuple[float, ...] = (1.1, 1.2, 1.3),
    **kwargs: object,
) -> tuple[float, pd.DataFrame]:
    """The rollout temperature T > 1 whose per-token KL(pi_T || pi_1) (``kl_at_temperature``,
    its keyword arguments) is ``target_kl``, and the measured points.

    Fits ``KL = c * (T - 1)^b`` in log-log space over ``temperatures`` (all > 1; b ~ 2 near
    T = 1, where the KL is second order in log T) and solves ``T = 1 + (target / c)^(1/b)``."""
    check_target_kl(target_kl)
    if not temperatures or any(not 1 < t < math.inf for t in temperatures):
        raise ValueError(f"temperatures must be one or more numbers > 1, got {temperatures!r}")
    rows = [
        {"temperature": t} | kl_at_temperature(model, tokenizer, prompts, t, **kwargs)
        for t in temperatures
    ]
    points = pd.DataFrame(rows)
    c, b = power_law(points["temperature"] - 1, points["kl"])
    return 1 + (target_kl / c) ** (1 / b), points


def entropy_pilot(
    profile: Profile,
    coefs: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1, 0.3),
    *,
    steps: int = 20,
    seed: int = 100,
    rise: float = 0.2,
) -> tuple[float | None, pd.DataFrame]:
    """The smallest entropy bonus of ``coefs`` that moves the policy's entropy on ``profile``:
    GRPO runs of ``steps`` steps at a pilot ``seed`` (none of the experiments' seeds), without
    a bonus and with each coefficient (TRL's ``entropy_coef``); a coefficient moves entropy when
    the mean token entropy of its rollouts over the second half of the steps exceeds the
    bonus-free run's by ``rise`` (0.2: 20%). Returns that coefficient (None if none does) and
    one row per run: coef, entropy, ratio to the bonus-free run."""
    pilot = profile.with_overrides(rl_steps=steps)
    rows = []
    for coef in (0.0, *coefs):
        settings = {"entropy_coef": coef} if coef else {}
        _, _, log = train_policy(pilot, arms.GRPO, seed, **settings)
        rows.append({"coef": coef, "entropy": float(log["entropy"].iloc[steps // 2 :].mean())})
    table = pd.DataFrame(rows)
    table["ratio"] = table["entropy"] / table["entropy"].iloc[0]
    moved = table[(table["coef"] > 0) & (table["ratio"] >= 1 + rise)]
    return (float(moved["coef"].iloc[0]) if len(moved) else None), table


def main(argv: list[str] | None = None) -> int:
    """``python -m psnlib.replication.compute.calibrate [--profile cpu]``: the settings of the
    released code's PSN arm and of the exploration baselines, measured on the profile's base policy
    by the rules the profile states (sigma for a KL of 0.003 with every parameter perturbed; the
    rollout temperature of PSN fixed's per-token KL; the entropy bonus that moves entropy)."""
    parser = argparse.ArgumentParser(prog="python -m psnlib.replication.compute.calibrate")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--psn-kl", type=float, default=0.004, help="PSN fixed's per-token KL")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    torch.set_num_threads(1)
    model, tokenizer, _ = base_policy(profile)
    prompts = list(
        load_benchmark(main_benchmark(profile), min(profile.eval_problems, 64))["prompt"]
    )
    every = calibrate_sigma(
        model, tokenizer, prompts, 0.003, (0.002, 0.004, 0.008), targets="every_parameter"
    )
    print(every.points.to_string(index=False))
    print(f"released code: KL 0.003 per token at sigma {every.sigma:.4g} (every parameter)")
    temperature, points = temperature_for_kl(model, tokenizer, prompts, args.psn_kl)
    print(points.to_string(index=False))
    print(f"rollout temperature of KL {args.psn_kl} per token: T = {temperature:.3f}")
    coef, table = entropy_pilot(profile)
    print(table.to_string(index=False))
    print(f"smallest entropy bonus that moves entropy: {coef}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
