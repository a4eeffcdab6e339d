"""RL training runs (GRPO and PSN-GRPO arms) at a profile's scale, cached and resumable.

A run is identified by its profile, arm, seed and every override; its final policy and training
log live in ``data/cache/runs/<profile>/<arm>-s<seed>-<hash>/`` and are written atomically, so a
finished run is loaded instead of retrained. While training, TRL checkpoints go to a ``.work``
directory beside it and an interrupted run resumes from the last one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib.io import data_dir, load_cached
from psnlib.models import load_policy, save_policy
from psnlib.pretrain import base_policy, policy_meta, spec_hash
from psnlib.profiles import Profile, get_profile
from psnlib.tasks.datasets import COUNTDOWN, task_reward, train_problems
from psnlib.trainer import SCHEDULER_STATE, PSNGRPOConfig, PSNGRPOTrainer
from psnlib.weak_prefix import PREFIX_SOURCES, TRUNCATIONS, prefix_train_set

# Each arm is a set of PSNGRPOConfig settings on top of the profile's; "psn" takes its sigma,
# scope and TIS cap from the profile, and the adaptive arms start from that sigma.
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"sigma": 0.0, "use_tis": False},
    "psn": {},
    "psn_no_tis": {"use_tis": False},
    # Variant I. Target calibrated on the cpu testbed, whose KL proxy is ~5e-4 at sigma 0.003
    # (the paper's 0.003-0.005 suit its 7B models).
    "psn_kl": {"sigma_scheduler": "kl_target", "kl_target": 0.001},
    # Variant II. Lexical d_sem suits arithmetic chains (psnlib.schedulers); clean pairs for half
    # of each step's prompts keep its cost on CPU, where every extra row costs, under 10%.
    "psn_div": {"sigma_scheduler": "diversity", "div_similarity": "lexical", "div_fraction": 0.5},
    # Weak-model guidance: a fifth of the prompt groups continue a weak prefix; alone, and
    # together with the PSN arm's noise (in neither paper).
    "weak_prefix": {"sigma": 0.0, "use_tis": False, "prefix_prob": 0.2},
    "psn_weak_prefix": {"prefix_prob": 0.2},
}
# How the training set's `weak_prefix` column is made (psnlib.weak_prefix.prefix_train_set): run
# settings beside the PSNGRPOConfig ones, present when prefix_prob > 0.
PREFIX_SETTINGS = {"prefix_truncation": "entropy", "prefix_source": "weak"}
# 3: the loss forward by length groups, the decoder's einsum attention (issue 18): new rounding
CACHE_VERSION = 3
KEEP_CHECKPOINTS = 2  # save_total_limit of a run: the newest complete checkpoint is always kept


def rl_settings(profile: str | Profile, arm: str, seed: int, **overrides: Any) -> dict[str, Any]:
    """The ``PSNGRPOConfig`` settings of one run, without its output directory: profile sizes,
    then the arm, then ``overrides``."""
    profile = get_profile(profile)
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; allowed: {sorted(ARMS)}")
    G = profile.num_generations
    settings: dict[str, Any] = {
        "max_steps": profile.rl_steps,
        "per_device_train_batch_size": profile.rl_prompts_per_step * G,  # one step = one batch
        "num_generations": G,
        "max_completion_length": profile.max_completion_length,
        "learning_rate": profile.learning_rate,
        "sigma": profile.psn_sigma,
        "noise_scope": profile.psn_scope,
        "tis_cap": profile.tis_cap,
        "passk_k": profile.passk_k,
        "seed": seed,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": max(1, profile.rl_steps // 5),
        "report_to": "none",
        "use_cpu": not torch.cuda.is_available(),
        "bf16": False,
    }
    recipe, arm_recipe = dict(profile.rl_settings), dict(dict(profile.arm_settings).get(arm, ()))
    settings = {**settings, **recipe, **ARMS[arm], **arm_recipe, **overrides}
    if not isinstance(settings["max_steps"], int) or settings["max_steps"] < 1:
        raise ValueError(
            f"max_steps of a run must be an integer >= 1, got {settings['max_steps']!r}"
        )
    if settings.get("prefix_prob", 0.0) > 0:
        settings = {**PREFIX_SETTINGS, **settings}
        for name, allowed in (
            ("prefix_truncation", TRUNCATIONS),
            ("prefix_source", PREFIX_SOURCES),
        ):
            if settings[name] not in allowed:
                raise ValueError(
                    f"unknown {name} {settings[name]!r}; allowed: {', '.join(allowed)}"
                )
        return settings
    given = sorted(set(PREFIX_SETTINGS) & set(settings))
    if given:
        raise ValueError(f"{given} only apply to weak-prefix runs: also set prefix_prob > 0")
    return settings


def rl_config(
    profile: str | Profile, arm: str, seed: int, output_dir: str | Path, **overrides: Any
) -> PSNGRPOConfig:
    """The ``PSNGRPOConfig`` of one run (``rl_settings`` but the prefix settings), writing to
    ``output_dir``; the settings that change no result (gradient checkpointing, how many
    checkpoints are kept) are added here, outside the run's cache key."""
    settings = rl_settings(profile, arm, seed, **overrides)
    for name in PREFIX_SETTINGS:
        settings.pop(name, None)
    speed = {
        "activation_checkpointing": get_profile(profile).gradient_checkpointing,
        "save_total_limit": KEEP_CHECKPOINTS,
    }
    return PSNGRPOConfig(output_dir=str(output_dir), **{**speed, **settings})


