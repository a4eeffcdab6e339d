"""Parameter-space noise: run a model under perturbed weights, then restore them bit-exactly.

PSN-RLVR samples rollouts from a "temporary parameter brain" ``W~ = W + sigma * eps`` with
``eps ~ N(0, I)`` drawn once and held fixed for the whole trajectory, and learns on the clean ``W``.

- ``targets``: which weights are perturbed: a named site or regex patterns over parameter names.
  The linear sites pick ``nn.Linear`` layers of the decoder blocks by role (the layer's attribute
  name): ``mlp`` the gate / up / down projections (the paper's choice), ``attn`` the q / k / v / o
  projections, ``all`` every linear layer of the decoder blocks; never a norm (e.g. Qwen3's
  per-head ``q_norm`` / ``k_norm``), an embedding or the head. The weight and bias (if any) of
  each chosen layer are perturbed. ``every_parameter`` is what the authors' released code
  perturbs: every floating-point parameter of the model (embeddings, attention, MLP, norms,
  biases, head). A weight tied between the embedding and the head is one parameter: it is
  perturbed once, under its first name (``model.embed_tokens.weight``), and both uses see that
  one draw. Only ``perturbed`` (in place) and whole-weight copies (vLLM) serve it; per-row noise
  (``perturbed_rows`` with several indices) runs ``nn.Linear`` layers only.
- ``scope``: how many noise samples a training step uses. ``step``: one for the whole step (the
  authors' released code). ``prompt``: one per prompt group. ``rollout``: rollout k of every group
  gets sample k, so a group of G rollouts sees G different brains (the paper's per-trajectory
  reading).
- ``replicas``: R, in step scope only: the step's prompt groups are cut into R contiguous slices of
  near-equal size, slice r sampled under its own draw ``(seed, step, index r, name)``, as the
  released code samples on R rollout replicas (vLLM engines), each with its own draw. R = 1 (the
  default) is one draw, index 0, for the whole step.
- Noise is a pure function of ``(seed, step, index, parameter name)`` (plus the device type, whose
  generator draws it): it is reproducible and identical across processes.

``perturbed`` swaps the weights in place (one noise sample for every row of the batch).
``perturbed_rows`` gives each row of the batch its own sample (or the clean weights) in a single
batched forward: each targeted ``nn.Linear`` computes ``y_b = x_b (W + sigma * eps_{k(b)})^T``
with one batched matmul over its K noisy copies; the rows can be re-routed between forwards.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

EVERY_PARAMETER = "every_parameter"  # the released code's site
# Each site: the roles (attribute names) of the nn.Linear layers it takes inside the decoder
# blocks (modules named ``...layers.<i>...``); None takes every nn.Linear there. EVERY_PARAMETER
# holds no roles: it takes every floating-point parameter, in the blocks or not.
SITES: dict[str, tuple[str, ...] | None] = {
    "mlp": ("gate_proj", "up_proj", "down_proj"),  # the paper's best site
    "attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "all": None,  # every linear layer of the decoder blocks
    EVERY_PARAMETER: (),  # every parameter: embeddings, norms and head too (site_parameters)
}
_BLOCK = re.compile(r"(^|\.)layers\.\d+\.")  # a module inside decoder block i
SCOPES = ("step", "prompt", "rollout")
CLEAN = -1  # the noise index of rows that run the clean weights (perturbed_rows)


def check_sigma(sigma: float) -> float:
    """Return ``sigma`` if it is a finite number >= 0, else raise a ValueError saying so."""
    if not isinstance(sigma, int | float) or not math.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma must be a finite number >= 0 (0 turns noise off), got {sigma!r}")
    return float(sigma)


def check_replicas(replicas: int, scope: str, name: str = "replicas") -> int:
    """Return ``replicas`` if it is an integer >= 1, and 1 where ``scope`` is not 'step'; else
    raise a ValueError naming ``name``, the value and what is allowed."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(
            f"{name} must be an integer >= 1 (independent noise draws per step), got {replicas!r}"
        )
    if replicas > 1 and scope != "step":
        raise ValueError(
            f"{name}={replicas} needs noise scope 'step' (one draw per slice of the step's "
            f"prompts), got scope {scope!r}; allowed: {name}=1 with scope 'prompt' or 'rollout'"
        )
    return replicas


