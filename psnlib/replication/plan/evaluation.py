"""What an evaluation is: the settings that determine its results besides the policy
(``eval_settings``: problems, samples, temperature, length, the ks, the seed and
``EVAL_VERSION``). A run's ledger record keeps them; ``psnlib.replication.compute.evaluation``
computes an evaluation with them."""

from __future__ import annotations

from typing import Any

from psnlib.replication.plan.profiles import Profile

EVAL_VERSION = 2  # bump when stored results change (2: the decoder's einsum attention, issue 18)


def eval_settings(profile: Profile, seed: int, engine: Any = None) -> dict[str, Any]:
    """The settings of an evaluation at ``profile``: what determines its results besides the
    policy (a run's ledger record keeps them, ``psnlib.replication.records.ledger``)."""
    sampler = {} if engine is None else {"sampler": "vllm"}  # psnlib's keys stay as they were
    return {
        **sampler,
        "problems": profile.eval_problems,
        "samples": profile.eval_samples,
        "temperature": profile.eval_temperature,
        "max_new_tokens": profile.max_completion_length,
        "ks": list(profile.ks),
        "seed": seed,
        "version": EVAL_VERSION,
    }
