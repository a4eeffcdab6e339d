"""Weak-model guidance in a GRPO step: some prompt groups continue a weak model's prefix.

``PrefixRollouts._with_prefixes`` picks the groups (``psnlib.weak_prefix.choose_prefixed``,
probability ``prefix_prob``, the same on every process) and appends their dataset row's
``weak_prefix`` to the prompt; the prefix is conditioning only (no loss, TIS or token count) and
the reward judges prefix + completion. ``_log_prefix_rewards`` logs the mean reward of the
prefixed and the plain groups.
"""

from __future__ import annotations

import torch

from psnlib.weak_prefix import choose_prefixed


class PrefixRollouts:
    """Mixin for ``PSNGRPOTrainer`` (a TRL ``GRPOTrainer``): weak-prefix rows and their metrics."""

    def _with_prefixes(self, inputs: list[dict]) -> tuple[list[dict], torch.Tensor]:
        """Weak-model guidance: the groups ``choose_prefixed`` picks continue ``prompt +
        weak_prefix``; every row gets a ``prefix`` field ("" if plain), which TRL hands the reward
        functions, so the reward judges ``prefix + completion``. The prefix is part of the prompt:
        no loss, TIS or token count on it. Returns the rows and the global (groups,) choice."""
        G = self.num_generations
        if any(not isinstance(x.get("weak_prefix"), str) for x in inputs):
            raise ValueError(
                "prefix_prob > 0 needs a string column 'weak_prefix' in the train dataset "
                "(psnlib.weak_prefix.build_prefixes adds it)"
            )
        if any(not isinstance(x["prompt"], str) for x in inputs):
            raise ValueError("weak prefixes continue plain-text prompts, got a conversation")
        groups = len(inputs) // G
        total = groups * self.accelerator.num_processes
        chosen = choose_prefixed(
            total, self.args.prefix_prob, self.args.seed, self.state.global_step
        )
        first = self.accelerator.process_index * groups
        rows = []
        for r, x in enumerate(inputs):
            prefix = x["weak_prefix"] if chosen[first + r // G] else ""
            rows.append({**x, "prompt": x["prompt"] + prefix, "prefix": prefix})
        lengths = [
            len(self._tokenizer(x["prefix"], add_special_tokens=False)["input_ids"])
            for x in rows[::G]
            if x["prefix"]
        ]
        metrics = self._metrics["train"]
        metrics["prefix/fraction"].append(chosen.float().mean().item())
        if lengths:
            metrics["prefix/tokens"].append(sum(lengths) / len(lengths))
        return rows, chosen

    def _log_prefix_rewards(self, chosen: torch.Tensor) -> None:
        """Mean reward of the prefixed and of the plain groups of the step (all processes)."""
        weights = self.reward_weights.to(self._rewards_per_func.device)
        rewards = (self._rewards_per_func * weights).nansum(dim=1)  # (B_global,)
        prefixed = chosen.repeat_interleave(self.num_generations).to(rewards.device)
        for name, rows in (("prefixed", prefixed), ("plain", ~prefixed)):
            if rows.any():
                self._metrics["train"][f"prefix/reward_{name}"].append(rewards[rows].mean().item())
