"""RL training runs (GRPO and PSN-GRPO arms) at a profile's scale, cached and resumable.

A run (``Run``) is one value: its profile, arm (``psnlib.replication.arms``), seed, every override
and its reward, with its settings, trainer config, training set, cache path (its run key) and
record as its methods (``rl_settings``, ``rl_config``, ``train_set`` and ``run_dir`` are the same
as functions of those four). ``train_run`` trains
one into a given directory, and both ``train_policy`` (into the cache) and ``python -m psnlib
train`` (into ``--output_dir``, ``psnlib.replication.cli``) call it. ``train_policy`` keeps a run's
final policy and training log in ``data/cache/runs/<profile>/<arm>-s<seed>-<hash>/``, written
atomically, so a finished run is loaded instead of retrained. While training, TRL checkpoints go
to a ``.work`` directory beside it and an interrupted run resumes from the last one. One process
at a time trains a run: it holds ``<work dir>.lock`` (``psnlib.io.exclusive``), and another
process that asks for the run meanwhile waits for it, then loads what it finished. A run asked
to keep the policies of some steps (``keep_steps``: its training path) keeps them in
``<run>/path/step-<N>/`` (``load_path_policy``); that is in no key, and a cached run that lacks
a step asked for is trained again, from scratch (``train_run``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import shutil
import types
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from accelerate import PartialState
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib.io import (
    Damaged,
    atomic_write_json,
    data_dir,
    exclusive,
    load_cached,
    replace_directory,
)
from psnlib.models import META_FILE, check_finite, load_saved_policy
from psnlib.replication.arms import GRPO, Arm, rl_arm
from psnlib.replication.prefixes import PREFIX_SOURCES, prefix_train_set
from psnlib.replication.pretrain import base_policy, policy_meta, spec_hash
from psnlib.replication.profiles import Profile, get_profile
from psnlib.tasks.datasets import COUNTDOWN, task_reward, train_problems
from psnlib.tasks.math_reward import math_reward
from psnlib.tasks.reward import countdown_dense_reward, countdown_reward
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.trainer.checkpoints import (
    PATH_DIR,
    KeepSteps,
    check_keep_steps,
    has_kept,
    kept_policies,
    path_step_dir,
    prepare_kept,
    resume_training,
)
from psnlib.weak_prefix import TRUNCATIONS

# How the training set's `weak_prefix` column is made
# (psnlib.replication.prefixes.prefix_train_set): run settings beside the PSNGRPOConfig ones,
# present when prefix_prob > 0.
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


def train_set(profile: Profile, arm: Arm | str, seed: int, **overrides: Any) -> Dataset:
    """``Run(profile, arm, seed, overrides).train_set()``."""
    return Run(profile, arm, seed, overrides).train_set()


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

    def train_set(self) -> Dataset:
        """Its training problems (the profile's ``rl_dataset``), with weak prefixes if it uses
        them."""
        settings, profile = self.settings(), self.profile
        if settings.get("prefix_prob", 0.0) > 0:
            return prefix_train_set(
                profile,
                self.seed,
                truncation=settings["prefix_truncation"],
                source=settings["prefix_source"],
            )
        return train_problems(profile.rl_dataset, profile.rl_train_problems, seed=self.seed)

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


def fit(
    config: PSNGRPOConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    reward: Callable[..., list[float]],
    callbacks: list[TrainerCallback] | None = None,
) -> tuple[PSNGRPOTrainer, list[dict[str, Any]]]:
    """Train ``model`` with ``PSNGRPOTrainer`` and ``callbacks``, resuming from the newest complete
    checkpoint in ``config.output_dir`` if there is one (``psnlib.trainer.checkpoints.
    resume_training``: an older one when it fails to load; one at ``max_steps`` is loaded, not
    trained on). Returns the trainer and the training log (one row per step)."""
    trainer = resume_training(
        lambda: PSNGRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=callbacks,
        ),
        config.output_dir,
        config.max_steps,
    )
    return trainer, [row for row in trainer.state.log_history if "reward" in row]


def save_run(
    trainer: PSNGRPOTrainer,
    policy: Path,
    meta: dict[str, Any],
    processes: PartialState,
    kept: dict[int, Path] | None = None,
) -> None:
    """Save the trained policy, its tokenizer and ``meta`` (``META_FILE``) to ``policy``
    atomically, with the policies ``kept`` along the way (step -> directory) in its
    ``path/step-<N>``: written to ``.<name>.saving`` beside it, then renamed. Every process calls it
    (``Trainer.save_model`` gathers a sharded model's weights) and the main one writes. A policy
    with a non-finite weight is refused (``ValueError``) and nothing is written."""
    check_finite(trainer.model, f"refusing to save the policy {policy}")
    aside = policy.with_name(f".{policy.name}.saving")
    if processes.is_main_process:
        shutil.rmtree(aside, ignore_errors=True)  # left by a save that was killed
    processes.wait_for_everyone()
    trainer.save_model(str(aside))
    if processes.is_main_process:
        atomic_write_json(aside / META_FILE, meta)
        for step, source in (kept or {}).items():
            shutil.copytree(source, path_step_dir(aside, step))
        replace_directory(aside, policy)  # a kill leaves the old policy or the new, whole
    processes.wait_for_everyone()


def _run_log(path: Path) -> list[dict[str, Any]]:
    """The training log in a finished run's meta; ``Damaged`` if the meta is not whole."""
    meta, file = policy_meta(path), path / META_FILE
    missing = [key for key in RUN_META_KEYS if key not in meta]
    if missing:
        raise Damaged(f"{file} lacks {missing}")
    log = meta["log"]
    if not isinstance(log, list) or not log or not all(isinstance(row, dict) for row in log):
        raise Damaged(f"{file}: its log is not a non-empty list of step records")
    return log


def _load_run(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame]:
    """A finished run's policy and log; ``Damaged`` if its files or its record are not whole."""
    log = _run_log(path)
    model, tokenizer = load_saved_policy(path)
    return model.eval(), tokenizer, pd.DataFrame(log)


def load_path_policy(policy: Path, step: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy that the run at ``policy`` kept at step ``step`` (``train_run``'s
    ``keep_steps``: in ``<policy>/path/step-<step>``), and its tokenizer."""
    model, tokenizer = load_saved_policy(path_step_dir(policy, step))
    return model.eval(), tokenizer


def _cached_run(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame] | None:
    """The finished run cached at ``path``, or None (a damaged entry is removed)."""
    return load_cached(path, _load_run, "cached run") if path.exists() else None


def train_run(
    run: Run,
    config: PSNGRPOConfig,
    policy: Path,
    *,
    wait: bool = False,
    fresh: bool = False,
    keep_checkpoints: bool = True,
    threads: int | None = None,
    keep_steps: tuple[int, ...] = (),
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame] | None:
    """Train ``run`` with ``config`` (``run.config``), its checkpoints in ``config.output_dir``
    (the work directory), into the directory ``policy``; the one code path of a run.

    The main process holds the work directory's lock (``psnlib.io.exclusive``) throughout: another
    process training into it makes this one wait (``wait``) or raise ``psnlib.io.Busy``, naming
    it, before anything is loaded. ``fresh`` first deletes the policy and the checkpoints there.
    A ``policy`` that holds the finished run (its meta whole) is left as it is, and None is
    returned, unless it lacks a policy of ``keep_steps`` (``has_kept``): then it is trained again
    (the same run, the same weights); a damaged one is removed with a warning. Else the run's
    record (``Run.record``) is written to ``<work>/RUN_FILE`` once the base policy and the
    training set are loaded, right before training, which resumes from the last complete
    checkpoint (``fit``) on ``threads`` torch threads (default: the caller's, which are restored
    after). ``save_run`` saves the policy (refused if a weight is non-finite) with its meta: the
    record and ``log``, one row per step, and the policies of ``keep_steps`` (each saved at its
    step by a checkpoint, copied aside at once: ``psnlib.trainer.checkpoints.KeepSteps``; saving
    changes no weight) in its ``path/step-<N>``. ``keep_checkpoints=False`` then deletes the work
    directory. Under ``accelerate launch`` every process calls it and only the main one writes.
    Returns the trained policy, its tokenizer and the log."""
    work, processes = Path(config.output_dir), PartialState()
    keep_steps = check_keep_steps(keep_steps, config.max_steps)
    what = f"training the run {run.profile.name} {run.arm.name} seed {run.seed} in {work}"
    with exclusive(work, what, wait=wait) if processes.is_main_process else nullcontext():
        if fresh and processes.is_main_process:
            for path in [policy, *work.glob(f"{PREFIX_CHECKPOINT_DIR}-*"), work / PATH_DIR]:
                if path.exists():  # an interrupted run has checkpoints and no policy yet
                    shutil.rmtree(path)
        processes.wait_for_everyone()
        finished = policy.exists() and load_cached(policy, _run_log, "trained run") is not None
        if finished and has_kept(policy, keep_steps):
            return None
        if keep_steps and processes.is_main_process:  # what the checkpoints cannot train again
            prepare_kept(work, keep_steps)
        processes.wait_for_everyone()
        model, tokenizer, _ = base_policy(run.profile)
        dataset = run.train_set()
        if processes.is_main_process:
            atomic_write_json(work / RUN_FILE, run.record())
        caller_threads = torch.get_num_threads()
        torch.set_num_threads(threads or caller_threads)
        try:
            keep = {"callbacks": [KeepSteps(keep_steps, work)]} if keep_steps else {}
            trainer, log = fit(config, model, tokenizer, dataset, run.reward, **keep)
        finally:
            torch.set_num_threads(caller_threads)
        kept = kept_policies(work, keep_steps) if processes.is_main_process else {}
        save_run(trainer, policy, {**run.record(), "log": log}, processes, kept)
        if not keep_checkpoints and processes.is_main_process:
            shutil.rmtree(work, ignore_errors=True)
    return trainer.model.eval(), tokenizer, pd.DataFrame(log)


def train_policy(
    profile: str | Profile = "cpu",
    arm: Arm | str = GRPO,
    seed: int = 0,
    reward: Callable[..., list[float]] | None = None,
    reward_id: str | None = None,
    threads: int = 1,
    keep_steps: tuple[int, ...] = (),
    **overrides: Any,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame]:
    """Train (or load) one RL run from the profile's base policy, cached (``run_dir``).

    ``reward`` has TRL's signature (default: the one of the profile's ``rl_dataset``, exact
    Countdown verification on the testbed); ``reward_id`` names it in the run's cache key, which
    a reward that is not a plain function needs (``reward_key``). The run trains on ``threads``
    torch threads, a part of its key (the caller's setting is restored after). ``overrides`` are
    ``PSNGRPOConfig`` settings; ``keep_steps``, the steps whose policies the run keeps
    (``load_path_policy``), are not in its key, and a cached run that lacks one is trained again.
    Returns the trained policy, its tokenizer, and the training log: one row per step with TRL's
    metrics (``reward``, ``entropy``, ...) and PSN's (``psn/sigma``, ``psn/kl_proxy``,
    ``tis/*``). A process that asks for a run that another one is training waits for it, then
    loads its result (``train_run``).
    """
    profile = get_profile(profile)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    run = Run(profile, arm, seed, overrides, reward)
    path = run.path(reward_id, threads)
    config = run.config(path.with_name(path.name + ".work"))  # validates before any work
    keep_steps = check_keep_steps(keep_steps, config.max_steps)
    loaded = _cached_run(path)
    if loaded is None or not has_kept(path, keep_steps):
        how = {"keep_checkpoints": False, "threads": threads, "keep_steps": keep_steps}
        loaded = train_run(run, config, path, wait=True, **how)
    # None: the lock's last owner finished the run while this process waited for it
    return _load_run(path) if loaded is None else loaded
