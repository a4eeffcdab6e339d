"""Resume only from a complete checkpoint: one missing or with a damaged file a resume reads is
skipped, with a warning naming it and why, and the run resumes from the newest complete one and
ends as the uninterrupted run; one that still fails to load falls back to the next older one. A
checkpoint write that fails (a full disk) says so, naming the checkpoint, and leaves no staging."""

import errno
import logging
import re
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
import transformers
from conftest import CHECKPOINTED, PROMPTS, distinct_chars, tiny_settings, tiny_trainer
from datasets import Dataset

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute.runs import fit
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer, checkpoints
from psnlib.trainer.checkpoints import (
    STAGING,
    CheckpointError,
    checkpoint_problem,
    complete_checkpoints,
    last_checkpoint,
)

TIMES = ("time", "per_second", "runtime")  # wall-clock entries of a log: never equal
STEPS = 3

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def config(output_dir: Path, **overrides) -> PSNGRPOConfig:
    return PSNGRPOConfig(**tiny_settings(output_dir, **{**CHECKPOINTED, **overrides}))


def run(output_dir: Path, **overrides) -> tuple[PSNGRPOTrainer, list[dict]]:
    """``runs.fit`` of a tiny policy into ``output_dir``: resumes what is there."""
    tokenizer = build_tokenizer()
    return fit(
        config(output_dir, **overrides),
        tiny_policy(size="smoke", tokenizer=tokenizer, seed=0),
        tokenizer,
        Dataset.from_dict({"prompt": PROMPTS * 4}),
        distinct_chars,
    )