@dataclass(frozen=True)
class NoiseConfig:
    """What to perturb and how: ``W~ = W + sigma * eps`` (sigma times the RMS if ``relative``)."""

    sigma: float = 0.001
    targets: str | tuple[str, ...] = "mlp"
    scope: str = "step"
    relative: bool = False
    seed: int = 0
    replicas: int = 1  # step scope: independent draws, one per contiguous slice of the prompts

    def __post_init__(self) -> None:
        check_sigma(self.sigma)
        if self.scope not in SCOPES:
            raise ValueError(f"unknown noise scope {self.scope!r}; allowed: {', '.join(SCOPES)}")
        check_replicas(self.replicas, self.scope)
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        if not targets:
            raise ValueError(f"targets must name at least one site ({', '.join(SITES)}) or regex")
        for target in targets:
            if target in SITES:
                continue
            try:
                re.compile(target)
            except re.error as err:
                raise ValueError(
                    f"target {target!r} is neither a site ({', '.join(SITES)}) "
                    f"nor a valid regex: {err}"
                ) from err
        object.__setattr__(self, "targets", targets)


def site_parameters(model: nn.Module, site: str) -> dict[str, nn.Parameter]:
    """The parameters of ``site`` (a key of ``SITES``): for ``EVERY_PARAMETER`` every
    floating-point parameter (a tied one once, ``named_parameters`` skips repeats), else the
    weights and biases of the ``nn.Linear`` layers of the decoder blocks that it picks by role."""
    if site == EVERY_PARAMETER:
        return {name: p for name, p in model.named_parameters() if p.is_floating_point()}
    roles = SITES[site]
    return {
        f"{name}.{kind}": param
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        and _BLOCK.search(name)
        and (roles is None or name.rpartition(".")[2] in roles)
        for kind, param in module.named_parameters(recurse=False)
    }


def target_parameters(model: nn.Module, targets: tuple[str, ...]) -> dict[str, nn.Parameter]:
    """The parameters a site picks, or a regex matches (``re.search`` on the name), for any
    target; each target must match."""
    params = dict(model.named_parameters())
    chosen: dict[str, nn.Parameter] = {}
    for target in targets:
        if target in SITES:
            matched = site_parameters(model, target)
        else:
            pattern = re.compile(target)
            matched = {name: p for name, p in params.items() if pattern.search(name)}
        if not matched:
            kinds = sorted({re.sub(r"\.\d+\.", ".N.", name) for name in params})
            raise ValueError(
                f"noise target {target!r} matches no parameter of {type(model).__name__}; "
                f"sites: {', '.join(SITES)}; parameter names (N = layer index): {', '.join(kinds)}"
            )
        chosen.update(matched)
    return chosen


def noise_seed(seed: int, step: int, index: int, name: str) -> int:
    """A 63-bit generator seed from sha256 (unlike ``hash()``, the same in every process)."""
    digest = hashlib.sha256(f"{seed}/{step}/{index}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def draw_noise(
    param: torch.Tensor, name: str, config: NoiseConfig, step: int, index: int, sigma: float
) -> torch.Tensor:
    """``sigma * eps`` for one tensor: drawn in fp32, scaled, then cast to the weight dtype."""
    generator = torch.Generator(device=param.device).manual_seed(
        noise_seed(config.seed, step, index, name)
    )
    eps = torch.randn(param.shape, generator=generator, device=param.device, dtype=torch.float32)
    if config.relative:
        sigma = sigma * param.detach().float().pow(2).mean().sqrt()  # scale by the tensor's RMS
    return (sigma * eps).to(param.dtype)


