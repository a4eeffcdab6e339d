"""PSN-GRPO: TRL's ``GRPOTrainer`` with parameter-space noise on the rollouts and TIS in the loss.

One training step:

1. Rollouts are sampled under noisy weights ``W~ = W + sigma * eps`` (``psnlib.noise``; one noise
   sample per step, per prompt group or per rollout index), and the log-prob of every sampled
   token under that same noise is recorded while sampling: the behaviour log-probs.
2. Rewards and group advantages are computed as in GRPO, or with Pass@k training.
3. The loss runs on the clean weights. Each token's policy-gradient loss is multiplied by the TIS
   weight ``min(pi_clean / pi_noisy, C)`` (``psnlib.tis``); the noisy-vs-clean KL proxy is logged.

Evaluation always samples the clean policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from trl import GRPOConfig, GRPOTrainer

from psnlib.advantages import passk_advantages
from psnlib.noise import NoiseConfig, noise_indices, perturbed_rows, target_parameters
from psnlib.tis import check_tis, kl_proxy, tis_diagnostics, tis_weights

ADVANTAGE_MODES = ("grpo", "passk")
SIGMA_SCHEDULERS = ("fixed",)  # psnlib.schedulers adds kl_target and diversity


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
        metadata={"help": "How sigma changes between steps; only 'fixed' for now."},
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
        if self.sigma_scheduler not in SIGMA_SCHEDULERS:
            raise ValueError(
                f"unknown sigma_scheduler {self.sigma_scheduler!r}; allowed: "
                f"{', '.join(SIGMA_SCHEDULERS)}"
            )
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
    - ``self.sigma`` is the sigma of the next rollouts (logged as ``psn/sigma``); a scheduler may
      change it after each step.

    With ``sigma=0`` and ``use_tis=False`` a step is exactly a ``GRPOTrainer`` step. Tool calling,
    vLLM and continuous batching are not supported.
    """

    def __init__(
        self, model: Any, reward_funcs: Any, args: PSNGRPOConfig | None = None, **kwargs: Any
    ) -> None:
        args = PSNGRPOConfig() if args is None else args
        if not isinstance(args, PSNGRPOConfig):
            raise TypeError(f"args must be a PSNGRPOConfig, got {type(args).__name__}")
        super().__init__(model, reward_funcs, args=args, **kwargs)
        if self.tools:
            raise ValueError("PSNGRPOTrainer does not support tool calling yet; pass no tools")
        self.noise = args.noise_config()
        self.sigma = args.sigma
        target_parameters(self.accelerator.unwrap_model(self.model), self.noise.targets)
        # TRL scores the clean policy at rollout time (`old_per_token_logps`) only when one
        # generation batch feeds several optimizer steps; otherwise the loss forward's clean
        # log-probs are the rollout-time ones, and TIS happens in the loss at no extra cost.
        generate_every = args.steps_per_generation * self.num_iterations
        self._tis_in_loss = args.gradient_accumulation_steps % generate_every == 0
        if self._tis_in_loss and self.off_policy_mask_threshold is None:
            self.off_policy_mask_threshold = math.inf  # TRL then calls get_off_policy_mask

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
        self._metrics["train"]["psn/sigma"].append(self.sigma)
        with (
            perturbed_rows(model, self.noise, self.state.global_step, indices[order], self.sigma),
            SampledLogps(model, self.temperature) as sampled,
        ):
            completion_ids, _ = super()._generate_single_turn(
                [prompt_ids[i] for i in order], *extra
            )
        logps = sampled.logps(completion_ids)
        unsort = torch.argsort(torch.tensor(order)).tolist()  # back to TRL's row order
        return [completion_ids[i] for i in unsort], [logps[i] for i in unsort]

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
        d = kl_proxy(clean_logps, behaviour_logps, mask)
        metrics["psn/kl_proxy"].append(self.accelerator.gather(d).mean().item())
        weights = tis_weights(
            clean_logps, behaviour_logps, mask, self.args.tis_cap, self.args.tis_level
        )
        for name, value in tis_diagnostics(weights, mask, self.args.tis_cap).items():
            metrics[f"tis/{name}"].append(value)
        return weights if self.args.use_tis else torch.ones_like(weights)
