"""PSN-GRPO on TRL: ``PSNGRPOConfig`` and ``PSNGRPOTrainer``, laid out as TRL lays out a method.

- ``config``: ``PSNGRPOConfig``, ``GRPOConfig`` plus the noise, TIS and scheduler fields;
- ``trainer``: ``PSNGRPOTrainer``, the rollout, loss and sigma-update hooks;
- ``checkpoints``: atomic checkpoints that carry the sigma scheduler, resumed only when complete;
- ``prefix_rollouts``: the weak-prefix branch of a step's prompt groups;
- ``rollouts``: behaviour log-probs recorded while sampling, self-certainty of clean answers;
- ``vllm_rollouts``: noisy weights synced into TRL's vLLM engine;
- ``length_groups``: the loss forward by groups of similar length, without padding;
- ``compat``: the TRL methods the trainer overrides, checked against the installed TRL.
"""

from psnlib.trainer.checkpoints import SCHEDULER_STATE
from psnlib.trainer.config import PSNGRPOConfig
from psnlib.trainer.trainer import PSNGRPOTrainer

__all__ = ["SCHEDULER_STATE", "PSNGRPOConfig", "PSNGRPOTrainer"]
