"""The policies of chosen steps of a run (a training path), kept beyond the checkpoints' rotation.

``KeepSteps`` keeps the policy of chosen steps: it has the trainer save a checkpoint at each, and
copies its policy (weights, config, tokenizer; no optimizer or RNG state, ``TRAINING_STATE``) to
``<into>/path/step-<N>`` (``path_step_dir``), atomically (``keep_policy``). ``check_keep_steps``
checks the steps asked for; ``has_kept`` and ``kept_policies`` find the kept policies; and
``prepare_kept``, before a run resumes, keeps what a kill left only in a checkpoint, or has the
run train from scratch where a kept step would otherwise be lost. The checkpoints themselves
(written atomically, resumed only when complete) are ``psnlib.trainer.checkpoints``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib.cache import Damaged
from psnlib.io import atomic_directory
from psnlib.models import check_saved_policy
from psnlib.trainer.checkpoints import (
    _CHECKPOINT,
    SCHEDULER_STATE,
    checkpoint_problem,
    last_checkpoint,
)

PATH_DIR = "path"  # in a run's work directory and its policy: the policies KeepSteps kept
# What a checkpoint holds beyond its policy: left out of a kept step.
TRAINING_STATE = (OPTIMIZER_NAME, SCHEDULER_NAME, "rng_state*.pth", TRAINER_STATE_NAME)
TRAINING_STATE += (SCHEDULER_STATE, "training_args.bin", "latest", "global_step*")

logger = logging.getLogger(__name__)


def path_step_dir(root: str | Path, step: int) -> Path:
    """Where the policy of ``step`` kept under ``root`` lies: ``<root>/path/step-<step>``."""
    return Path(root) / PATH_DIR / f"step-{step}"


def keep_policy(checkpoint: str | Path, destination: str | Path) -> Path:
    """Copy the policy of ``checkpoint`` (its files less ``TRAINING_STATE``) to ``destination``
    atomically (``psnlib.io.atomic_directory``: a kill leaves the old copy or the new, whole)."""
    with atomic_directory(destination) as tmp:
        ignore = shutil.ignore_patterns(*TRAINING_STATE)
        shutil.copytree(checkpoint, tmp, ignore=ignore, dirs_exist_ok=True)
    return Path(destination)


class KeepSteps(TrainerCallback):
    """Keep the policy at each of ``steps``: the trainer saves a checkpoint there (a save changes
    no weight or random stream), which the main process copies to ``path_step_dir(into, step)``
    (``keep_policy``) before the rotation of later saves can delete it."""

    def __init__(self, steps: tuple[int, ...], into: str | Path) -> None:
        self.steps, self.into = frozenset(steps), Path(into)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.global_step in self.steps:
            control.should_save = True
        return control

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.global_step in self.steps and state.is_world_process_zero:
            name = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            keep_policy(Path(args.output_dir, name), path_step_dir(self.into, state.global_step))
        return control


def check_keep_steps(steps: tuple[int, ...], max_steps: int) -> tuple[int, ...]:
    """``steps`` sorted, once each; a ``ValueError`` unless each is an integer in 1 ..
    ``max_steps - 1`` (the final policy is the run's own)."""
    if any(not isinstance(s, int) or isinstance(s, bool) or not 0 < s < max_steps for s in steps):
        raise ValueError(f"keep_steps must be integers in 1 .. {max_steps - 1}, got {steps!r}")
    return tuple(sorted(set(steps)))


def has_kept(root: str | Path, steps: tuple[int, ...]) -> bool:
    """Whether ``root`` holds a whole kept policy (``psnlib.models.check_saved_policy``) at every
    step of ``steps`` (``path_step_dir``)."""
    for step in steps:
        try:
            check_saved_policy(path_step_dir(root, step))
        except (Damaged, OSError):
            return False
    return True


def prepare_kept(output_dir: str | Path, steps: tuple[int, ...]) -> None:
    """Before training resumes in ``output_dir``: keep each step of ``steps`` that a checkpoint
    there holds and no kept copy does (a kill between the save and the copy); where a step is
    still missing that resuming would not train again (the newest complete checkpoint is at or
    past it), delete the checkpoints, with a warning, so the run trains from scratch."""
    output_dir = Path(output_dir)
    for step in steps:
        checkpoint = output_dir / f"{PREFIX_CHECKPOINT_DIR}-{step}"
        if not has_kept(output_dir, (step,)) and checkpoint_problem(checkpoint) is None:
            keep_policy(checkpoint, path_step_dir(output_dir, step))
    newest = last_checkpoint(output_dir)
    done = int(_CHECKPOINT.fullmatch(Path(newest).name).group(1)) if newest else 0
    lost = [s for s in steps if s <= done and not has_kept(output_dir, (s,))]
    if lost:
        logger.warning(
            "%s: no kept policy of steps %s, and resuming would not train them again: "
            "training the run from scratch",
            output_dir,
            lost,
        )
        for path in output_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
            shutil.rmtree(path)


def kept_policies(root: str | Path, steps: tuple[int, ...]) -> dict[int, Path]:
    """Step -> the policy kept under ``root`` at each of ``steps``; a ``RuntimeError`` naming the
    steps whose policy is missing or not whole."""
    lost = [step for step in steps if not has_kept(root, (step,))]
    if lost:
        raise RuntimeError(f"{root}: the policies of steps {lost} were not kept")
    return {step: path_step_dir(root, step) for step in steps}
