"""Checkpoints that a kill never leaves half-written, with the sigma scheduler's state; resume
only from a complete one.

``transformers.Trainer`` writes ``checkpoint-N`` in place: a run killed mid-save leaves a
directory that looks like a checkpoint and is not. ``StagedCheckpoints`` writes each checkpoint
under ``<output_dir>/.staging``, adds the sigma scheduler's state last (``SCHEDULER_STATE``),
renames it into place, then rotates old ones; on resume it restores the scheduler's state with the
optimizer's. A save that fails (a full disk) is an ``OSError`` naming the checkpoint, and leaves no
staging directory.

``Trainer`` resumes from whatever a checkpoint holds: without ``optimizer.pt``, ``scheduler.pt``
or the RNG state it silently starts a fresh optimizer and schedule. Here a checkpoint resumes a run
only when complete (``checkpoint_problem``: every file a resume reads is present and parses, checked
cheaply); ``complete_checkpoints`` lists those newest first, with a warning naming each one skipped
and why, and ``resume_training`` falls back to the next older one when loading one still fails.
DeepSpeed checkpoints (a ``global_stepN`` directory named by ``latest``) hold the weights,
optimizer and schedule there; FSDP's layout is not recognised (never complete).

``KeepSteps``, which keeps the policy of chosen steps beyond the checkpoints' rotation, is in
``psnlib.trainer.kept_steps``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pickle
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from torch import nn
from transformers import Trainer, TrainerState
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints
from transformers.utils import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from psnlib.io import atomic_write_json, shareable
from psnlib.models import safetensors_extent

SCHEDULER_STATE = "sigma_scheduler.json"  # in each checkpoint directory, written last
STAGING = ".staging"  # beside the checkpoints: where one is written before it is renamed
LOW_SPACE = 64 * 2**20  # free bytes below which a failed save is put down to a full disk
# What loading a damaged file raises (torch.load, safetensors, json); not KeyboardInterrupt.
LOAD_ERRORS = (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError, SafetensorError)
_CHECKPOINT = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")

logger = logging.getLogger(__name__)


class CheckpointError(OSError):
    """A checkpoint that looked complete failed to load."""


def _json_problem(path: Path) -> str | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        return f"{path.name} does not parse ({err})"
    return None if isinstance(data, dict) else f"{path.name} holds no JSON object"


def _zip_problem(path: Path) -> str | None:
    """A torch ``.pt`` file (a zip archive) whose directory is missing (truncated) or names
    records beyond its end."""
    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (OSError, zipfile.BadZipFile) as err:
        return f"{path.name} is damaged ({err})"
    if not records or any(r.header_offset + r.compress_size > size for r in records):
        return f"{path.name} is damaged (records beyond its {size} bytes)"
    return None


def _safetensors_problem(path: Path) -> str | None:
    """A safetensors file whose header does not parse or whose tensors end elsewhere than the
    file (``psnlib.models.safetensors_extent``)."""
    try:
        size, expected = safetensors_extent(path)
    except (OSError, ValueError) as err:
        return f"{path.name} is damaged ({type(err).__name__}: {err})"
    if expected is None:
        return f"{path.name} is damaged (its {size} bytes are shorter than its header)"
    if size != expected:
        return f"{path.name} is damaged (its header says {expected} bytes, the file has {size})"
    return None


def _file_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"{path.name} is missing"
    if path.suffix == ".json":
        return _json_problem(path)
    return _safetensors_problem(path) if path.suffix == ".safetensors" else _zip_problem(path)


def _weights_problem(checkpoint: Path) -> str | None:
    """The model weights: one file, or an index and every shard it names."""
    for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME):
        if (checkpoint / name).exists():
            return _file_problem(checkpoint / name)
    for name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME):
        index = checkpoint / name
        if index.exists():
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                return f"{name} does not parse ({err})"
            problems = (_file_problem(checkpoint / shard) for shard in shards)
            return next((p for p in problems if p is not None), None)
    return f"the model weights ({SAFE_WEIGHTS_NAME} or {WEIGHTS_NAME}) are missing"


def _deepspeed_problem(checkpoint: Path) -> str | None:
    """DeepSpeed's weights, optimizer and schedule: the ``global_stepN`` that ``latest`` names."""
    try:
        tag = (checkpoint / "latest").read_text().strip()
    except OSError:
        return "DeepSpeed's 'latest' file is missing"
    states = checkpoint / tag
    if not states.is_dir() or not any(states.iterdir()):
        return f"DeepSpeed's state directory {tag!r} is missing or empty"
    return None


