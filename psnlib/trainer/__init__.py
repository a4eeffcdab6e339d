"""PSN-GRPO on TRL: ``PSNGRPOConfig`` and ``PSNGRPOTrainer``, laid out as TRL lays out a method.

- ``config``: ``PSNGRPOConfig``, ``GRPOConfig`` plus the noise, TIS and scheduler fields;
- ``config_checks``: the checks of those settings, and the tables of allowed values;
- ``trainer``: ``PSNGRPOTrainer``, built from the mixins below, and its sigma-update hook;
- ``noisy_rollouts``: the rollout hook, sampling under noise, and the clean pairs;
- ``tis_loss``: the reward, advantage and loss hooks: Pass@k advantages, TIS weights;
- ``checkpoints``: atomic checkpoints that carry the sigma scheduler, resumed only when complete;
- ``kept_steps``: the policies of chosen steps, kept beyond the checkpoints' rotation;
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
