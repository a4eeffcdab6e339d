"""RL training runs (GRPO and PSN-GRPO arms) at a profile's scale, cached and resumable.

A run (``Run``) is one value: its profile, arm (``psnlib.replication.plan.arms``), seed, every
override and its reward, with its settings, trainer config, training set, cache path (its run key)
and record as its methods (``rl_settings``, ``rl_config``, ``train_set`` and ``run_dir`` are the
same as functions of those four). ``train_run`` trains one into a given directory, and both
``train_policy`` (into the cache) and ``python -m psnlib train`` (into ``--output_dir``,
``psnlib.replication.compute.cli``) call it. ``train_policy`` keeps a run's final policy and
training log in ``data/cache/runs/<profile>/<arm>-s<seed>-<hash>/``, written atomically, so a
finished run is loaded instead of retrained. While training, TRL checkpoints go to a ``.work``
directory beside it and an interrupted run resumes from the last one. One process at a time trains a
run: it holds ``<work dir>.lock`` (``psnlib.locks.exclusive``), and another process that asks for
the run meanwhile waits for it, then loads what it finished. A run asked to keep the policies of
some steps (``keep_steps``: its training path) keeps them in ``<run>/path/step-<N>/``
(``load_path_policy``); that is in no key, and a cached run that lacks a step asked for is trained
again, from scratch (``train_run``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from accelerate import PartialState
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib.cache import Damaged, load_cached
from psnlib.io import atomic_write_json, replace_directory
from psnlib.locks import exclusive
from psnlib.models import META_FILE, check_finite, load_saved_policy
from psnlib.replication.compute.prefixes import prefix_train_set
from psnlib.replication.compute.pretrain import base_policy, policy_meta
from psnlib.replication.plan.arms import BASE, GRPO, Arm
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.plan.runs import RUN_FILE, RUN_META_KEYS, Run
from psnlib.replication.plan.variants import Variant
from psnlib.tasks.datasets import train_problems
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.trainer.checkpoints import resume_training
from psnlib.trainer.kept_steps import (
    PATH_DIR,
    KeepSteps,
    check_keep_steps,
    has_kept,
    kept_policies,
    path_step_dir,
    prepare_kept,
)


def train_set(profile: Profile, arm: Arm | str, seed: int, **overrides: Any) -> Dataset:
    """``run_problems(Run(profile, arm, seed, overrides))``."""
    return run_problems(Run(profile, arm, seed, overrides))


def run_problems(run: Run) -> Dataset:
    """A run's training problems (its profile's ``rl_dataset``), with weak prefixes if it uses
    them."""
    settings, profile = run.settings(), run.profile
    if settings.get("prefix_prob", 0.0) > 0:
        return prefix_train_set(
            profile,
            run.seed,
            truncation=settings["prefix_truncation"],
            source=settings["prefix_source"],
        )
    return train_problems(profile.rl_dataset, profile.rl_train_problems, seed=run.seed)


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

    The main process holds the work directory's lock (``psnlib.locks.exclusive``) throughout:
    another process training into it makes this one wait (``wait``) or raise
    ``psnlib.locks.Busy``, naming it, before anything is loaded. ``fresh`` first deletes the
    policy and the checkpoints there.
    A ``policy`` that holds the finished run (its meta whole) is left as it is, and None is
    returned, unless it lacks a policy of ``keep_steps`` (``has_kept``): then it is trained again
    (the same run, the same weights); a damaged one is removed with a warning. Else the run's
    record (``Run.record``) is written to ``<work>/RUN_FILE`` once the base policy and the
    training set are loaded, right before training, which resumes from the last complete
    checkpoint (``fit``) on ``threads`` torch threads (default: the caller's, which are restored
    after). ``save_run`` saves the policy (refused if a weight is non-finite) with its meta: the
    record and ``log``, one row per step, and the policies of ``keep_steps`` (each saved at its
    step by a checkpoint, copied aside at once: ``psnlib.trainer.kept_steps.KeepSteps``; saving
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
        dataset = run_problems(run)
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


def load_variant(
    profile: Profile, variant: Variant, seed: int, keep_steps: tuple[int, ...] = ()
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, pd.DataFrame]:
    """The variant's policy at ``seed`` (trained now if not cached, keeping the policies of
    ``keep_steps``: ``psnlib.replication.compute.runs.train_policy``), its tokenizer and training
    log (empty for the base policy)."""
    profile = variant.profile(profile)
    if variant.arm == BASE:
        model, tokenizer, _ = base_policy(profile)
        return model, tokenizer, pd.DataFrame()
    return train_policy(profile, variant.arm, seed, keep_steps=keep_steps, **variant.settings)
