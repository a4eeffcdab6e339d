"""Sigma schedulers: how the noise scale of PSN-RLVR changes from one training step to the next.

A scheduler holds the current sigma; ``step(**signals)`` takes one training step's signals and
returns the sigma of the next rollouts. ``signals`` names what it reads; ``metrics`` holds what
it derived on the last step (for the training log).

- ``FixedSigma``: sigma never changes.
- ``KLTargetSigma`` (Variant I, the authors' released code; Plappert et al. 2018): steer the KL
  proxy ``d = mean_t (log pi_noisy(a_t) - log pi_clean(a_t))`` (``psnlib.tis.kl_proxy``) towards
  a target: ``sigma /= 1.01`` when ``d > 1.1 * target``, ``sigma *= 1.01`` when
  ``d < target / 1.1``, clamped to ``[1e-6, 0.5]``.
- ``DiversitySigma`` (Variant II, the paper's proposal; no released code): each step the clean
  policy answers every prompt twice. ``d_sem`` is the similarity of the two answers and ``SC``
  their self-certainty ``mean_i KL(U || p(. | q, o_<i))``. High similarity and high certainty
  mean the policy is collapsing, so when ``Ind = lam * d_sem + (1 - lam) * SC_norm`` is above its
  historical mean sigma rises (``sigma /= beta``), else it falls (``sigma *= beta``).

``d_sem`` is pluggable: ``psnlib.similarity`` (semantic embeddings, or the lexical match ratio
the CPU testbed uses, and why).
"""

from __future__ import annotations

import logging
import math

import torch

from psnlib.noise import check_sigma

logger = logging.getLogger(__name__)


def self_certainty(logits: torch.Tensor) -> torch.Tensor:
    """``KL(U || softmax(z))`` of every distribution in ``logits``: (..., V) -> (...).

    ``KL(U || p) = sum_v (1/V) log((1/V) / p_v) = logsumexp(z) - mean(z) - log V``: 0 for a uniform
    distribution, growing without bound as ``p`` peaks (tokens a policy never emits, with very
    negative logits, weigh in too).
    """
    z = logits.float()
    return z.logsumexp(dim=-1) - z.mean(dim=-1) - math.log(z.size(-1))  # Eq. SC


# ----------------------------------------------------------------------------- similarity


# ----------------------------------------------------------------------------- schedulers


class SigmaScheduler:
    """Holds the current ``sigma``; ``step(**signals)`` returns the sigma of the next rollouts."""

    signals: tuple[str, ...] = ()  # the step signals `step` reads, by name

    def __init__(self, sigma: float) -> None:
        self.sigma = check_sigma(sigma)
        self.metrics: dict[str, float] = {}  # what the last `step` derived, for the training log

    def step(self, **signals: float) -> float:
        raise NotImplementedError

    def state_dict(self) -> dict[str, float]:
        """Everything ``step`` changes, so a resumed run continues the schedule exactly."""
        return {"sigma": self.sigma}

    def load_state_dict(self, state: dict[str, float]) -> None:
        for name, value in state.items():
            setattr(self, name, value)


class FixedSigma(SigmaScheduler):
    """The same sigma every step."""

    def step(self) -> float:
        return self.sigma


class BoundedSigma(SigmaScheduler):
    """A multiplicative schedule that keeps sigma within ``[sigma_min, sigma_max]``."""

    def __init__(self, sigma: float, sigma_min: float = 1e-6, sigma_max: float = 0.5) -> None:
        super().__init__(sigma)
        if not 0 < sigma_min < math.inf or not 0 < sigma_max < math.inf:
            raise ValueError(
                "sigma_min and sigma_max must be finite numbers > 0 (a multiplicative schedule "
                f"never leaves 0), got sigma_min={sigma_min!r}, sigma_max={sigma_max!r}"
            )
        if sigma_min > sigma_max:
            raise ValueError(
                f"sigma bounds are inverted: sigma_min={sigma_min} > sigma_max={sigma_max}; "
                "swap them"
            )
        if not sigma_min <= sigma <= sigma_max:
            raise ValueError(
                f"an adaptive scheduler starts from sigma within [sigma_min, sigma_max] = "
                f"[{sigma_min}, {sigma_max}] (it only multiplies sigma); got sigma={sigma!r}"
            )
        self.sigma_min, self.sigma_max = sigma_min, sigma_max

    def clamp(self, sigma: float) -> float:
        return min(max(sigma, self.sigma_min), self.sigma_max)


