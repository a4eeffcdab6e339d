"""The policies an experiment compares, and their tables read from the run ledger.

A ``Variant`` is either the untrained base policy or an RL arm (``psnlib.replication.plan.arms``)
with settings on top; ``compare`` reads each one's training log and evaluations at each seed from
its ledger record (``expectation``) and returns tidy tables. Every evaluation uses the same
problems and sampling seed (``EVAL_SEED``), so policies are compared on identical problems.
``load_variant`` (train or load a variant's policy) belongs to the compute layer: only
``psnlib.replication.compute.jobs.run_task`` and the probes and premise computed in a task call it.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from psnlib.replication.plan.arms import BASE, GRPO, Arm, arm
from psnlib.replication.plan.policies import policy_name, spec_hash
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.plan.runs import Run
from psnlib.trainer import PSNGRPOConfig

EVAL_SEED = 0  # problems and sampling streams of every evaluation


@dataclass(frozen=True)
class Variant:
    """One policy of a comparison.

    ``label`` names it in tables and figures; ``arm`` is an ``Arm`` or ``BASE`` (or its name,
    turned into it here);
    ``settings`` are ``PSNGRPOConfig`` overrides; ``policy`` replaces the profile's base policy
    (the "across models" comparison); ``tags`` become extra columns of every table (e.g. the
    swept value).
    """

    label: str
    arm: Arm = GRPO
    settings: dict[str, Any] = field(default_factory=dict)
    policy: PolicySpec | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    only_seeds: tuple[int, ...] | None = None  # runs at these of a plan's seeds alone

    def __post_init__(self) -> None:
        object.__setattr__(self, "arm", arm(self.arm))
        if self.arm == BASE and self.settings:
            raise ValueError(f"the base policy takes no RL settings, got {self.settings}")

    def profile(self, profile: Profile) -> Profile:
        """The profile this variant trains under (its own base policy, if it has one)."""
        return profile if self.policy is None else profile.with_overrides(base=self.policy)

    def seeds(self, seeds: tuple[int, ...]) -> tuple[int, ...]:
        """The seeds it runs at of a plan's ``seeds``: the base policy is trained once, so only
        the first; a variant with ``only_seeds`` at those alone."""
        seeds = seeds[:1] if self.arm == BASE else seeds
        return seeds if self.only_seeds is None else tuple(s for s in seeds if s in self.only_seeds)

    def run(self, profile: Profile, seed: int) -> Run:
        """Its RL run at ``seed`` (``psnlib.replication.plan.runs.Run``: settings, key, path,
        config, training set); not for the base policy, which trains nothing."""
        if self.arm == BASE:
            raise ValueError("the base policy has no RL run")
        return Run(self.profile(profile), self.arm, seed, self.settings)

    def run_path(self, profile: Profile, seed: int) -> Path:
        """Its RL run's cache directory, as ``train_policy`` names it (the reward of the
        profile's ``rl_dataset``)."""
        return self.run(profile, seed).path()

    def run_key(self, profile: Profile, seed: int) -> str:
        """The name its evaluations and its ledger record are stored under."""
        if self.arm == BASE:
            return f"{BASE.name}-{spec_hash(self.profile(profile).base)}"
        return self.run(profile, seed).key()

    def effective_settings(self, profile: Profile) -> dict[str, Any]:
        """What its runs change with respect to plain GRPO at ``profile``: the resolved
        ``PSNGRPOConfig`` fields (profile, then arm, then ``settings``) whose values differ from
        the GRPO arm's, and the weak-prefix settings of prefixed runs; ``{}`` for the base
        policy. E.g. PSN adaptive II at ``cpu``: sigma (its start), use_tis, sigma_scheduler,
        div_similarity, div_fraction."""
        if self.arm == BASE:
            return {}
        grpo = Variant("GRPO", policy=self.policy).run(profile, 0).settings()
        mine = self.run(profile, 0).settings()
        names = list(dict.fromkeys([*mine, *grpo]))
        value = {k: mine.get(k, config_default(k)) for k in names}
        return {k: v for k, v in value.items() if grpo.get(k, config_default(k)) != v}


def model_name(spec: PolicySpec) -> str:
    """A policy's name in tables: its hub id or directory, else its tiny family and size."""
    return spec.name_or_path or f"{spec.family}-{spec.size}"


def config_default(name: str) -> Any:
    """``PSNGRPOConfig``'s default of a field (MISSING for a name that is not a field)."""
    for f in fields(PSNGRPOConfig):
        if f.name == name:
            return f.default_factory() if f.default_factory is not MISSING else f.default
    return MISSING


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def arms_table(variants: list[Variant], profile: Profile, seeds: tuple[int, ...]) -> pd.DataFrame:
    """The compared policies, one row each: label, arm, how many training seeds, and what it
    changes with respect to plain GRPO at ``profile`` (``Variant.effective_settings``); a
    ``base policy`` column where some variant starts from another base policy."""
    rows = []
    for v in variants:
        changed = v.effective_settings(profile)
        if v.arm == BASE:
            text = "no RL: the policy every arm starts from"
        elif not changed:
            text = "(GRPO itself: sigma=0, no TIS)"
        else:
            text = ", ".join(f"{k}={_format(x)}" for k, x in changed.items())
        row = {"policy": v.label, "arm": v.arm.name, "seeds": len(v.seeds(seeds))}
        if any(u.policy is not None for u in variants):
            row["base policy"] = model_name(v.profile(profile).base)
        rows.append(row | {"settings that differ from GRPO": text})
    return pd.DataFrame(rows).set_index("policy")


def start_name(spec: PolicySpec) -> str:
    """How a record names the policy its run started from."""
    return spec.name_or_path or policy_name(spec)
