"""The RL arms: each an ``Arm`` value that the plans, the profiles and the claims hold.

An arm is a name (the first part of its runs' keys and cache directories) and the
``PSNGRPOConfig`` settings it sets on top of its profile's (``psnlib.replication.plan.runs.Run``
resolves a run's settings: the profile's sizes and recipe, then the arm's, then the profile's
settings for this arm, ``Profile.arm_settings``, then the run's own overrides). What depends on
the testbed, such as the KL target of Variant I, is the profile's to say, never the arm's: an arm
states only what defines the method. ``BASE`` stands for the untrained starting policy, which
trains nothing. A name is turned into its arm once, where it enters (``arm``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psnlib.noise import EVERY_PARAMETER


@dataclass(frozen=True)
class Arm:
    """One RL arm: ``name`` and the ``PSNGRPOConfig`` ``settings`` it sets (module docstring).
    Two arms are the same arm when their names and settings are."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict, hash=False)

    def __str__(self) -> str:
        return self.name


BASE = Arm("base")  # the untrained policy every arm starts from: no RL, no settings
GRPO = Arm("grpo", {"sigma": 0.0, "use_tis": False})
# PSN fixed: the profile's sigma, scope and TIS cap.
PSN = Arm("psn")
PSN_NO_TIS = Arm("psn_no_tis", {"use_tis": False})
# Variant I (the KL-target scheduler), starting from the profile's sigma; its target is the
# profile's (Profile.arm_settings), calibrated on each testbed.
PSN_KL = Arm("psn_kl", {"sigma_scheduler": "kl_target"})
# Variant II. Lexical d_sem suits arithmetic chains (psnlib.schedulers); clean pairs for half of
# each step's prompts keep its cost on CPU, where every extra row costs, under 10%.
PSN_DIV = Arm(
    "psn_div", {"sigma_scheduler": "diversity", "div_similarity": "lexical", "div_fraction": 0.5}
)
# The authors' released code (baibizhe/psn_rlvr): one noise draw per training step on every
# floating-point parameter, Variant I at the launcher's KL target 0.003, token TIS with the
# profile's cap (10). It starts from the profile's sigma for this arm (where the calibration puts
# a KL of 0.003 on the base policy); the rest is GRPO's, as for PSN.
PSN_RELEASED = Arm(
    "psn_released",
    {
        "noise_scope": "step",
        "noise_targets": [EVERY_PARAMETER],
        "sigma_scheduler": "kl_target",
        "kl_target": 0.003,
    },
)
# The released code's launcher default: the same draw and site, sigma held fixed (no scheduler).
# Its sigma is each profile's (Profile.arm_settings), set by a rule stated before the runs: at
# cpu, the sigma at which every-parameter noise induces the KL the released README targets
# (0.003 per token) on the base policy, the sigma PSN_RELEASED starts from; on the real profiles,
# the launcher's 0.001.
PSN_RELEASED_FIXED = Arm(
    "psn_released_fixed", {"noise_scope": "step", "noise_targets": [EVERY_PARAMETER]}
)
# Weak-model guidance: a fifth of the prompt groups continue a weak prefix; alone, and together
# with PSN fixed's noise (in neither paper).
WEAK_PREFIX = Arm("weak_prefix", {"sigma": 0.0, "use_tis": False, "prefix_prob": 0.2})
PSN_WEAK_PREFIX = Arm("psn_weak_prefix", {"prefix_prob": 0.2})

# 3PO-style (arXiv 2608.09805, no code released): in-group diverse noise, a draw per rollout,
# learned with masked sequence-level importance sampling (psnlib.tis, Eq. MIS: a rollout whose
# sequence ratio leaves [1/C, C], C the profile's TIS cap, is masked out of the loss).
PSN_MASKED_IS = Arm("psn_masked_is", {"noise_scope": "rollout", "tis_level": "sequence_mask"})

ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        GRPO,
        PSN,
        PSN_NO_TIS,
        PSN_KL,
        PSN_DIV,
        PSN_RELEASED,
        PSN_RELEASED_FIXED,
        PSN_MASKED_IS,
        WEAK_PREFIX,
        PSN_WEAK_PREFIX,
    )
}


def arm(value: Arm | str) -> Arm:
    """``value`` as an arm: an ``Arm`` as it is, a name (``BASE``'s or a key of ``ARMS``) as the
    arm of that name; anything else is a ValueError naming it and the names allowed."""
    if isinstance(value, Arm):
        return value
    if value == BASE.name:
        return BASE
    if isinstance(value, str) and value in ARMS:
        return ARMS[value]
    raise ValueError(f"unknown arm {value!r}; allowed: {[BASE.name, *sorted(ARMS)]}")


def rl_arm(value: Arm | str) -> Arm:
    """``value`` as an RL arm (``arm``, less ``BASE``): a ValueError names anything else and the
    names allowed."""
    if value == BASE or value == BASE.name:
        raise ValueError(f"the {BASE.name} policy is not an RL arm: it trains nothing")
    if isinstance(value, Arm):
        return value
    if isinstance(value, str) and value in ARMS:
        return ARMS[value]
    raise ValueError(f"unknown arm {value!r}; allowed: {sorted(ARMS)}")