def steps(log: list[dict]) -> dict[int, dict]:
    return {
        row["step"]: {k: v for k, v in row.items() if not any(t in k for t in TIMES)} for row in log
    }


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted run, with checkpoints 1 to 3, and its final weights and log."""
    out = tmp_path_factory.mktemp("whole")
    torch.set_num_threads(1)
    trainer, log = run(out)
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    return out, weights, steps(log)


def interrupted(whole_dir: Path, tmp_path: Path) -> Path:
    """A copy of the run as a kill in step 3 left it: checkpoints 1 and 2."""
    out = tmp_path / "cut"
    for step in (1, 2):
        shutil.copytree(whole_dir / f"checkpoint-{step}", out / f"checkpoint-{step}")
    return out


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "no optimizer.pt": (lambda c: (c / "optimizer.pt").unlink(), "optimizer.pt is missing"),
    "no scheduler.pt": (lambda c: (c / "scheduler.pt").unlink(), "scheduler.pt is missing"),
    "no rng_state.pth": (lambda c: (c / "rng_state.pth").unlink(), "rng_state.pth is missing"),
    "no trainer_state": (
        lambda c: (c / "trainer_state.json").unlink(),
        "trainer_state.json is missing",
    ),
    "no sigma state": (
        lambda c: (c / "sigma_scheduler.json").unlink(),
        "sigma_scheduler.json is missing",
    ),
    "no weights": (
        lambda c: (c / "model.safetensors").unlink(),
        "the model weights .* are missing",
    ),
    "short weights": (
        lambda c: truncate(c / "model.safetensors"),
        "model.safetensors is damaged",
    ),
    "short optimizer": (lambda c: truncate(c / "optimizer.pt"), "optimizer.pt is damaged"),
    "short rng state": (lambda c: truncate(c / "rng_state.pth"), "rng_state.pth is damaged"),
    "short trainer_state": (
        lambda c: truncate(c / "trainer_state.json"),
        "trainer_state.json does not parse",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_an_incomplete_newest_checkpoint_is_skipped_and_named(whole, tmp_path, caplog, damage):
    whole_dir, weights, log = whole
    out = interrupted(whole_dir, tmp_path)
    harm, why = DAMAGE[damage]
    harm(out / "checkpoint-2")
    assert last_checkpoint(out) == str(out / "checkpoint-1")
    with caplog.at_level(logging.WARNING, logger="psnlib.trainer.checkpoints"):
        trainer, got = run(out)
    newest, skipped = (re.escape(str(out / f"checkpoint-{step}")) for step in (1, 2))
    warning = f"skipping checkpoint {skipped}: {why}.*; the newest complete checkpoint is {newest}$"
    assert any(re.match(warning, r.message) for r in caplog.records), caplog.text
    assert steps(got) == log  # steps 2 and 3 retaken: the same rollouts, rewards and losses
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param, weights[name]), name  # as the uninterrupted run, bit for bit


def test_a_checkpoint_that_fails_to_load_falls_back_to_the_older_one(whole, tmp_path, caplog):
    whole_dir, weights, log = whole
    out = interrupted(whole_dir, tmp_path)
    with zipfile.ZipFile(out / "checkpoint-2" / "optimizer.pt", "w") as archive:
        archive.writestr("optimizer/data.pkl", b"not a pickle")  # a whole zip: passes the check
    assert checkpoint_problem(out / "checkpoint-2") is None
    with caplog.at_level(logging.WARNING, logger="psnlib.trainer.checkpoints"):
        trainer, got = run(out)
    assert f"checkpoint {out / 'checkpoint-2'} failed to load" in caplog.text
    assert f"resuming from {out / 'checkpoint-1'} instead" in caplog.text
    assert steps(got) == log
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param, weights[name]), name


def test_the_last_checkpoint_failing_to_load_is_an_error_naming_it(whole, tmp_path):
    out = tmp_path / "cut"
    shutil.copytree(whole[0] / "checkpoint-1", out / "checkpoint-1")
    (out / "checkpoint-1" / "rng_state.pth").write_bytes(b"")  # empty: not a zip
    assert complete_checkpoints(out) == []  # the check sees it: the run would start over
    with zipfile.ZipFile(out / "checkpoint-1" / "rng_state.pth", "w") as archive:
        archive.writestr("rng_state/data.pkl", b"not a pickle")
    with pytest.raises(CheckpointError, match=rf"checkpoint {out / 'checkpoint-1'} failed to load"):
        run(out)


def test_train_resumes_only_a_complete_checkpoint(whole, tmp_path):
    out = interrupted(whole[0], tmp_path)
    (out / "checkpoint-2" / "scheduler.pt").unlink()
    data = Dataset.from_dict({"prompt": PROMPTS * 4})
    trainer = tiny_trainer(out, train_dataset=data, **CHECKPOINTED)
    message = rf"cannot resume from {out / 'checkpoint-2'}: scheduler.pt is missing"
    with pytest.raises(ValueError, match=message):
        trainer.train(resume_from_checkpoint=str(out / "checkpoint-2"))
    trainer.train(resume_from_checkpoint=True)  # the newest complete one: checkpoint-1
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param, whole[1][name]), name


def full_disk(monkeypatch, error: BaseException, free: int) -> None:
    """The next optimizer save writes part of its file, then fails with ``error``; the disk
    reports ``free`` bytes."""

    def save(self, output_dir):
        Path(output_dir, "optimizer.pt").write_bytes(b"\0" * 64)
        raise error

    monkeypatch.setattr(transformers.Trainer, "_save_optimizer_and_scheduler", save)
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(checkpoints.shutil, "disk_usage", lambda path: usage._replace(free=free))


TORCH_FULL = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 32")


@pytest.mark.parametrize(
    ("error", "free", "message"),
    [
        (
            TORCH_FULL,
            0,
            r"^\[Errno 28\] no space left on device: checkpoint .*checkpoint-1 could not be",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            2**40,
            r"^\[Errno 28\] no space left on device: ",
        ),
        (TORCH_FULL, 2**40, r"^checkpoint .*checkpoint-1 could not be written \(RuntimeError: "),
    ],
)
def test_a_failed_checkpoint_write_names_it_and_leaves_no_staging(
    tmp_path, monkeypatch, error, free, message
):
    full_disk(monkeypatch, error, free)
    data = Dataset.from_dict({"prompt": PROMPTS * 4})
    trainer = tiny_trainer(tmp_path, train_dataset=data, **CHECKPOINTED)
    with pytest.raises(OSError, match=message) as raised:
        trainer.train()
    assert "\n" not in str(raised.value)
    assert (raised.value.errno == errno.ENOSPC) == ("no space" in str(raised.value))
    assert not (tmp_path / STAGING).exists() and not (tmp_path / "checkpoint-1").exists()
