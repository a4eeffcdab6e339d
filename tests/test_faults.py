"""Fault injection: a smoke run SIGKILLed at a random point (inside a step, inside a checkpoint
write, between the checkpoint's rename and the rotation of older ones, between the last
checkpoint and the cache save), then started again as a user would, equals the run that was
never interrupted: the same log, weights within 1e-5, and no directory needing repair.

The killed run is a subprocess: a small script patches one psnlib or transformers function to
SIGKILL its own process when the run reaches the chosen point. The resumed run is the ordinary
call (``train_policy``, or ``python -m psnlib train`` with the same arguments)."""

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from psnlib.models import META_FILE
from psnlib.replication.compute.cli import main
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.runs import run_dir
from psnlib.tasks import task_reward

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
SMOKE_REWARD = task_reward(get_profile("smoke").rl_dataset).__qualname__

TIMES = ("time", "per_second", "runtime")
KILLER = """
import os, signal, sys
import torch, transformers
from psnlib.trainer import checkpoints, trainer
from psnlib.replication.compute import cli, runs

entry, point, step, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def kill_at(owner, name, when):
    original = getattr(owner, name)
    def killed(*args, **kwargs):
        if when(*args):
            die()
        return original(*args, **kwargs)
    setattr(owner, name, killed)

if point == "step":  # after the backward pass of step `step`, before its optimizer step
    original = trainer.PSNGRPOTrainer.training_step
    def training_step(self, *args, **kwargs):
        loss = original(self, *args, **kwargs)
        if self.state.global_step + 1 == step:
            die()
        return loss
    trainer.PSNGRPOTrainer.training_step = training_step
elif point == "checkpoint":  # the weights of checkpoint-`step` are written, its optimizer not
    kill_at(transformers.Trainer, "_save_optimizer_and_scheduler",
            lambda self, *a: self.state.global_step == step)
elif point == "scheduler":  # the last file of checkpoint-`step`, before the rename
    kill_at(checkpoints, "atomic_write_json", lambda path, *a: f"checkpoint-{step}" in str(path))
elif point == "rotate":  # checkpoint-`step` renamed into place, older ones not yet rotated
    kill_at(checkpoints, "rotate_checkpoints", lambda run_dir, *a: os.path.isdir(
        os.path.join(run_dir, f"checkpoint-{step}")))
elif point == "cache":  # training done, the policy not yet saved
    kill_at(runs, "save_run", lambda *a: True)
torch.set_num_threads(1)
if entry == "train_policy":
    runs.train_policy("smoke", "psn", 0)
else:
    cli.main(["train", "--profile", "smoke", "--arm", "psn", "--output_dir", out])
"""


def points(count: int, seed: int) -> list[tuple[str, str, int]]:
    """``count`` random (entry, point, step) kills of a smoke run, drawn with ``seed``; the
    first two are a checkpoint write and the gap before the cache save."""
    steps = get_profile("smoke").rl_steps
    rng = random.Random(seed)
    entries = ("train_policy", "cli")
    fixed = [
        (rng.choice(entries), "checkpoint", rng.randint(1, steps)),
        (rng.choice(entries), "cache", steps),
    ]
    kinds = ["step", "checkpoint", "scheduler", "rotate", "cache"]
    more = [(rng.choice(entries), rng.choice(kinds), rng.randint(1, steps)) for _ in range(count)]
    return (fixed + more)[:count]


def log_rows(log: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not any(t in k for t in TIMES)} for row in log]


def assert_same(log: list[dict], expected: list[dict], weights: dict, reference: dict) -> None:
    assert len(log) == len(expected) == get_profile("smoke").rl_steps
    for row, other in zip(log_rows(log), log_rows(expected), strict=True):
        assert row.keys() == other.keys()
        for key, value in row.items():
            assert value == other[key] or (math.isnan(value) and math.isnan(other[key])), key
    assert weights.keys() == reference.keys()
    assert max((weights[k] - reference[k]).abs().max().item() for k in weights) <= 1e-5


def outputs(entry: str, out) -> tuple[list[dict], dict]:
    """The finished run's log and weights."""
    if entry == "train_policy":
        model, _, log = train_policy("smoke", "psn", 0)
        return log.to_dict(orient="records"), {k: v.clone() for k, v in model.state_dict().items()}
    main(["train", "--profile", "smoke", "--arm", "psn", "--output_dir", str(out)])
    meta = json.loads((out / "policy" / META_FILE).read_text())
    return meta["log"], load_file(out / "policy" / "model.safetensors")


def kill_and_resume(tmp_path, monkeypatch, kills: list[tuple[str, str, int]]) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("PSNLIB_DATA", str(data))
    base_policy("smoke")  # built once: each killed run loads it
    policies = data / "cache" / "policies"
    reference = {
        entry: outputs(entry, tmp_path / f"ref-{entry}") for entry in {e for e, *_ in kills}
    }
    cached = run_dir(get_profile("smoke"), "psn", 0, {}, SMOKE_REWARD)
    env = {**os.environ, "PSNLIB_DATA": str(data), "OMP_NUM_THREADS": "1"}
    for i, (entry, point, step) in enumerate(kills):
        shutil.rmtree(cached, ignore_errors=True)  # the finished run of the previous round
        out = tmp_path / f"out-{i}"
        killed = subprocess.run(
            [sys.executable, "-c", KILLER, entry, point, str(step), str(out)],
            env={**env, "PYTHONPATH": ":".join(sys.path)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert killed.returncode == -signal.SIGKILL, (point, step, killed.stderr[-2000:])
        assert policies.exists()
        log, weights = outputs(entry, out)  # started again, nothing repaired by hand
        assert_same(log, reference[entry][0], weights, reference[entry][1])


def test_a_run_killed_in_a_checkpoint_write_or_before_the_cache_save_resumes_exactly(
    tmp_path, monkeypatch
):
    kill_and_resume(tmp_path, monkeypatch, points(2, seed=17))


@pytest.mark.slow
def test_a_run_killed_at_ten_random_points_resumes_exactly(tmp_path, monkeypatch):
    kill_and_resume(tmp_path, monkeypatch, points(10, seed=1017))
