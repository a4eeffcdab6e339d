"""A non-finite loss, gradient norm or weight stops a PSN-GRPO run with a FloatingPointError
naming the step and the settings likely responsible, before a checkpoint of that step is written
(TRL's trainer logs the average of earlier losses instead and trains on). Settings that cannot
work are refused before any work: an unknown noise target at the trainer's construction, and
``use_vllm`` without vLLM."""

import math
import re

import pytest
import torch
from conftest import CHECKPOINTED, PROMPTS, tiny_trainer
from datasets import Dataset
from safetensors.torch import load_file
from trl import GRPOTrainer
from trl.import_utils import is_vllm_available

from psnlib.replication.compute.cli import main
from psnlib.trainer import PSNGRPOTrainer
from psnlib.trainer.checkpoints import STAGING

SETTINGS = "sigma=0.01, learning_rate=0.01, temperature=1, beta=0, weight_decay=0, max_grad_norm=1"

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def make_trainer(output_dir, **overrides) -> PSNGRPOTrainer:
    """Three steps with a checkpoint after each (``conftest.CHECKPOINTED``)."""
    data = Dataset.from_dict({"prompt": PROMPTS * 4})
    return tiny_trainer(output_dir, train_dataset=data, **{**CHECKPOINTED, **overrides})


def saved(output_dir) -> list[str]:
    """The checkpoints written, each holding only finite weights."""
    names = sorted(p.name for p in output_dir.glob("checkpoint-*"))
    for name in names:
        weights = load_file(output_dir / name / "model.safetensors")
        assert all(torch.isfinite(w).all() for w in weights.values()), name
    assert not (output_dir / STAGING).exists()
    return names


def test_a_nan_loss_stops_the_run_at_its_step(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path)
    real_loss = PSNGRPOTrainer.compute_loss

    def loss_nan_in_step_2(self, *args, **kwargs):
        loss = real_loss(self, *args, **kwargs)
        return loss * math.nan if self.state.global_step == 1 else loss

    monkeypatch.setattr(PSNGRPOTrainer, "compute_loss", loss_nan_in_step_2)
    message = rf"^step 2: the loss is nan \({SETTINGS}\); stopped before this step was saved$"
    with pytest.raises(FloatingPointError, match=message):
        trainer.train()
    assert trainer.state.global_step == 1  # no optimizer step on the NaN gradients
    assert saved(tmp_path) == ["checkpoint-1"]


def test_an_infinite_gradient_norm_stops_the_run(tmp_path):
    trainer = make_trainer(tmp_path)
    weight = trainer.model.model.layers[0].mlp.up_proj.weight
    weight.register_hook(lambda grad: torch.full_like(grad, math.inf))
    with pytest.raises(FloatingPointError, match=r"^step 1: the gradient norm is inf \(sigma="):
        trainer.train()
    assert saved(tmp_path) == []


def test_a_non_finite_weight_stops_the_run_before_its_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path)
    # Refused by PSNGRPOConfig; set afterwards, it reaches AdamW through its parameter groups,
    # whose weight decay AdamW does not check: W *= 1 - lr * nan.
    trainer.args.weight_decay = math.nan
    message = r"^step 1: weight model\.\S+ is not finite \(.*weight_decay=nan"
    with pytest.raises(FloatingPointError, match=message):
        trainer.train()
    assert saved(tmp_path) == []


def test_an_unknown_noise_target_fails_at_construction(tmp_path):
    with pytest.raises(
        ValueError, match=r"noise target 'nosuchlayer' matches no parameter of "
    ) as e:
        make_trainer(tmp_path, noise_targets=["nosuchlayer"])
    assert "sites: mlp, attn, all" in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing trained or written


def test_use_vllm_without_vllm_is_a_one_line_error(tmp_path):
    if is_vllm_available():
        pytest.skip("vLLM is installed here")
    message = re.escape(
        "use_vllm=True needs vLLM, which is not installed: pip install 'psnlib[gpu]'"
    )
    with pytest.raises(ValueError, match=message):
        make_trainer(tmp_path, use_vllm=True, save_strategy="no")


def test_the_command_line_ends_a_non_finite_run_in_one_line(tmp_path, monkeypatch, capsys):
    """``python -m psnlib train`` whose run goes NaN exits with the trainer's one-line error,
    and no trained policy is written."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    real_loss = GRPOTrainer.compute_loss  # patched on TRL's class: PSNGRPOTrainer's stays as built
    monkeypatch.setattr(
        GRPOTrainer, "compute_loss", lambda self, *a, **k: real_loss(self, *a, **k) * math.nan
    )
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--profile", "smoke", "--output_dir", str(out)])
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert re.match(r"psnlib train: error: step 1: the loss is nan \(sigma=", text), text
    assert not (out / "policy").exists()
