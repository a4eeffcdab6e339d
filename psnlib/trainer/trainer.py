"""PSN-GRPO: TRL's ``GRPOTrainer`` with parameter-space noise on the rollouts and TIS in the loss.

One training step:

1. Rollouts are sampled under noisy weights ``W~ = W + sigma * eps`` (``psnlib.noise``; one noise
   sample per step, per replica's slice of the prompts, per prompt group or per rollout index),
   and the log-prob of every sampled token under that same noise is recorded while sampling: the
   behaviour log-probs. One sample per step (per replica slice, one slice at a time) is added to
   the weights in place for its rollouts and taken off bit-exactly before the loss; that is how
   the released code's site, ``every_parameter`` (embeddings, norms and head too, which per-row
   noise cannot reach), is served.
2. Rewards and group advantages are computed as in GRPO, or with Pass@k training.
3. The loss runs on the clean weights. Each token's policy-gradient loss is multiplied by the TIS
   weight ``min(pi_clean / pi_noisy, C)`` (``psnlib.tis``); the noisy-vs-clean KL proxy is logged.
4. At the end of the step a sigma scheduler (``psnlib.schedulers``) turns the step's signals into
   the sigma of the next rollouts. The diversity scheduler's two clean answers per prompt are
   sampled in the same batch as the rollouts, as extra rows on the clean weights.

Rollouts are sampled by ``psnlib.sampling`` (a tree KV-cache decoder, several times faster than
``generate`` for small policies on CPU), with ``rollout_engine="generate"`` by TRL's own
``generate`` call, or with ``use_vllm=True`` by TRL's vLLM engine (``psnlib.trainer.vllm_rollouts``:
the noisy weights are synced to vLLM, once per noise sample, and TRL's vLLM importance-sampling
correction is the TIS).

Evaluation always samples the clean policy.

``PSNGRPOTrainer`` is laid out in mixins: the rollout hook (steps 1 and 4's clean pairs) is
``psnlib.trainer.noisy_rollouts.NoisyRollouts``, the reward, advantage and loss hooks (steps 2
and 3) ``psnlib.trainer.tis_loss.TISLoss``; this module builds the trainer and ends each step
(the sigma update, and the stop at a non-finite loss, gradient norm or weight).
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from typing import Any

import torch
from torch import nn
from trl import GRPOTrainer
from trl.import_utils import is_vllm_available

from psnlib.decoder import LLAMA_LAYOUT, decodable
from psnlib.noise import target_linears, target_parameters
from psnlib.similarity import Similarity, make_similarity
from psnlib.trainer.checkpoints import SCHEDULER_STATE, StagedCheckpoints
from psnlib.trainer.compat import check_overrides
from psnlib.trainer.config import PSNGRPOConfig
from psnlib.trainer.noisy_rollouts import NoisyRollouts
from psnlib.trainer.prefix_rollouts import PrefixRollouts
from psnlib.trainer.tis_loss import TISLoss

__all__ = ["SCHEDULER_STATE", "PSNGRPOConfig", "PSNGRPOTrainer"]

logger = logging.getLogger(__name__)


class PSNGRPOTrainer(StagedCheckpoints, PrefixRollouts, NoisyRollouts, TISLoss, GRPOTrainer):
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

    - Weak-model guidance (``prefix_prob > 0``, ``psnlib.trainer.prefix_rollouts``): each
      prompt group continues its dataset row's ``weak_prefix`` with probability ``prefix_prob``;
      the prefix joins the prompt (conditioning only) and the reward judges prefix + completion.
      Logs ``prefix/{fraction,tokens,reward_prefixed,reward_plain}``. Combines with noise and
      both advantage modes.
    - ``_get_per_token_logps_and_entropies`` (the loss forward, and TRL's rollout-time clean
      log-probs) runs the rows in ``args.loss_groups`` groups of similar completion length, each
      cut to its longest completion (``psnlib.trainer.length_groups``): no compute on padding.
    - ``rollout_engine="psnlib"`` (default) samples training rollouts with ``psnlib.sampling``;
      for a model the psnlib decoder does not run (e.g. Gemma-2) the trainer logs a warning and
      uses ``generate``.

    - ``use_vllm=True``: ``psnlib.trainer.vllm_rollouts.generate_noisy`` samples the training
      rollouts on vLLM under noise; TRL's vLLM importance-sampling correction weights the loss,
      and psnlib only logs the KL proxy and TIS diagnostics.

    - Checkpoints (``psnlib.trainer.checkpoints.StagedCheckpoints``) are written aside and
      renamed into place, with the sigma scheduler's state, so a kill never leaves a half-written
      ``checkpoint-N``; ``train`` resumes only from a complete one; rollout seeds come from
      restored state (``_rollout_seed``), so a resumed run is the uninterrupted one.
    - A non-finite loss (``training_step``), gradient norm or weight (``_maybe_log_save_evaluate``,
      after each optimizer step, before any checkpoint of it is written) raises a
      ``FloatingPointError`` naming the step and the settings likely responsible; TRL's trainer
      would log the average of earlier losses instead (``logging_nan_inf_filter``) and go on.

    With ``sigma=0``, ``use_tis=False`` and ``loss_groups=1`` a step is exactly a ``GRPOTrainer``
    step (with more groups, up to rounding). Tool calling
    and continuous batching are not supported. The private TRL methods overridden here are checked
    against the installed TRL when a trainer is built (``psnlib.trainer.compat``).
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any,
        args: PSNGRPOConfig | None = None,
        similarity: Similarity | None = None,
        **kwargs: Any,
    ) -> None:
        check_overrides(type(self), GRPOTrainer)  # the TRL methods below still look as written for
        args = PSNGRPOConfig() if args is None else args
        if not isinstance(args, PSNGRPOConfig):
            raise TypeError(f"args must be a PSNGRPOConfig, got {type(args).__name__}")
        try:
            super().__init__(model, reward_funcs, args=args, **kwargs)
        except ImportError as err:  # TRL builds its vLLM engine here
            if args.use_vllm and not is_vllm_available():
                raise ValueError(
                    "use_vllm=True needs vLLM, which is not installed: pip install 'psnlib[gpu]' "
                    "(or use_vllm=False)"
                ) from err
            raise
        if self.tools:
            raise ValueError("PSNGRPOTrainer does not support tool calling yet; pass no tools")
        self.noise = args.noise_config()
        self.scheduler = args.sigma_schedule()
        self._signals: dict[str, list[float]] = defaultdict(list)  # since the last sigma update
        self._step_cpu_time = 0.0  # CPU seconds of the optimizer step in progress
        self.similarity = similarity
        unwrapped = self.accelerator.unwrap_model(self.model)
        target_parameters(unwrapped, self.noise.targets)  # each target must match
        self.rollout_engine = args.rollout_engine  # the engine of the training rollouts
        if self.rollout_engine == "psnlib" and not args.use_vllm and not decodable(unwrapped):
            self.rollout_engine = "generate"
            logger.warning(
                "rollout_engine='psnlib' runs %s models with full attention; %s has model_type "
                "%r: training rollouts use rollout_engine='generate' (TRL's generate) instead",
                "/".join(LLAMA_LAYOUT),
                type(unwrapped).__name__,
                unwrapped.config.model_type,
            )
        per_row = "d_sem" in self.scheduler.signals or self.noise.scope != "step"
        if per_row and not args.use_vllm:  # vLLM is sent whole noisy weights instead
            target_linears(unwrapped, self.noise.targets)  # per-row noise needs nn.Linear
        # Step-scope replicas: on nn.Linear targets one batched per-row forward; on others
        # (every_parameter) the rollouts are sampled one replica's slice at a time, in place.
        self._by_slice = False
        if self.noise.replicas > 1 and not args.use_vllm:
            try:
                target_linears(unwrapped, self.noise.targets)
            except ValueError:  # embeddings, norms: per-row noise cannot reach them
                self._by_slice = True
        columns = getattr(self.train_dataset, "column_names", None)
        if columns is not None and "prompt" not in columns:
            raise ValueError(
                f"train_dataset needs a 'prompt' column (what rollouts continue); it has {columns}"
            )
        if args.prefix_prob > 0 and columns is not None and "weak_prefix" not in columns:
            raise ValueError(
                f"prefix_prob={args.prefix_prob} needs a 'weak_prefix' column in train_dataset, "
                f"which has {columns}; add it with psnlib.weak_prefix.build_prefixes"
            )
        if "d_sem" in self.scheduler.signals and self.similarity is None:
            self.similarity = make_similarity(args.div_similarity, self.accelerator.device)
        # TRL scores the clean policy at rollout time (`old_per_token_logps`) only when one
        # generation batch feeds several optimizer steps; otherwise the loss forward's clean
        # log-probs are the rollout-time ones, and TIS happens in the loss at no extra cost.
        # With vLLM, TRL's importance-sampling correction applies the TIS weights from the clean
        # log-probs it computes at rollout time (PSNGRPOConfig.use_vllm_tis).
        generate_every = args.steps_per_generation * self.num_iterations
        self._trl_tis = args.use_vllm and args.vllm_importance_sampling_correction
        aligned = args.gradient_accumulation_steps % generate_every == 0
        self._tis_in_loss = aligned and not self._trl_tis
        if self._tis_in_loss and self.off_policy_mask_threshold is None:
            self.off_policy_mask_threshold = math.inf  # TRL then calls get_off_policy_mask

    @property
    def sigma(self) -> float:
        """The sigma of the next rollouts."""
        return self.scheduler.sigma

    def training_step(
        self, model: nn.Module, inputs: dict, num_items_in_batch: Any
    ) -> torch.Tensor:
        cpu = time.process_time()
        loss = super().training_step(model, inputs, num_items_in_batch)  # counts self._step
        self._step_cpu_time += time.process_time() - cpu
        if not torch.isfinite(loss).all():
            self._non_finite(self.state.global_step + 1, f"the loss is {loss.item()}")
        if self._step % self.current_gradient_accumulation_steps == 0:  # the step's last one
            # CPU seconds of the step (every thread of this process), beside TRL's wall-clock
            # step_time: unlike wall time, not stretched by other jobs on the machine.
            self._metrics["train"]["step_cpu_time"].append(self._step_cpu_time)
            self._step_cpu_time = 0.0
            self._update_sigma()
        return loss

    def _maybe_log_save_evaluate(
        self,
        tr_loss: torch.Tensor,
        grad_norm: torch.Tensor | float | None,
        model: nn.Module,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        """Stop at a non-finite gradient norm or weight of the step just taken, before TRL logs
        it or saves a checkpoint."""
        step = self.state.global_step
        if grad_norm is not None and not math.isfinite(float(grad_norm)):
            self._non_finite(step, f"the gradient norm is {float(grad_norm)}")
        params = [p for p in self.model.parameters() if p.numel()]
        if not torch.stack([p.isfinite().all() for p in params]).all():
            name = next(n for n, p in self.model.named_parameters() if not p.isfinite().all())
            self._non_finite(step, f"weight {name} is not finite")
        super()._maybe_log_save_evaluate(tr_loss, grad_norm, model, *args, **kwargs)

    def _non_finite(self, step: int, what: str) -> None:
        """Raise the ``FloatingPointError`` of a non-finite number at ``step``."""
        args = self.args
        settings = {
            "sigma": self.sigma,
            "learning_rate": args.learning_rate,
            "temperature": args.temperature,
            "beta": args.beta,
            "weight_decay": args.weight_decay,
            "max_grad_norm": args.max_grad_norm,
        }
        raise FloatingPointError(
            f"step {step}: {what} ({', '.join(f'{k}={v:g}' for k, v in settings.items())}); "
            "stopped before this step was saved"
        )

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