def noise_indices(
    num_prompts: int, num_generations: int, scope: str, replicas: int = 1
) -> torch.Tensor:
    """Noise index of each rollout of a prompt-major batch (row r = prompt r // G, sample r % G).

    ``step``: the replica of the row's prompt p, ``p * R // P`` (R contiguous slices of whole
    groups, of near-equal size; R = 1: all 0); ``prompt``: the prompt number; ``rollout``: the
    sample number within its group.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown noise scope {scope!r}; allowed: {', '.join(SCOPES)}")
    check_replicas(replicas, scope)
    if replicas > max(num_prompts, 1):
        raise ValueError(
            f"replicas={replicas} exceeds the {num_prompts} prompts of the step; allowed: "
            f"1..{num_prompts} (each replica samples at least one prompt group)"
        )
    rows = torch.arange(num_prompts * num_generations)  # (P * G,)
    if scope == "step":
        return (rows // num_generations) * replicas // num_prompts  # (P * G,)
    return rows // num_generations if scope == "prompt" else rows % num_generations  # (P * G,)


@contextmanager
def perturbed(
    model: nn.Module,
    config: NoiseConfig,
    step: int = 0,
    index: int = 0,
    sigma: float | None = None,
) -> Iterator[nn.Module]:
    """Run the body under ``W~ = W + sigma * eps(seed, step, index, name)`` (targeted weights).

    The clean weights are saved and copied back on exit, exceptions included, so the restore is
    bit-exact. ``sigma`` overrides ``config.sigma`` (a scheduler changes it each step); 0 is a
    no-op.
    """
    sigma = config.sigma if sigma is None else check_sigma(sigma)
    if sigma == 0:
        yield model
        return
    params = target_parameters(model, config.targets)
    clean = {name: p.detach().clone() for name, p in params.items()}
    try:
        with torch.no_grad():
            for name, p in params.items():
                p.add_(draw_noise(p, name, config, step, index, sigma))  # W~ = W + sigma * eps
        yield model
    finally:
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(clean[name])


def target_linears(model: nn.Module, targets: tuple[str, ...]) -> dict[str, nn.Linear]:
    """The layers holding the targeted weights, by name; per-row noise needs ``nn.Linear``."""
    modules = dict(model.named_modules())
    layers = {}
    for name in target_parameters(model, targets):
        module_name = name.rpartition(".")[0]
        if not isinstance(modules[module_name], nn.Linear):
            raise ValueError(
                f"per-row noise (scope 'prompt' or 'rollout', or clean rows) perturbs nn.Linear "
                f"layers only; {name!r} belongs to a {type(modules[module_name]).__name__}: "
                "narrow the targets or use scope='step'"
            )
        layers[module_name] = modules[module_name]
    return layers


class RowNoise:
    """Which noise sample each row of the next forwards runs under; ``perturbed_rows`` yields it.

    ``route(indices)`` sets the noise index of every row (``CLEAN`` = the clean weights); each
    must be one of ``samples``, the indices the context holds copies for. Rows may be in any
    order and in any number per index: each targeted ``nn.Linear`` sorts them by index, pads the
    groups to one length and runs one batched matmul over its noisy copies.
    """

    def __init__(self, samples: list[int]) -> None:
        self.samples = samples  # sorted distinct noise indices
        self.rows = 0  # rows of the next forwards
        self.order: torch.Tensor | None = None  # (B,) batch rows grouped by index; None: as is
        self.inverse: torch.Tensor | None = None  # (B,) back to batch order
        self.slots: torch.Tensor | None = None  # (B,) slot in the padded (K * m) layout
        self.width = 0  # m: rows per index after padding

    def route(self, indices: torch.Tensor) -> None:
        """Row b of the next forwards runs under noise sample ``indices[b]`` (B,)."""
        held = torch.tensor(self.samples, device=indices.device)
        copy = torch.searchsorted(held, indices)  # (B,)
        if (copy >= len(held)).any() or (held[copy.clamp_max(len(held) - 1)] != indices).any():
            raise ValueError(
                f"noise indices {sorted(set(indices.tolist()) - set(self.samples))} were not set "
                f"up; this context holds {self.samples}"
            )
        counts = torch.bincount(copy, minlength=len(held))  # (K,)
        self.rows, self.width = len(indices), int(counts.max())
        order = torch.argsort(copy, stable=True)  # (B,)
        in_order = bool((order == torch.arange(len(order), device=order.device)).all())
        self.order = None if in_order else order
        self.inverse = None if in_order else torch.argsort(order)
        if bool((counts == self.width).all()):
            self.slots = None
        else:  # pad every index's group to `width` rows
            sorted_copy = copy[order]
            start = counts.cumsum(0) - counts  # (K,) first sorted row of each index
            position = torch.arange(len(order), device=order.device) - start[sorted_copy]
            self.slots = sorted_copy * self.width + position  # (B,)

    def linear(
        self, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """A Linear forward over the routed rows; ``weight`` (K, in, out) holds the transposed
        weights ``(W + sigma * eps_k)^T`` of each held index, ``bias`` (K, out) the biases."""
        K = len(self.samples)

        def forward(x: torch.Tensor) -> torch.Tensor:  # (B, ..., in)
            if x.size(0) != self.rows:
                raise RuntimeError(
                    f"per-row noise was routed for {self.rows} rows but a forward got {x.size(0)}"
                )
            grouped = x if self.order is None else x.index_select(0, self.order)  # by index
            if self.slots is not None:
                padded = x.new_zeros((K * self.width, *x.shape[1:]))
                grouped = padded.index_copy_(0, self.slots, grouped)  # (K * m, ..., in)
            x_k = grouped.reshape(K, -1, x.size(-1))  # (K, m * ..., in)
            y = (
                torch.bmm(x_k, weight)
                if bias is None
                else torch.baddbmm(bias[:, None], x_k, weight)
            )
            y = y.reshape(-1, *x.shape[1:-1], y.size(-1))  # (K * m, ..., out)
            if self.slots is not None:
                y = y.index_select(0, self.slots)
            return y if self.inverse is None else y.index_select(0, self.inverse)  # (B, ..., out)

        return forward


@contextmanager
def perturbed_rows(
    model: nn.Module,
    config: NoiseConfig,
    step: int,
    indices: torch.Tensor,
    sigma: float | None = None,
) -> Iterator[RowNoise]:
    """Run the body with row b of every forward under noise sample ``indices[b]`` (shape (B,)).

    ``CLEAN`` (-1) marks rows that run the clean weights. The weights are never modified: each
    targeted ``nn.Linear`` runs a grouped forward over one noisy copy of its weights per distinct
    index for the body's duration (memory: that many copies of every targeted layer; constants,
    for sampling, not for gradients). Every targeted parameter must be an ``nn.Linear`` weight
    or bias. Yields a ``RowNoise``: ``route`` re-assigns the rows (any number, any order, any of
    the same indices) for later forwards, e.g. as a decoder's batch changes. A single distinct
    index swaps the weights in place instead (exact, no extra compute).
    """
    sigma = config.sigma if sigma is None else check_sigma(sigma)
    samples = indices.unique().tolist()  # sorted
    if sigma == 0 or len(samples) == 1:
        index = samples[0]
        with perturbed(model, config, step, index, 0.0 if index == CLEAN else sigma):
            yield RowNoise(samples)  # routing among one index changes nothing
        return
    targets = target_parameters(model, config.targets)
    layers = target_linears(model, config.targets)

    def copies(module_name: str, kind: str) -> torch.Tensor | None:
        """(K, *shape): the weight or bias under each held index (clean if not targeted)."""
        param = getattr(layers[module_name], kind)
        if param is None:
            return None
        name = f"{module_name}.{kind}"
        with torch.no_grad():
            return torch.stack(
                [
                    param + draw_noise(param, name, config, step, k, sigma)  # W~ = W + sigma * eps
                    if name in targets and k != CLEAN
                    else param.detach()
                    for k in samples
                ]
            )

    rows = RowNoise(samples)
    rows.route(indices.to(next(model.parameters()).device))
    forwards = {
        module_name: rows.linear(
            copies(module_name, "weight").transpose(1, 2).contiguous(),  # (K, in, out)
            copies(module_name, "bias"),
        )
        for module_name in layers
    }
    patched = {name: vars(layers[name]).get("forward") for name in forwards}  # usually None
    try:
        for module_name, forward in forwards.items():
            layers[module_name].forward = forward  # an instance attribute shadows the method
        yield rows
    finally:
        for module_name, previous in patched.items():
            if previous is None:
                vars(layers[module_name]).pop("forward", None)
            else:
                layers[module_name].forward = previous
