"""Checkpoints that a kill never leaves half-written, with the sigma scheduler's state.

``transformers.Trainer`` writes ``checkpoint-N`` in place: a run killed mid-save leaves a
directory that looks like a checkpoint and is not. ``StagedCheckpoints`` writes each checkpoint
under ``<output_dir>/.staging``, adds the sigma scheduler's state last (``SCHEDULER_STATE``: a
checkpoint holding it is complete), renames it into place, then rotates old ones; on resume it
restores the scheduler's state with the optimizer's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from torch import nn
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from psnlib.io import atomic_write_json

SCHEDULER_STATE = "sigma_scheduler.json"  # in each checkpoint directory, written last
STAGING = ".staging"  # beside the checkpoints: where one is written before it is renamed


class StagedCheckpoints:
    """Mixin for a ``transformers.Trainer`` with a sigma scheduler (``self.scheduler``, with
    ``state_dict`` and ``load_state_dict``): atomic checkpoints that carry its state."""

    _staging = False  # while a checkpoint is written: _get_output_dir points at STAGING

    def _get_output_dir(self, trial: Any) -> str:
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING) if self._staging else run_dir

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        """Write the checkpoint aside (``<output_dir>/.staging/checkpoint-N``, with the sigma
        scheduler's state), rename it into place, then keep the newest ``save_total_limit``: a
        kill at any moment leaves every ``checkpoint-N`` complete and the newest one usable."""
        run_dir = super()._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging, final = os.path.join(run_dir, STAGING), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # what a killed save left
        self.accelerator.wait_for_everyone()
        self._staging = True
        try:
            super()._save_checkpoint(model, trial)  # every process writes its part
        finally:
            self._staging = False
        if self.args.should_save:
            atomic_write_json(Path(staging, name, SCHEDULER_STATE), self.scheduler.state_dict())
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            if os.path.exists(final):  # a step saved again after resuming from an older one
                shutil.rmtree(final)
            os.replace(os.path.join(staging, name), final)
            shutil.rmtree(staging)
            best = self.state.best_model_checkpoint  # named inside STAGING by the save
            if best is not None and best.startswith(staging):
                self.state.best_model_checkpoint = run_dir + best[len(staging) :]
            rotate_checkpoints(
                run_dir, self.args.save_total_limit, self.state.best_model_checkpoint
            )
        self.accelerator.wait_for_everyone()

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        path = None if checkpoint is None else os.path.join(checkpoint, SCHEDULER_STATE)
        if path is not None and os.path.exists(path):
            with open(path) as f:
                self.scheduler.load_state_dict(json.load(f))