def train_set(profile: str | Profile, arm: str, seed: int, **overrides: Any) -> Dataset:
    """The training problems of a run (the profile's ``rl_dataset``), with weak prefixes if it
    uses them."""
    profile = get_profile(profile)
    settings = rl_settings(profile, arm, seed, **overrides)
    if settings.get("prefix_prob", 0.0) > 0:
        return prefix_train_set(
            profile,
            seed,
            truncation=settings["prefix_truncation"],
            source=settings["prefix_source"],
        )
    return train_problems(profile.rl_dataset, profile.rl_train_problems, seed=seed)


def run_dir(
    profile: str | Profile, arm: str, seed: int, overrides: dict[str, Any], reward: str
) -> Path:
    """Cache directory of a run. Its hash covers what determines the trained policy (the base
    policy, the training problems, the reward's name and every resolved trainer setting) and
    nothing else: a change to the profile's evaluation sizes still finds the same run, and so
    does an override to the value that the profile and arm already give."""
    profile = get_profile(profile)
    data = {} if profile.rl_dataset == COUNTDOWN else {"dataset": profile.rl_dataset}
    blob = json.dumps(
        {
            "settings": rl_settings(profile, arm, seed, **overrides),
            "base": spec_hash(profile.base),
            "problems": profile.rl_train_problems,
            "reward": reward,
            "v": CACHE_VERSION,
            **data,  # absent for the testbed, whose runs keep their keys
        },
        sort_keys=True,
        default=str,
    )
    key = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return data_dir() / "cache" / "runs" / profile.name / f"{arm}-s{seed}-{key}"


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint in ``output_dir``, or None. Complete: it holds the sigma
    scheduler's state, written last. ``PSNGRPOTrainer`` renames a checkpoint into place once
    written; one that an older psnlib left half-written when killed is skipped."""
    done = [
        p
        for p in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")
        if p.name.rsplit("-", 1)[1].isdigit() and (p / SCHEDULER_STATE).exists()
    ]
    return str(max(done, key=lambda p: int(p.name.rsplit("-", 1)[1]))) if done else None


def fit(
    config: PSNGRPOConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    reward: Callable[..., list[float]],
) -> tuple[PSNGRPOTrainer, list[dict[str, Any]]]:
    """Train ``model`` with ``PSNGRPOTrainer``, resuming from the last complete checkpoint in
    ``config.output_dir`` if there is one. A checkpoint at ``max_steps`` is loaded, not trained
    on (``Trainer`` would take one more step). Returns the trainer and the training log (one
    row per step)."""
    trainer = PSNGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    resume = last_checkpoint(config.output_dir)
    state = None if resume is None else TrainerState.load_from_json(f"{resume}/trainer_state.json")
    if state is not None and state.global_step >= config.max_steps:
        trainer._load_from_checkpoint(resume)
        trainer.state = state
    else:
        trainer.train(resume_from_checkpoint=resume)
    return trainer, [row for row in trainer.state.log_history if "reward" in row]


def _load_run(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame]:
    """A finished run's policy and log."""
    log = pd.DataFrame(policy_meta(path)["log"])
    model, tokenizer = load_policy(path, dtype=torch.float32)
    return model.eval(), tokenizer, log


def train_policy(
    profile: str | Profile = "cpu",
    arm: str = "grpo",
    seed: int = 0,
    reward: Callable[..., list[float]] | None = None,
    **overrides: Any,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame]:
    """Train (or load) one RL run from the profile's base policy.

    ``reward`` has TRL's signature (default: the one of the profile's ``rl_dataset``, exact
    Countdown verification on the testbed); ``overrides`` are ``PSNGRPOConfig`` settings.
    Returns the trained policy, its tokenizer, and the training log: one row per step with TRL's
    metrics (``reward``, ``entropy``, ...) and PSN's (``psn/sigma``, ``psn/kl_proxy``, ``tis/*``).
    """
    profile = get_profile(profile)
    reward = task_reward(profile.rl_dataset) if reward is None else reward
    path = run_dir(profile, arm, seed, overrides, reward.__qualname__)
    work = path.with_name(path.name + ".work")
    config = rl_config(profile, arm, seed, work, **overrides)  # validates before any work
    loaded = load_cached(path, _load_run, "cached run") if path.exists() else None
    if loaded is not None:
        return loaded
    model, tokenizer, _ = base_policy(profile)
    dataset = train_set(profile, arm, seed, **overrides)
    trainer, log = fit(config, model, tokenizer, dataset, reward)
    meta = {"profile": profile.name, "arm": arm, "seed": seed, "overrides": overrides, "log": log}
    save_policy(trainer.model, tokenizer, path, meta=meta)
    shutil.rmtree(work, ignore_errors=True)
    return trainer.model.eval(), tokenizer, pd.DataFrame(log)
