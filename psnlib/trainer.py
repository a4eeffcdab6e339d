"""PSN-GRPO: TRL's ``GRPOTrainer`` with parameter-space noise on the rollouts and TIS in the loss.

One training step:

1. Rollouts are sampled under noisy weights ``W~ = W + sigma * eps`` (``psnlib.noise``; one noise
   sample per step, per prompt group or per rollout index), and the log-prob of every sampled
   token under that same noise is recorded while sampling: the behaviour log-probs.
2. Rewards and group advantages are computed as in GRPO, or with Pass@k training.
3. The loss runs on the clean weights. Each token's policy-gradient loss is multiplied by the TIS
   weight ``min(pi_clean / pi_noisy, C)`` (``psnlib.tis``); the noisy-vs-clean KL proxy is logged.
4. At the end of the step a sigma scheduler (``psnlib.schedulers``) turns the step's signals into
   the sigma of the next rollouts. The diversity scheduler's two clean answers per prompt are
   sampled in the same ``generate`` call as the rollouts, as extra rows that bypass the noise.

Evaluation always samples the clean policy.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig, GRPOTrainer

from psnlib.advantages import passk_advantages
from psnlib.noise import NoiseConfig, noise_indices, perturbed_rows, target_parameters
from psnlib.schedulers import (
    SCHEDULERS,
    DiversitySigma,
    FixedSigma,
    KLTargetSigma,
    SigmaScheduler,
    Similarity,
    check_similarity,
    make_similarity,
    self_certainty,
)
from psnlib.tis import check_tis, kl_proxy, tis_diagnostics, tis_weights

ADVANTAGE_MODES = ("grpo", "passk")
SCHEDULER_STATE = "sigma_scheduler.json"  # in each checkpoint directory


@dataclass
class PSNGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the PSN-GRPO settings; every GRPO setting keeps its meaning."""

    sigma: float = field(
        default=0.001,
        metadata={"help": "Noise scale of W~ = W + sigma * eps (paper: 0.001; 0 turns noise off)."},
    )
    noise_targets: list[str] = field(
        default_factory=lambda: ["mlp"],
        metadata={
            "help": "Perturbed weights: sites 'mlp' (the paper's choice), 'attn', 'all' (every "
            "decoder linear layer) or regexes searched in parameter names."
        },
    )
    noise_scope: str = field(
        default="step",
        metadata={
            "help": "One noise sample per 'step' (released code), per 'prompt' group, or per "
            "'rollout' index (rollout k of every group gets sample k)."
        },
    )
    noise_relative: bool = field(
        default=False,
        metadata={"help": "Scale sigma by each weight tensor's RMS (not in the paper)."},
    )
    noise_seed: int | None = field(
        default=None,
        metadata={"help": "Seed of the noise draws; None uses `seed`."},
    )
    sigma_scheduler: str = field(
        default="fixed",
        metadata={
            "help": "How sigma changes between steps: 'fixed', 'kl_target' (Variant I: steer the "
            "KL proxy to kl_target) or 'diversity' (Variant II: raise sigma when the clean "
            "policy's answers grow alike and certain). `sigma` is the starting value."
        },
    )
    sigma_min: float = field(
        default=1e-6,
        metadata={"help": "Lower bound of an adaptive sigma (released code: 1e-6)."},
    )
    sigma_max: float = field(
        default=0.5,
        metadata={"help": "Upper bound of an adaptive sigma (released code: 0.5)."},
    )
    kl_target: float = field(
        default=0.004,
        metadata={"help": "Variant I: target of the KL proxy (paper: 0.003-0.005)."},
    )
    kl_factor: float = field(
        default=1.01,
        metadata={"help": "Variant I: sigma is divided or multiplied by this factor (> 1)."},
    )
    kl_tolerance: float = field(
        default=1.1,
        metadata={
            "help": "Variant I: sigma falls when the proxy exceeds kl_tolerance * kl_target and "
            "rises below kl_target / kl_tolerance."
        },
    )
    div_lam: float = field(
        default=0.5,
        metadata={"help": "Variant II: lam of Ind = lam * d_sem + (1 - lam) * SC_norm, in [0, 1]."},
    )
    div_beta: float = field(
        default=0.99,
        metadata={"help": "Variant II: beta in (0, 1); sigma /= beta (collapse) or *= beta."},
    )
    div_fraction: float = field(
        default=1.0,
        metadata={
            "help": "Variant II: share of each step's prompts (rounded up) that the clean policy "
            "answers twice, in (0, 1]; 1 is the paper's every prompt."
        },
    )
    div_similarity: str = field(
        default="auto",
        metadata={
            "help": "Variant II: d_sem as 'semantic' (all-MiniLM-L6-v2 cosine, extra 'semantic'), "
            "'lexical' (difflib match ratio) or 'auto' (semantic where installed)."
        },
    )
    use_tis: bool = field(
        default=True,
        metadata={"help": "Multiply the per-token loss by min(pi_clean / pi_noisy, tis_cap)."},
    )
    tis_cap: float = field(
        default=10.0,
        metadata={"help": "TIS truncation C (paper: 10)."},
    )
    tis_level: str = field(
        default="token",
        metadata={"help": "'token' ratios, or one 'sequence' ratio from summed log-probs."},
    )
    advantage_mode: str = field(
        default="grpo",
        metadata={"help": "'grpo' (TRL's advantages) or 'passk' (Pass@k training, Chen et al.)."},
    )
    passk_k: int = field(
        default=4,
        metadata={"help": "k of Pass@k training (advantage_mode='passk'); 1..num_generations."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.noise_config()  # validates sigma, noise_scope and noise_targets
        self.sigma_schedule()  # validates sigma_scheduler and its settings
        if self.sigma_scheduler == "diversity":
            check_similarity(self.div_similarity)
            if not 0 < self.div_fraction <= 1:
                raise ValueError(f"div_fraction must be in (0, 1], got {self.div_fraction}")
        check_tis(self.tis_cap, self.tis_level)
        if self.advantage_mode not in ADVANTAGE_MODES:
            raise ValueError(
                f"unknown advantage_mode {self.advantage_mode!r}; allowed: "
                f"{', '.join(ADVANTAGE_MODES)}"
            )
        if self.advantage_mode == "passk" and not 1 <= self.passk_k <= self.num_generations:
            raise ValueError(
                f"passk_k must be between 1 and num_generations={self.num_generations} (the group "
                f"size), got {self.passk_k}"
            )
        if self.use_vllm or self.use_transformers_continuous_batching:
            raise ValueError(
                "PSNGRPOTrainer perturbs the transformers model that `generate` runs; set "
                "use_vllm=False and use_transformers_continuous_batching=False"
            )

    def noise_config(self) -> NoiseConfig:
        """The ``NoiseConfig`` of these settings."""
        return NoiseConfig(
            sigma=self.sigma,
            targets=self.noise_targets,  # a site or regex string, or a list of them
            scope=self.noise_scope,
            relative=self.noise_relative,
            seed=self.seed if self.noise_seed is None else self.noise_seed,
        )

    def sigma_schedule(self) -> SigmaScheduler:
        """A fresh scheduler of these settings, starting from ``sigma``."""
        if self.sigma_scheduler not in SCHEDULERS:
            raise ValueError(
                f"unknown sigma_scheduler {self.sigma_scheduler!r}; allowed: "
                f"{', '.join(SCHEDULERS)}"
            )
        bounds = {"sigma_min": self.sigma_min, "sigma_max": self.sigma_max}
        if self.sigma_scheduler == "kl_target":
            return KLTargetSigma(
                self.sigma,
                kl_target=self.kl_target,
                kl_factor=self.kl_factor,
                kl_tolerance=self.kl_tolerance,
                **bounds,
            )
        if self.sigma_scheduler == "diversity":
            return DiversitySigma(
                self.sigma, div_lam=self.div_lam, div_beta=self.div_beta, **bounds
            )
        return FixedSigma(self.sigma)


class SampledLogps:
    """Records, while ``generate`` runs, each sampled token's log-prob under the sampling weights.

    A forward hook keeps the temperature-scaled log-softmax of the last position; the next
    decoding step's input token is the one sampled from it. Same definition as TRL's log-probs.
    For the rows from ``certainty_from`` on, it also keeps the self-certainty ``KL(U || p)`` of
    every decoding step's distribution (raw logits, ``psnlib.schedulers.self_certainty``).
    """

    def __init__(
        self, model: nn.Module, temperature: float, certainty_from: int | None = None
    ) -> None:
        self.model, self.temperature, self.certainty_from = model, temperature, certainty_from
        self.steps: list[torch.Tensor] = []  # one (B, 1) per decoded token but the last
        self.last: torch.Tensor | None = None  # (B, V)
        self.certainty: list[torch.Tensor] = []  # one (B - certainty_from,) per decoded token

    def __enter__(self) -> SampledLogps:
        self.handle = self.model.register_forward_hook(self.hook, with_kwargs=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()

    def hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        input_ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]  # (B, t)
        if self.last is not None:
            self.steps.append(self.last.gather(1, input_ids[:, -1:]))  # (B, 1)
        logits = output.logits[:, -1].float()  # (B, V)
        self.last = torch.log_softmax(logits / self.temperature, dim=-1)
        if self.certainty_from is not None:
            self.certainty.append(self_certainty(logits[self.certainty_from :]))

    def logps(self, completion_ids: list[list[int]]) -> list[list[float]]:
        """The log-probs of each (unpadded) completion, in the list-of-lists form TRL expects."""
        final = len(self.steps)  # position of the token sampled from `self.last`
        last_tokens = [ids[final] if len(ids) > final else 0 for ids in completion_ids]
        last_tokens = torch.tensor(last_tokens, device=self.last.device)[:, None]  # (B, 1)
        table = torch.cat([*self.steps, self.last.gather(1, last_tokens)], dim=1)  # (B, L)
        return [row[: len(ids)].tolist() for row, ids in zip(table, completion_ids, strict=True)]

    def self_certainty(self, completion_ids: list[list[int]]) -> list[float]:
        """Eq. SC of each completion from row ``certainty_from`` on: the mean over its positions."""
        table = torch.stack(self.certainty, dim=1)  # (B - certainty_from, L)
        completion_ids = completion_ids[self.certainty_from :]
        return [
            row[: max(len(ids), 1)].mean().item()
            for row, ids in zip(table, completion_ids, strict=True)
        ]


def target_linears(model: nn.Module, targets: tuple[str, ...]) -> list[nn.Linear]:
    """The layers that hold the targeted weights; clean rows need them all to be ``nn.Linear``."""
    modules = dict(model.named_modules())
    names = dict.fromkeys(name.rpartition(".")[0] for name in target_parameters(model, targets))
    layers = [modules[name] for name in names]
    if any(not isinstance(layer, nn.Linear) for layer in layers):
        raise ValueError(
            "the diversity scheduler's clean samples share the rollout batch, which needs noise "
            "targets on nn.Linear layers only; narrow noise_targets"
        )
    return layers


@contextmanager
def clean_rows(
    model: nn.Module, targets: tuple[str, ...], num_noisy: int, num_clean: int
) -> Iterator[None]:
    """In every forward of the body, the last ``num_clean`` rows run the weights as on entry.

    Enter it before the noise: each targeted ``nn.Linear`` gets a pre-hook that hands only the
    first ``num_noisy`` rows to the layer (noisy in place or by ``perturbed_rows``' grouped
    forward) and a hook that appends the other rows' output under a saved clean copy of its
    weights. Non-targeted layers see every row. Costs one copy of the targeted weights; a no-op
    when ``num_clean`` is 0.
    """
    if num_clean == 0:
        yield
        return
    tails: dict[nn.Module, torch.Tensor] = {}

    def split(layer: nn.Module, args: tuple) -> tuple:
        tails[layer] = args[0][num_noisy:]  # (m, ..., in)
        return (args[0][:num_noisy], *args[1:])

    def join(weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
        def hook(layer: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
            return torch.cat([output, F.linear(tails.pop(layer), weight, bias)])  # (B, ..., out)

        return hook

    handles = []
    for layer in target_linears(model, targets):
        bias = None if layer.bias is None else layer.bias.detach().clone()
        handles.append(layer.register_forward_pre_hook(split))
        handles.append(layer.register_forward_hook(join(layer.weight.detach().clone(), bias)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class PSNGRPOTrainer(GRPOTrainer):
    """GRPO with parameter-space noise (PSN-RLVR). What differs from ``GRPOTrainer``:

    - ``_generate_single_turn``: in training, sampling runs under noise (``psnlib.noise``) and
      returns the behaviour log-probs, which TRL stores as ``sampling_per_token_logps``.
    - ``get_off_policy_mask``, TRL's per-token loss multiplier, also returns the TIS weights
      ``min(pi_clean / pi_noisy, tis_cap)`` from the loss forward's clean log-probs, and logs the
      KL proxy ``psn/kl_proxy`` and ``tis/{mean,max,frac_capped,ess}``. With several optimizer
      steps per generation batch, the weights come from TRL's rollout-time clean log-probs and
      are folded into the advantages instead (``_generate_and_score_completions``).
    - ``advantage_mode="passk"`` replaces the advantages of training batches by Pass@k-training
      advantages of the same rewards (``_calculate_rewards`` keeps them).
    - ``self.sigma`` is the sigma of the next rollouts (logged as ``psn/sigma``), held by
      ``self.scheduler`` (``args.sigma_scheduler``). ``training_step`` hands the scheduler the
      signals of each step's rollouts once the step's last micro-batch is done (the optimizer step
      follows; the next rollouts are sampled after it) and logs what it derived. The signals are
      the KL proxy, and, for the diversity scheduler, ``psn/d_sem`` (``similarity`` of two clean
      answers per prompt; default from ``args.div_similarity``) and ``psn/sc`` (their
      self-certainty). The scheduler's state is saved with every checkpoint and restored on
      resume.

    With ``sigma=0`` and ``use_tis=False`` a step is exactly a ``GRPOTrainer`` step. Tool calling,
    vLLM and continuous batching are not supported.
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any,
        args: PSNGRPOConfig | None = None,
        similarity: Similarity | None = None,
        **kwargs: Any,
    ) -> None:
        args = PSNGRPOConfig() if args is None else args
        if not isinstance(args, PSNGRPOConfig):
            raise TypeError(f"args must be a PSNGRPOConfig, got {type(args).__name__}")
        super().__init__(model, reward_funcs, args=args, **kwargs)
        if self.tools:
            raise ValueError("PSNGRPOTrainer does not support tool calling yet; pass no tools")
        self.noise = args.noise_config()
        self.scheduler = args.sigma_schedule()
        self._signals: dict[str, list[float]] = defaultdict(list)  # since the last sigma update
        self.similarity = similarity
        unwrapped = self.accelerator.unwrap_model(self.model)
        target_parameters(unwrapped, self.noise.targets)  # each target must match
        if "d_sem" in self.scheduler.signals:
            target_linears(unwrapped, self.noise.targets)
            if self.similarity is None:
                self.similarity = make_similarity(args.div_similarity, self.accelerator.device)
        # TRL scores the clean policy at rollout time (`old_per_token_logps`) only when one
        # generation batch feeds several optimizer steps; otherwise the loss forward's clean
        # log-probs are the rollout-time ones, and TIS happens in the loss at no extra cost.
        generate_every = args.steps_per_generation * self.num_iterations
        self._tis_in_loss = args.gradient_accumulation_steps % generate_every == 0
        if self._tis_in_loss and self.off_policy_mask_threshold is None:
            self.off_policy_mask_threshold = math.inf  # TRL then calls get_off_policy_mask

    @property
    def sigma(self) -> float:
        """The sigma of the next rollouts."""
        return self.scheduler.sigma

    def _noise_indices(self, num_rollouts: int, num_generations: int) -> torch.Tensor:
        """The noise index of each local rollout: this process holds a slice of the batch."""
        first = self.accelerator.process_index * num_rollouts
        total = num_rollouts * self.accelerator.num_processes
        indices = noise_indices(total // num_generations, num_generations, self.noise.scope)
        return indices[first : first + num_rollouts]  # (B,)

    def _generate_single_turn(
        self,
        prompt_ids: list,
        images: Any,
        multimodal_fields: dict,
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        extra = (images, multimodal_fields, num_generations, has_tool_images)
        if not self.model.training:  # evaluation samples the clean policy
            return super()._generate_single_turn(prompt_ids, *extra)
        if images is not None or multimodal_fields:
            raise ValueError("PSNGRPOTrainer supports text-only prompts")
        model = self.accelerator.unwrap_model(self.model)
        indices = self._noise_indices(len(prompt_ids), num_generations)
        order = torch.argsort(indices, stable=True).tolist()  # rows sharing noise side by side
        rows = [prompt_ids[i] for i in order]
        pairs = self._clean_pair_prompts(prompt_ids)  # after the noisy rows, in the same batch
        self._metrics["train"]["psn/sigma"].append(self.sigma)
        with (
            clean_rows(model, self.noise.targets, len(rows), len(pairs)),
            perturbed_rows(model, self.noise, self.state.global_step, indices[order], self.sigma),
            SampledLogps(model, self.temperature, len(rows) if pairs else None) as sampled,
        ):
            completion_ids, _ = super()._generate_single_turn(rows + pairs, *extra)
        if pairs:
            self._measure_diversity(
                completion_ids[len(rows) :], sampled.self_certainty(completion_ids)
            )
        logps = sampled.logps(completion_ids)
        unsort = torch.argsort(torch.tensor(order)).tolist()  # back to TRL's row order
        return [completion_ids[i] for i in unsort], [logps[i] for i in unsort]

    def _clean_pair_prompts(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        """The first ``div_fraction`` of the distinct prompts, each twice, if ``d_sem`` is read."""
        if "d_sem" not in self.scheduler.signals:
            return []
        distinct = list(dict.fromkeys(map(tuple, prompt_ids)))
        distinct = distinct[: math.ceil(self.args.div_fraction * len(distinct))]
        return [list(ids) for ids in distinct for _ in range(2)]

    def _measure_diversity(self, pair_ids: list[list[int]], certainties: list[float]) -> None:
        """Record ``d_sem`` (mean similarity of each prompt's two answers) and ``sc`` (mean SC)."""
        texts = self._tokenizer.batch_decode(pair_ids, skip_special_tokens=True)
        similarities = self.similarity(texts[0::2], texts[1::2])
        local = torch.tensor(
            [sum(similarities) / len(similarities), sum(certainties) / len(certainties)],
            device=self.accelerator.device,
        )
        d_sem, sc = self.accelerator.gather(local[None]).mean(dim=0).tolist()  # over processes
        for name, value in (("d_sem", d_sem), ("sc", sc)):
            self._signals[name].append(value)
            self._metrics["train"][f"psn/{name}"].append(value)

    def training_step(
        self, model: nn.Module, inputs: dict, num_items_in_batch: Any
    ) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)  # counts self._step
        if self._step % self.current_gradient_accumulation_steps == 0:  # the step's last one
            self._update_sigma()
        return loss

    def _update_sigma(self) -> None:
        """Hand the scheduler the mean of each signal since the last update; log what it derived.

        Without fresh rollouts since the last update (several optimizer steps per generation
        batch) there is nothing new to react to, and sigma stays.
        """
        if not all(self._signals[name] for name in self.scheduler.signals):
            return
        signals = {name: sum(v) / len(v) for name, v in self._signals.items()}
        self.scheduler.step(**{name: signals[name] for name in self.scheduler.signals})
        for name, value in self.scheduler.metrics.items():
            self._metrics["train"][f"psn/{name}"].append(value)
        self._signals.clear()

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            checkpoint = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            path = os.path.join(self._get_output_dir(trial=trial), checkpoint, SCHEDULER_STATE)
            with open(path, "w") as f:
                json.dump(self.scheduler.state_dict(), f)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        path = None if checkpoint is None else os.path.join(checkpoint, SCHEDULER_STATE)
        if path is not None and os.path.exists(path):
            with open(path) as f:
                self.scheduler.load_state_dict(json.load(f))

    def _calculate_rewards(
        self, inputs: list[dict], prompts: list, completions: list, completion_ids_list: list
    ) -> torch.Tensor:
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._rewards_per_func = rewards_per_func  # (B_global, n_funcs), for Pass@k advantages
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        if self.args.advantage_mode == "passk":
            weights = self.reward_weights.to(self._rewards_per_func.device)
            rewards = (self._rewards_per_func * weights).nansum(dim=1)  # (B_global,)
            advantages = passk_advantages(rewards.view(-1, self.num_generations), self.args.passk_k)
            first = self.accelerator.process_index * len(inputs)
            output["advantages"] = advantages.view(-1)[first : first + len(inputs)]  # (B,)
        if not self._tis_in_loss:  # weight with the rollout-time clean log-probs, now
            clean, behaviour = output["old_per_token_logps"], output["sampling_per_token_logps"]
            weights = self._tis(clean, behaviour, output["completion_mask"])
            output["advantages"] = output["advantages"][:, None] * weights  # (B, T)
        return output

    def get_off_policy_mask(
        self,
        advantages: torch.Tensor,
        per_token_logps: torch.Tensor,
        sampling_per_token_logps: torch.Tensor,
        mask: torch.Tensor,
        off_policy_threshold: float,
    ) -> torch.Tensor:
        keep = GRPOTrainer.get_off_policy_mask(
            advantages, per_token_logps, sampling_per_token_logps, mask, off_policy_threshold
        )  # (B, 1)
        if not (self.model.training and self._tis_in_loss):
            return keep
        return keep * self._tis(per_token_logps, sampling_per_token_logps, mask)  # (B, T)

    def _tis(
        self, clean_logps: torch.Tensor, behaviour_logps: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Log the KL proxy and TIS diagnostics; the TIS weights, or 1 when ``use_tis`` is off."""
        metrics = self._metrics["train"]
        d = self.accelerator.gather(kl_proxy(clean_logps, behaviour_logps, mask)).mean().item()
        metrics["psn/kl_proxy"].append(d)
        self._signals["kl_proxy"].append(d)
        weights = tis_weights(
            clean_logps, behaviour_logps, mask, self.args.tis_cap, self.args.tis_level
        )
        for name, value in tis_diagnostics(weights, mask, self.args.tis_cap).items():
            metrics[f"tis/{name}"].append(value)
        return weights if self.args.use_tis else torch.ones_like(weights)
