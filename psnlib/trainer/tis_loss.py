"""The scoring and loss side of a PSN-GRPO step: TRL's reward, advantage and loss hooks.

``TISLoss`` keeps each step's rewards (``_calculate_rewards``) so that ``advantage_mode="passk"``
replaces the advantages of training batches by Pass@k-training advantages of the same rewards
(``_generate_and_score_completions``, which also logs the weak-prefix rewards). The TIS weights
``min(pi_clean / pi_noisy, tis_cap)`` (``psnlib.tis``), with the KL proxy and TIS diagnostics
logged (``_tis``), multiply the per-token loss through TRL's ``get_off_policy_mask``; with several
optimizer steps per generation batch they come from TRL's rollout-time clean log-probs and are
folded into the advantages instead, and with vLLM TRL's importance-sampling correction applies
them. The loss forward (``_get_per_token_logps_and_entropies``) runs in groups of similar
completion length (``psnlib.trainer.length_groups``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from trl import GRPOTrainer

from psnlib.advantages import passk_advantages
from psnlib.tis import kl_proxy, tis_diagnostics, tis_weights
from psnlib.trainer.length_groups import grouped_forward

# TRL 1.16 turns gradient checkpointing (on by TRL's default) off around generation and around
# its no-grad forwards, and back on, through names transformers 5 deprecates: each toggle reads
# ``is_gradient_checkpointing`` and calls ``gradient_checkpointing_disable`` and ``_enable``, a
# FutureWarning each, at least one toggle a training step (issue 39). Only these, from transformers.
_DEPRECATED_TOGGLE = (
    r"`(is_gradient_checkpointing|gradient_checkpointing_(disable|enable))` is deprecated"
)


@contextmanager
def _quiet_checkpointing_toggle() -> Iterator[None]:
    """Ignore transformers' FutureWarnings of the deprecated checkpointing names TRL calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", _DEPRECATED_TOGGLE, FutureWarning, r"transformers\.modeling_utils$"
        )
        yield


class TISLoss:
    """Mixin for ``PSNGRPOTrainer`` (a TRL ``GRPOTrainer``): Pass@k advantages, TIS weights in the
    loss or the advantages, and the loss forward by length groups."""

    def _calculate_rewards(
        self, inputs: list[dict], prompts: list, completions: list, completion_ids_list: list
    ) -> torch.Tensor:
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._rewards_per_func = rewards_per_func  # (B_global, n_funcs), for Pass@k advantages
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict[str, Any]:
        prefixed = None
        if self.model.training and self.args.prefix_prob > 0:
            inputs, prefixed = self._with_prefixes(inputs)
        with _quiet_checkpointing_toggle():
            output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        if prefixed is not None:
            self._log_prefix_rewards(prefixed)
        if self.args.advantage_mode == "passk":
            weights = self.reward_weights.to(self._rewards_per_func.device)
            rewards = (self._rewards_per_func * weights).nansum(dim=1)  # (B_global,)
            advantages = passk_advantages(rewards.view(-1, self.num_generations), self.args.passk_k)
            first = self.accelerator.process_index * len(inputs)
            output["advantages"] = advantages.view(-1)[first : first + len(inputs)]  # (B,)
        if not self._tis_in_loss:  # weight with the rollout-time clean log-probs, now
            clean, behaviour = output["old_per_token_logps"], output["sampling_per_token_logps"]
            weights = self._tis(clean, behaviour, output["completion_mask"])
            if not self._trl_tis:  # else TRL's vLLM correction applies these weights
                output["advantages"] = output["advantages"][:, None] * weights  # (B, T)
        return output

    def _get_per_token_logps_and_entropies(
        self,
        model: nn.Module,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **multimodal: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's forward in ``args.loss_groups`` groups of rows of similar completion length,
        without the padding (``psnlib.trainer.length_groups``); with one group, or MoE or multimodal
        inputs, TRL's own forward over the padded batch."""
        forward = super()._get_per_token_logps_and_entropies
        batch = (model, input_ids, attention_mask, logits_to_keep)
        options = {"batch_size": batch_size, "compute_entropy": compute_entropy}
        multimodal_input = any(x is not None for x in multimodal.values())
        if self.args.loss_groups == 1 or compute_aux_loss or multimodal_input:
            return forward(*batch, **options, compute_aux_loss=compute_aux_loss, **multimodal)
        return grouped_forward(forward, *batch, self.args.loss_groups, **options)

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
