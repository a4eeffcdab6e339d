"""An RL run's identity (``Run``): its profile, arm, seed, overrides and reward, with its resolved
``PSNGRPOConfig`` settings, trainer config, cache directory and run key (``reward_key``,
``run_dir``) and what its record says it is. Training one is ``psnlib.replication.compute.runs``'
(``train_policy``, ``train_run``); its training problems are ``compute.runs.run_problems``."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from psnlib.paths import data_dir
from psnlib.replication.plan.arms import Arm, rl_arm
from psnlib.replication.plan.policies import spec_hash
from psnlib.replication.plan.profiles import Profile
from psnlib.tasks.datasets import COUNTDOWN, task_reward
from psnlib.tasks.math_reward import math_reward
from psnlib.tasks.reward import countdown_dense_reward, countdown_reward
from psnlib.trainer import PSNGRPOConfig
from psnlib.weak_prefix import TRUNCATIONS

PREFIX_SOURCES = ("weak", "same_family")


# How the training set's `weak_prefix` column is made
# (psnlib.replication.compute.prefixes.prefix_train_set): run settings beside the PSNGRPOConfig
# ones, present when prefix_prob > 0.
PREFIX_SETTINGS = {"prefix_truncation": "entropy", "prefix_source": "weak"}


# 3: the loss forward by length groups, the decoder's einsum attention (issue 18): new rounding
CACHE_VERSION = 3


KEEP_CHECKPOINTS = 2  # save_total_limit of a run: the newest complete checkpoint is always kept


# The rewards of psnlib.tasks (task_reward's): keyed by their names, as every cached run is.
BUILTIN_REWARDS = (countdown_reward, countdown_dense_reward, math_reward)


# What a finished run's meta must hold to be loaded: every run saved so far (train_policy's cache
# before issue 30 held these and no more) and the fields of ``Run.record`` added since.
RUN_META_KEYS = ("profile", "arm", "seed", "overrides", "log")


RUN_FILE = "psnlib_run.json"  # in a run's work directory: its record, written as training starts


def rl_settings(profile: Profile, arm: Arm | str, seed: int, **overrides: Any) -> dict[str, Any]:
    """``Run(profile, arm, seed, overrides).settings()``."""
    return Run(profile, arm, seed, overrides).settings()


def rl_config(
    profile: Profile, arm: Arm | str, seed: int, output_dir: str | Path, **overrides: Any
) -> PSNGRPOConfig:
    """``Run(profile, arm, seed, overrides).config(output_dir)``."""
    return Run(profile, arm, seed, overrides).config(output_dir)


def reward_key(reward: Callable[..., list[float]], reward_id: str | None = None) -> str:
    """What stands for a run's reward in its cache key.

    A built-in reward (``BUILTIN_REWARDS``) is its name, the key of every run cached so far;
    ``reward_id``, if given, is ``id:<reward_id>``, the caller vouching that it changes whenever
    the reward does. Any other plain function is its module-qualified name and a hash of its
    source, its defaults and the values its closure holds, so two different lambdas, or a
    function named like a built-in reward, get keys of their own. The globals it reads are not
    in the key: a reward that reads mutable ones needs ``reward_id``, and so does one whose
    source cannot identify it (a builtin, a callable object, a ``functools.partial``, a lambda
    typed at a prompt or sharing its lines with another lambda, a closure value whose ``repr``
    holds a memory address). Raises ``ValueError`` for those."""
    if reward_id is not None:
        if not isinstance(reward_id, str) or not reward_id.strip():
            raise ValueError(f"reward_id must be a non-empty string, got {reward_id!r}")
        return f"id:{reward_id}"
    if any(reward is builtin for builtin in BUILTIN_REWARDS):
        return reward.__qualname__
    name = f"{getattr(reward, '__module__', None)}.{getattr(reward, '__qualname__', reward)}"
    need_id = f"the reward {name} cannot be keyed by its source"
    if not isinstance(reward, types.FunctionType):
        raise ValueError(f"{need_id}: it is a {type(reward).__name__}; pass reward_id='...'")
    try:
        source = inspect.getsource(reward)
    except (OSError, TypeError) as err:
        raise ValueError(f"{need_id} ({err}); pass reward_id='...'") from err
    if reward.__name__ == "<lambda>" and len(re.findall(r"\blambda\b", source)) > 1:
        raise ValueError(f"{need_id}: its lines hold other lambdas; pass reward_id='...'")
    cells = [cell.cell_contents for cell in reward.__closure__ or ()]
    values = repr((reward.__defaults__, reward.__kwdefaults__, cells))
    if re.search(r" at 0x[0-9a-fA-F]+", values):
        raise ValueError(f"{need_id}: its defaults or closure hold {values}; pass reward_id='...'")
    digest = hashlib.sha256(f"{source}\n{values}".encode()).hexdigest()[:12]
    return f"{name}:{digest}"


def run_dir(
    profile: Profile,
    arm: Arm | str,
    seed: int,
    overrides: dict[str, Any],
    reward: str,
    threads: int = 1,
) -> Path:
    """Cache directory of a run whose reward's key is ``reward`` (``reward_key``):
    ``Run.path``."""
    return Run(profile, arm, seed, overrides).directory(reward, threads)


@dataclass
class Run:
    """One RL run, the one value that says what it is: the profile (its base policy and training
    set), the arm (an ``Arm``, or its name, turned into the arm here), the seed, the
    ``PSNGRPOConfig`` settings given on top of them, and the reward (default: the one of the
    profile's ``rl_dataset``, ``psnlib.tasks.task_reward``). Its settings, trainer config,
    training set, cache path (its key) and record are its methods."""

    profile: Profile
    arm: Arm
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict)
    reward: Callable[..., list[float]] | None = None

    def __post_init__(self) -> None:
        self.arm = rl_arm(self.arm)
        if self.reward is None:
            self.reward = task_reward(self.profile.rl_dataset)

    def settings(self) -> dict[str, Any]:
        """Its ``PSNGRPOConfig`` settings, without its output directory: the profile's sizes and
        recipe, then the arm's, then the profile's for this arm, then the run's overrides."""
        profile = self.profile
        G = profile.num_generations
        settings: dict[str, Any] = {
            "max_steps": profile.rl_steps,
            "per_device_train_batch_size": profile.rl_prompts_per_step * G,  # a step, a batch
            "num_generations": G,
            "max_completion_length": profile.max_completion_length,
            "learning_rate": profile.learning_rate,
            "sigma": profile.psn_sigma,
            "noise_scope": profile.psn_scope,
            "tis_cap": profile.tis_cap,
            "passk_k": profile.passk_k,
            "seed": self.seed,
            "logging_steps": 1,
            "save_strategy": "steps",
            "save_steps": max(1, profile.rl_steps // 5),
            "report_to": "none",
            "use_cpu": not torch.cuda.is_available(),
            "bf16": False,
        }
        recipe, for_arm = dict(profile.rl_settings), dict(profile.arm_settings).get(self.arm, ())
        settings = {**settings, **recipe, **self.arm.settings, **dict(for_arm), **self.overrides}
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

    def config(self, output_dir: str | Path) -> PSNGRPOConfig:
        """Its ``PSNGRPOConfig`` (``settings`` but the prefix settings), writing to
        ``output_dir``; the settings that change no result (gradient checkpointing, how many
        checkpoints are kept) are added here, outside its cache key."""
        settings = self.settings()
        for name in PREFIX_SETTINGS:
            settings.pop(name, None)
        speed = {
            "activation_checkpointing": self.profile.gradient_checkpointing,
            "save_total_limit": KEEP_CHECKPOINTS,
        }
        return PSNGRPOConfig(output_dir=str(output_dir), **{**speed, **settings})

    def path(self, reward_id: str | None = None, threads: int = 1) -> Path:
        """Its cache directory (``directory``), its reward keyed by ``reward_key``."""
        return self.directory(reward_key(self.reward, reward_id), threads)

    def key(self, reward_id: str | None = None, threads: int = 1) -> str:
        """Its run key: the name of its cache directory and of its ledger record."""
        return self.path(reward_id, threads).name

    def directory(self, reward: str, threads: int = 1) -> Path:
        """Its cache directory when its reward's key is ``reward``:
        ``data/cache/runs/<profile>/<arm>-s<seed>-<hash>``. The hash covers what determines the
        trained policy (the base policy, the training problems, the reward's key, every resolved
        trainer setting and the torch thread count) and nothing else: a change to the profile's
        evaluation sizes still finds the same run, and so does an override to the value that
        the profile and arm already give."""
        profile = self.profile
        data = {} if profile.rl_dataset == COUNTDOWN else {"dataset": profile.rl_dataset}
        # RL's rounding depends on the thread count (5e-7 apart at 1 and 2 threads). Every cached
        # run was trained at 1: a make reproduce worker, the tests (tests/conftest.py's
        # one_thread) and train_policy's default. So 1 is left out of the key, and those runs
        # keep their keys.
        threads_key = {} if threads == 1 else {"threads": threads}
        blob = json.dumps(
            {
                "settings": self.settings(),
                "base": spec_hash(profile.base),
                "problems": profile.rl_train_problems,
                "reward": reward,
                "v": CACHE_VERSION,
                **data,  # absent for the testbed, whose runs keep their keys
                **threads_key,
            },
            sort_keys=True,
            default=str,
        )
        key = hashlib.sha256(blob.encode()).hexdigest()[:12]
        return data_dir() / "cache" / "runs" / profile.name / f"{self.arm.name}-s{self.seed}-{key}"

    def record(self) -> dict[str, Any]:
        """What the run is, as its ``RUN_FILE`` and its policy's meta record it: ``profile`` (the
        name), ``arm`` (the name), ``seed``, ``overrides`` (the settings given), ``base`` (the
        base policy: a directory or hub id, else ``<family>-<size>-<spec hash>``), ``dataset``
        (the training set) and ``settings`` (every resolved trainer setting)."""
        base = self.profile.base
        return {
            "profile": self.profile.name,
            "arm": self.arm.name,
            "seed": self.seed,
            "overrides": self.overrides,
            "base": base.name_or_path or f"{base.family}-{base.size}-{spec_hash(base)}",
            "dataset": self.profile.rl_dataset,
            "settings": self.settings(),
        }