def checkpoint_problem(checkpoint: str | Path) -> str | None:
    """Why ``checkpoint`` cannot resume a run, or None when it is complete: the model weights,
    ``optimizer.pt``, ``scheduler.pt`` (or DeepSpeed's state directory), the RNG state
    (``rng_state.pth``, or one ``rng_state_<process>.pth`` per process), ``trainer_state.json``
    and the sigma scheduler's state are present, and each parses (a JSON file loads, a
    safetensors header matches its file's size, a ``.pt`` file's zip directory is whole)."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        return "it is not a directory"
    rng = sorted(checkpoint.glob("rng_state*.pth"))
    if not rng:
        return "rng_state.pth is missing"
    if (checkpoint / "latest").exists() or any(checkpoint.glob("global_step*")):
        parts = [_deepspeed_problem(checkpoint)]
        files = [*rng, checkpoint / TRAINER_STATE_NAME, checkpoint / SCHEDULER_STATE]
    else:
        parts = [_weights_problem(checkpoint)]
        files = [checkpoint / OPTIMIZER_NAME, checkpoint / SCHEDULER_NAME, *rng]
        files += [checkpoint / TRAINER_STATE_NAME, checkpoint / SCHEDULER_STATE]
    problems = (*parts, *(_file_problem(f) for f in files))
    return next((p for p in problems if p is not None), None)


def complete_checkpoints(output_dir: str | Path) -> list[str]:
    """The complete ``checkpoint-N`` directories of ``output_dir``, newest first; each one
    skipped is named in a warning, with why, and the newest complete one."""
    found = [
        (int(m.group(1)), p)
        for p in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")
        if (m := _CHECKPOINT.fullmatch(p.name))
    ]
    complete, skipped = [], []
    for _, path in sorted(found, reverse=True):
        problem = checkpoint_problem(path)
        if problem is None:
            complete.append(str(path))
        else:
            skipped.append((path, problem))
    newest = complete[0] if complete else "none (the run starts from step 0)"
    for path, problem in skipped:
        logger.warning(
            "skipping checkpoint %s: %s; the newest complete checkpoint is %s",
            path,
            problem,
            newest,
        )
    return complete


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint in ``output_dir`` (``complete_checkpoints``), or None."""
    complete = complete_checkpoints(output_dir)
    return complete[0] if complete else None


def resume_training(
    make_trainer: Callable[[], Trainer], output_dir: str, max_steps: int
) -> Trainer:
    """Train a trainer from ``make_trainer``, resuming from the newest complete checkpoint in
    ``output_dir``; a checkpoint at ``max_steps`` is loaded, not trained on (``Trainer`` would take
    one more step). When loading a checkpoint fails (``CheckpointError``: a damaged file that
    parsed), a fresh trainer resumes from the next older complete one, with a warning; when none
    is left the error stands, as the failed load may have changed the model's weights."""
    trainer = make_trainer()
    checkpoints = complete_checkpoints(output_dir)
    for older, resume in enumerate(checkpoints, start=1):
        try:
            with _reading(resume):
                state = TrainerState.load_from_json(os.path.join(resume, TRAINER_STATE_NAME))
            if state.global_step < max_steps:
                trainer.train(resume_from_checkpoint=resume)
                return trainer
            trainer._load_from_checkpoint(resume)
            trainer.state = state
            return trainer
        except CheckpointError as err:
            if older == len(checkpoints):
                raise
            logger.warning("%s; resuming from %s instead", err, checkpoints[older])
            trainer = make_trainer()
    trainer.train()
    return trainer