class KLTargetSigma(BoundedSigma):
    """Variant I: steer the KL proxy of the noisy rollouts towards ``kl_target``."""

    signals = ("kl_proxy",)

    def __init__(
        self,
        sigma: float,
        kl_target: float = 0.004,
        kl_factor: float = 1.01,
        kl_tolerance: float = 1.1,
        sigma_min: float = 1e-6,
        sigma_max: float = 0.5,
    ) -> None:
        super().__init__(sigma, sigma_min, sigma_max)
        if not 0 < kl_target < math.inf:
            raise ValueError(f"kl_target must be a finite number > 0, got {kl_target!r}")
        if not 1 < kl_factor < math.inf:
            raise ValueError(f"kl_factor must be a finite number > 1, got {kl_factor!r}")
        if not 1 <= kl_tolerance < math.inf:
            raise ValueError(f"kl_tolerance must be a finite number >= 1, got {kl_tolerance!r}")
        self.target, self.factor, self.tolerance = kl_target, kl_factor, kl_tolerance

    def step(self, kl_proxy: float) -> float:
        if kl_proxy > self.tolerance * self.target:  # Eq. Variant I: the noise moves pi too far
            self.sigma = self.clamp(self.sigma / self.factor)
        elif kl_proxy < self.target / self.tolerance:  # too little effect: more noise
            self.sigma = self.clamp(self.sigma * self.factor)
        return self.sigma


class DiversitySigma(BoundedSigma):
    """Variant II: raise sigma when the clean policy's answers grow alike and certain.

    ``SC_norm`` is min-max normalised over every SC seen so far (0.5 while they are all equal);
    ``Ind`` is compared with the mean of the previous steps' ``Ind``, so the first step only
    records and leaves sigma as it is.
    """

    signals = ("d_sem", "sc")

    def __init__(
        self,
        sigma: float,
        div_lam: float = 0.5,
        div_beta: float = 0.99,
        sigma_min: float = 1e-6,
        sigma_max: float = 0.5,
    ) -> None:
        super().__init__(sigma, sigma_min, sigma_max)
        if not 0 <= div_lam <= 1:
            raise ValueError(
                f"div_lam (lam, the weight of d_sem) must be in [0, 1], got {div_lam!r}"
            )
        if not 0 < div_beta < 1:
            raise ValueError(
                f"div_beta (beta, the step factor) must be in (0, 1), got {div_beta!r}"
            )
        self.lam, self.beta = div_lam, div_beta
        self.sc_min, self.sc_max = math.inf, -math.inf  # over the history
        self.ind_sum, self.steps = 0.0, 0  # running mean of Ind = ind_sum / steps

    def step(self, d_sem: float, sc: float) -> float:
        self.sc_min, self.sc_max = min(self.sc_min, sc), max(self.sc_max, sc)
        span = self.sc_max - self.sc_min
        sc_norm = (sc - self.sc_min) / span if span > 0 else 0.5  # Eq. min-max over the history
        ind = self.lam * d_sem + (1 - self.lam) * sc_norm  # Eq. Ind
        ind_mean = self.ind_sum / self.steps if self.steps else ind
        if self.steps:
            collapsing = ind > ind_mean
            self.sigma = self.clamp(
                self.sigma / self.beta if collapsing else self.sigma * self.beta
            )
        self.ind_sum, self.steps = self.ind_sum + ind, self.steps + 1
        self.metrics = {"sc_norm": sc_norm, "ind": ind, "ind_mean": ind_mean}
        return self.sigma

    def state_dict(self) -> dict[str, float]:
        return {
            "sigma": self.sigma,
            "sc_min": self.sc_min,
            "sc_max": self.sc_max,
            "ind_sum": self.ind_sum,
            "steps": self.steps,
        }


SCHEDULERS: dict[str, type[SigmaScheduler]] = {
    "fixed": FixedSigma,
    "kl_target": KLTargetSigma,
    "diversity": DiversitySigma,
}
