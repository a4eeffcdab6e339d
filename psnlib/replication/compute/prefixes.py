"""The weak-prefix training sets of a profile's runs: which policy writes the prefixes, and the
profile's RL problems with their weak prefixes (``psnlib.weak_prefix.build_prefixes``), cached.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from datasets import Dataset

from psnlib.replication.compute.pretrain import build_policy
from psnlib.replication.plan.policies import committed_policy, committed_root
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.plan.runs import PREFIX_SOURCES
from psnlib.tasks.datasets import step_task, train_problems
from psnlib.weak_prefix import build_prefixes


def prefix_source(profile: Profile, source: str = "weak") -> PolicySpec:
    """The policy that writes prefixes: the profile's ``weak`` policy (another family), or
    ``same_family``: a policy of the weak policy's size and SFT length trained on the target's
    recipe (its family, chain style, batch, learning rate and seed): the paper's same-family
    control, a smaller model of the target's family trained like the target."""
    if source not in PREFIX_SOURCES:
        raise ValueError(f"unknown prefix source {source!r}; allowed: {', '.join(PREFIX_SOURCES)}")
    if source == "weak":
        return profile.weak
    return replace(
        profile.base,
        name_or_path=None,
        size=profile.weak.size,
        sft_steps=profile.weak.sft_steps,
        sft_examples=profile.weak.sft_examples,
    )


def prefix_root(profile: Profile, source: str = "weak") -> Path | None:
    """Where the prefix sets written by ``source`` for ``profile`` are kept: beside the committed
    starting policies (``results/start/prefixes/``) where the base policy and the source are both
    committed, so they travel with them; else None, the cache (``build_prefixes``'s default)."""
    specs = (profile.base, prefix_source(profile, source))
    if all(committed_policy(spec) is not None for spec in specs):
        return committed_root().parent / "prefixes"
    return None


def prefix_train_set(
    profile: Profile,
    seed: int = 0,
    *,
    truncation: str = "entropy",
    source: str = "weak",
    progress: bool = True,
) -> Dataset:
    """The profile's RL training set (``Profile.rl_dataset``) with weak prefixes
    (``build_prefixes``) written by ``source`` and cut under the profile's base policy; cached
    (``prefix_root``)."""
    target, target_tokenizer, _ = build_policy(profile.base)
    weak, weak_tokenizer, _ = build_policy(prefix_source(profile, source))
    return build_prefixes(
        train_problems(profile.rl_dataset, profile.rl_train_problems, seed=seed),
        target,
        target_tokenizer,
        weak,
        weak_tokenizer,
        truncation=truncation,
        seed=seed,
        task=step_task(profile.rl_dataset),
        max_new_tokens=profile.max_completion_length,
        root=prefix_root(profile, source),
        progress=progress,
    )
