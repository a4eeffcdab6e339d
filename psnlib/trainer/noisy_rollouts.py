"""The rollout side of a PSN-GRPO step: TRL's generation hook, sampling under noisy weights.

``NoisyRollouts._generate_single_turn`` samples the training rollouts under noise
(``psnlib.noise``: one sample per step, per replica's slice of the prompts, per prompt group or
per rollout index, ``_noise_indices``) and returns the behaviour log-probs recorded while
sampling, which TRL stores as ``sampling_per_token_logps``: by ``psnlib.sampling`` (``_sample``,
seeded from restored state, ``_rollout_seed``), by TRL's ``generate`` (``SampledLogps``), or on
vLLM (``psnlib.trainer.vllm_rollouts.generate_noisy``). Replicas on targets per-row noise cannot
reach are sampled one slice at a time (``_noise_slices``). The diversity scheduler's two clean
answers per prompt (``_clean_pair_prompts``) ride in the same batch, on the clean weights, and
give its signals ``d_sem`` and ``sc`` (``_measure_diversity``). Evaluation samples the clean
policy.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from psnlib.noise import CLEAN, noise_indices, noise_seed, perturbed_rows
from psnlib.sampling import sample_rows
from psnlib.trainer.rollouts import SampledLogps, self_certainties
from psnlib.trainer.vllm_rollouts import generate_noisy


class NoisyRollouts:
    """Mixin for ``PSNGRPOTrainer`` (a TRL ``GRPOTrainer``): training rollouts under noise, with
    their behaviour log-probs, and the diversity scheduler's clean pairs."""

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
