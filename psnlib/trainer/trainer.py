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
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from trl import GRPOTrainer
from trl.import_utils import is_vllm_available

from psnlib.advantages import passk_advantages
from psnlib.decoder import LLAMA_LAYOUT, decodable
from psnlib.noise import (
    CLEAN,
    noise_indices,
    noise_seed,
    perturbed_rows,
    target_linears,
    target_parameters,
)
from psnlib.sampling import sample_rows
from psnlib.similarity import Similarity, make_similarity
from psnlib.tis import kl_proxy, tis_diagnostics, tis_weights
from psnlib.trainer.checkpoints import SCHEDULER_STATE, StagedCheckpoints
from psnlib.trainer.compat import check_overrides
from psnlib.trainer.config import PSNGRPOConfig
from psnlib.trainer.length_groups import grouped_forward
from psnlib.trainer.prefix_rollouts import PrefixRollouts
from psnlib.trainer.rollouts import SampledLogps, self_certainties
from psnlib.trainer.vllm_rollouts import generate_noisy

__all__ = ["SCHEDULER_STATE", "PSNGRPOConfig", "PSNGRPOTrainer"]

logger = logging.getLogger(__name__)

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


class PSNGRPOTrainer(StagedCheckpoints, PrefixRollouts, GRPOTrainer):
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

    def _noise_indices(self, num_rollouts: int, num_generations: int) -> torch.Tensor:
        """The noise index of each local rollout: this process holds a slice of the batch."""
        first = self.accelerator.process_index * num_rollouts
        total = num_rollouts * self.accelerator.num_processes
        prompts = total // num_generations
        indices = noise_indices(prompts, num_generations, self.noise.scope, self.noise.replicas)
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
        pairs = self._clean_pair_prompts(prompt_ids)  # Variant II's clean answers
        noise = self._noise_indices(len(prompt_ids), num_generations).tolist()  # (B,)
        self._metrics["train"]["psn/sigma"].append(self.sigma)
        step = self.state.global_step
        if self.args.use_vllm:  # the pairs ride in the same batch, on the clean weights
            rows = [*prompt_ids, *pairs]
            noise_of_rows = noise + [CLEAN] * len(pairs)
            completion_ids, logps = generate_noisy(
                self.vllm_generation, model, self.noise, step, self.sigma, rows, noise_of_rows
            )
            self._last_loaded_step = -1  # vLLM holds noisy weights: a clean generation re-syncs
            pair_ids = completion_ids[len(prompt_ids) :]
        else:
            completion_ids, logps = [[]] * len(noise), [[]] * len(noise)
            for stream, rows in self._noise_slices(noise):  # several: replicas, one at a time
                prompts, row_noise = [prompt_ids[r] for r in rows], [noise[r] for r in rows]
                indices = torch.tensor(row_noise)  # (B_slice,)
                with perturbed_rows(model, self.noise, step, indices, self.sigma) as routing:
                    if self.rollout_engine == "generate":
                        with SampledLogps(model, self.temperature) as sampled:
                            ids, _ = super()._generate_single_turn(prompts, *extra)
                        row_logps = sampled.logps(ids)
                    else:
                        ids, row_logps = self._sample(
                            model, prompts, row_noise, routing.route, stream
                        )
                for r, row_ids, row_logp in zip(rows, ids, row_logps, strict=True):
                    completion_ids[r], logps[r] = row_ids, row_logp  # back in row order
            # The pairs after the rollouts, on the clean weights and (psnlib engine) from a
            # stream of their own: the rollouts are the same with or without them.
            if not pairs:
                pair_ids = []
            elif self.rollout_engine == "generate":
                pair_ids, _ = super()._generate_single_turn(pairs, *extra)
            else:
                pair_ids, _ = self._sample(model, pairs, [CLEAN] * len(pairs), None, "pairs")
        if pairs:
            self._measure_diversity(model, pairs, pair_ids)
        return completion_ids[: len(prompt_ids)], logps[: len(prompt_ids)]

    def _noise_slices(self, noise: list[int]) -> list[tuple[str, list[int]]]:
        """(sampling stream, rows) of each sampling pass: all rows in one, or, for replicas on
        targets that per-row noise cannot reach, one pass per noise index (one ``perturbed``)."""
        if not self._by_slice:
            return [("rollouts", list(range(len(noise))))]
        return [
            (f"rollouts/{k}", [row for row, index in enumerate(noise) if index == k])
            for k in sorted(set(noise))
        ]

    def _sample(
        self,
        model: nn.Module,
        rows: list[list[int]],
        noise: list[int],
        route: Any,
        stream: str = "rollouts",
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Completions and behaviour log-probs of ``rows`` by ``psnlib.sampling``, seeded from
        ``stream``: the rows of one (prompt, noise index) are samples of one prompt, routed to
        their noise (``route`` None: the model as it is)."""
        keys = [(tuple(ids), k) for ids, k in zip(rows, noise, strict=True)]
        distinct = list(dict.fromkeys(keys))  # (prompt, noise index), first appearance order
        where = {key: i for i, key in enumerate(distinct)}
        counts = [0] * len(distinct)
        for key in keys:
            counts[where[key]] += 1
        noise_of = torch.tensor([k for _, k in distinct], device=model.device)
        seed = self._rollout_seed(stream)
        samples = sample_rows(
            model,
            [list(ids) for ids, _ in distinct],
            counts,
            eos_token_id=self.eos_token_ids,
            pad_token_id=self._tokenizer.pad_token_id,
            temperature=self.temperature,
            max_new_tokens=self.max_completion_length,
            seed=seed + self.accelerator.process_index,
            with_stats=True,
            progress=False,
            route=None if route is None else lambda prompt: route(noise_of[prompt]),
        )
        first = [sum(counts[:i]) for i in range(len(counts))]  # each key's first sample row
        taken = [0] * len(distinct)
        completion_ids, logps = [], []
        for key in keys:  # the key's next unused sample
            i = where[key]
            r = first[i] + taken[i]
            taken[i] += 1
            length = int(samples.lengths[r])
            completion_ids.append(samples.tokens[r, :length].tolist())
            logps.append(samples.logprobs[r, :length].tolist())
        return completion_ids, logps

    def _rollout_seed(self, stream: str = "rollouts") -> int:
        """The sampling seed of this generation's ``stream`` (the rollouts, or Variant II's
        clean pairs), from state a resumed run restores: the global
        step and the micro-step within it. TRL's ``self._step`` counts micro-steps since
        ``train()`` began, so it restarts at 0 on resume; uninterrupted, the index below equals
        it (gradient accumulation constant), so runs keep their rollouts."""
        accumulation = self.args.gradient_accumulation_steps
        micro = self._step % accumulation  # this step's micro-batches before the generation
        index = self.state.global_step * accumulation + micro
        return noise_seed(self.args.seed, self.state.global_step, index, stream)

    def _clean_pair_prompts(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        """The first ``div_fraction`` of the distinct prompts, each twice, if ``d_sem`` is read."""
        if "d_sem" not in self.scheduler.signals:
            return []
        distinct = list(dict.fromkeys(map(tuple, prompt_ids)))
        distinct = distinct[: math.ceil(self.args.div_fraction * len(distinct))]
        return [list(ids) for ids in distinct for _ in range(2)]

    def _measure_diversity(
        self, model: nn.Module, prompts: list[list[int]], completions: list[list[int]]
    ) -> None:
        """Record ``d_sem`` (mean similarity of each prompt's two clean answers) and ``sc``
        (their mean self-certainty under the clean weights, from one teacher-forced forward)."""
        texts = self._tokenizer.batch_decode(completions, skip_special_tokens=True)
        similarities = self.similarity(texts[0::2], texts[1::2])
        certainties = self_certainties(model, prompts, completions, self._tokenizer.pad_token_id)
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