@contextmanager
def _reading(checkpoint: str) -> Iterator[None]:
    """Raise what loading ``checkpoint`` raises as a one-line ``CheckpointError`` naming it."""
    try:
        yield
    except LOAD_ERRORS as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"checkpoint {checkpoint} failed to load ({type(err).__name__}: {reason})"
        ) from err


class StagedCheckpoints:
    """Mixin for a ``transformers.Trainer`` with a sigma scheduler (``self.scheduler``, with
    ``state_dict`` and ``load_state_dict``): atomic checkpoints that carry its state, resumed only
    when complete."""

    _staging = False  # while a checkpoint is written: _get_output_dir points at STAGING

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        """``Trainer.train``; ``resume_from_checkpoint=True`` takes the newest complete checkpoint
        (``last_checkpoint``), and a checkpoint that is not complete is refused."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"no complete checkpoint to resume in {self.args.output_dir}")
        elif resume_from_checkpoint:
            problem = checkpoint_problem(resume_from_checkpoint)
            if problem is not None:
                raise ValueError(f"cannot resume from {resume_from_checkpoint}: {problem}")
        return super().train(resume_from_checkpoint=resume_from_checkpoint or None, **kwargs)

    def _get_output_dir(self, trial: Any) -> str:
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING) if self._staging else run_dir

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        """Write the checkpoint aside (``<output_dir>/.staging/checkpoint-N``, with the sigma
        scheduler's state), rename it into place, then keep the newest ``save_total_limit``: a
        kill at any moment leaves every ``checkpoint-N`` complete and the newest one usable. A
        failed write raises an ``OSError`` naming the checkpoint (and a full disk)."""
        run_dir = super()._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging, final = os.path.join(run_dir, STAGING), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # what a killed save left
        self.accelerator.wait_for_everyone()
        self._staging = True
        try:
            super()._save_checkpoint(model, trial)  # every process writes its part
            if self.args.should_save:
                atomic_write_json(Path(staging, name, SCHEDULER_STATE), self.scheduler.state_dict())
        except (OSError, RuntimeError) as err:
            raise _save_error(err, final, staging) from err
        finally:
            self._staging = False
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            if os.path.exists(final):  # a step saved again after resuming from an older one
                shutil.rmtree(final)
            shareable(os.path.join(staging, name))  # safetensors writes 0600
            os.replace(os.path.join(staging, name), final)
            shutil.rmtree(staging)
            best = self.state.best_model_checkpoint  # named inside STAGING by the save
            if best is not None and best.startswith(staging):
                self.state.best_model_checkpoint = run_dir + best[len(staging) :]
            rotate_checkpoints(
                run_dir, self.args.save_total_limit, self.state.best_model_checkpoint
            )
        self.accelerator.wait_for_everyone()

    def _load_from_checkpoint(self, checkpoint: str, model: nn.Module | None = None) -> None:
        with _reading(checkpoint):
            super()._load_from_checkpoint(checkpoint, model)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        with _reading(checkpoint):
            super()._load_rng_state(checkpoint)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        with _reading(checkpoint):
            super()._load_optimizer_and_scheduler(checkpoint)
            if checkpoint is not None:
                with open(os.path.join(checkpoint, SCHEDULER_STATE)) as f:
                    self.scheduler.load_state_dict(json.load(f))


def _save_error(err: BaseException, checkpoint: str, staging: str) -> OSError:
    """The ``OSError`` of a failed checkpoint write, once its staging directory is removed: it
    names the checkpoint, and a full disk (ENOSPC, or under ``LOW_SPACE`` bytes free), which
    torch reports only as ``inline_container.cc: unexpected pos``."""
    try:
        free = shutil.disk_usage(os.path.dirname(staging)).free  # before the partial files go
    except OSError:
        free = None
    shutil.rmtree(staging, ignore_errors=True)
    full = getattr(err, "errno", None) == errno.ENOSPC or (free is not None and free < LOW_SPACE)
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if full:
        return OSError(
            errno.ENOSPC,
            f"no space left on device: checkpoint {checkpoint} could not be written "
            f"({free} bytes free; {type(err).__name__}: {reason}); free disk space and resume",
        )
    return OSError(f"checkpoint {checkpoint} could not be written ({type(err).__name__}: {reason})")
