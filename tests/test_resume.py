"""Resume: a run resumed from a checkpoint is the uninterrupted run (rollouts, rewards, logs and
weights), at every noise scope and with both adaptive schedulers; checkpoints are written aside
and renamed, so the last complete one always loads."""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from conftest import CHECKPOINTED, PROMPTS, tiny_trainer
from datasets import Dataset

from psnlib.replication.compute import runs
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.trainer import PSNGRPOTrainer

TIMES = ("time", "per_second", "runtime")  # wall-clock entries of a log: never equal

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def make_trainer(output_dir: Path, **overrides) -> PSNGRPOTrainer:
    """Three steps with a checkpoint after each (``conftest.CHECKPOINTED``)."""
    data = Dataset.from_dict({"prompt": PROMPTS * 4})
    return tiny_trainer(output_dir, train_dataset=data, **{**CHECKPOINTED, **overrides})


def steps(log: list[dict]) -> dict[int, dict]:
    """The per-step rows of a log, without wall-clock entries."""
    return {
        row["step"]: {k: v for k, v in row.items() if not any(t in k for t in TIMES)}
        for row in log
        if "reward" in row
    }


def assert_same_log(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for step in a:
        assert a[step].keys() == b[step].keys(), step
        for key, value in a[step].items():
            other = b[step][key]
            same = value == other or (math.isnan(value) and math.isnan(other))
            assert same, (step, key, value, other)


def max_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(
        (p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


SETUPS = {
    "step": {"noise_scope": "step"},
    "prompt": {"noise_scope": "prompt"},
    "rollout": {"noise_scope": "rollout"},
    "kl_target": {"noise_scope": "rollout", "sigma_scheduler": "kl_target", "kl_target": 10.0},
    "diversity": {"sigma_scheduler": "diversity", "div_similarity": "lexical"},
    "generate": {"rollout_engine": "generate"},
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_a_resumed_run_is_the_uninterrupted_run(tmp_path, setup):
    whole = make_trainer(tmp_path / "whole", **SETUPS[setup])
    whole.train()
    resumed = make_trainer(tmp_path / "resumed", **SETUPS[setup])
    resumed.train(resume_from_checkpoint=str(tmp_path / "whole" / "checkpoint-1"))
    expected = steps(whole.state.log_history)
    assert list(expected) == [1, 2, 3]
    got = steps(resumed.state.log_history)
    assert_same_log(got, expected)  # the same rollouts: same rewards, entropies, KL, sigma
    assert max_difference(resumed.model, whole.model) == 0.0  # bit-identical
    if setup == "kl_target":
        assert resumed.sigma == whole.sigma == pytest.approx(0.01 * 1.01**3)
    scheduler = json.loads(
        (tmp_path / "whole" / "checkpoint-3" / "sigma_scheduler.json").read_text()
    )
    assert scheduler["sigma"] == pytest.approx(whole.sigma)


@pytest.mark.parametrize("arm", ["psn_kl", "psn_div"])
def test_an_interrupted_train_policy_run_is_the_uninterrupted_run(tmp_path, monkeypatch, arm):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "whole"))
    base_policy("smoke")  # built first: both runs load it from the cache
    whole, _, expected = train_policy("smoke", arm, 0)
    shutil.copytree(tmp_path / "whole" / "cache" / "policies", tmp_path / "cut/cache/policies")
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "cut"))
    real_step = runs.PSNGRPOTrainer.training_step

    def interrupted(self, *args, **kwargs):  # in step 2, after checkpoint-1
        if self.state.global_step == 1:
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(runs.PSNGRPOTrainer, "training_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_policy("smoke", arm, 0)
    monkeypatch.setattr(runs.PSNGRPOTrainer, "training_step", real_step)
    resumed, _, log = train_policy("smoke", arm, 0)
    assert_same_log(steps(log.to_dict(orient="records")), steps(expected.to_dict(orient="records")))
    assert max_difference(resumed, whole) == 0.0
