"""GRPO's training path at the smoke profile: the policies a run keeps at chosen steps (equal to
TRL's checkpoints there, changing no weight of the run), evaluated into its ledger record, and a
record without them reported when its task expects them."""

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_ledger import a_record

from psnlib.replication.compute import jobs, runs
from psnlib.replication.compute.store import weights_fingerprint
from psnlib.replication.plan import experiments, schedule
from psnlib.replication.plan import runs as plan_runs
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.runs import Run
from psnlib.replication.records import ledger, status
from psnlib.replication.records.tables import task_expectation
from psnlib.trainer.kept_steps import path_step_dir

SMOKE = get_profile("smoke")  # 4 steps; path_steps (2,)


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(directory / "model.safetensors")


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def train(root: Path, keep_steps: tuple[int, ...], **overrides) -> Path:
    """A GRPO run at smoke trained by ``runs.train_run`` into ``root/policy``, its checkpoints
    kept in ``root/work``."""
    run = Run(SMOKE, "grpo", 0, overrides)
    runs.train_run(run, run.config(root / "work"), root / "policy", keep_steps=keep_steps)
    return root / "policy"


@pytest.fixture
def fits(monkeypatch) -> list[int]:
    """The max_steps of each run that ``runs.fit`` trained or loaded (fit counted, not faked)."""
    calls = []
    real = runs.fit

    def counted(config, *args, **kwargs):
        calls.append(config.max_steps)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(runs, "fit", counted)
    return calls


def test_a_kept_step_is_trls_checkpoint_there_and_keeping_it_changes_no_weight(
    data, one_thread, tmp_path
):
    # save_steps 100: TRL saves at the end only, so the save at step 2 is the path's alone
    kept = train(tmp_path / "kept", (2,), save_steps=100)
    plain = train(tmp_path / "plain", (), save_steps=100)
    assert not (tmp_path / "plain" / "work" / "checkpoint-2").exists()  # no save there without
    checkpoint = tmp_path / "kept" / "work" / "checkpoint-2"
    step = path_step_dir(kept, 2)
    assert step == kept / "path" / "step-2"
    assert same(weights(step), weights(checkpoint))  # the weights TRL saved at step 2
    assert not (step / "optimizer.pt").exists()  # the policy, not the training state
    assert same(weights(kept), weights(plain))  # the final policy: bit-identical
    assert not same(weights(step), weights(kept))  # steps 3 and 4 moved it
    model, _ = runs.load_path_policy(kept, 2)
    assert weights_fingerprint(model) != weights_fingerprint(runs.load_saved_policy(kept)[0])


def test_a_cached_run_without_the_path_is_trained_again_to_the_same_weights(data, one_thread, fits):
    path = Run(SMOKE, "grpo", 0).path()
    first, _, _ = runs.train_policy(SMOKE, "grpo", 0)
    assert not path_step_dir(path, 2).exists() and fits == [4]
    again, _, _ = runs.train_policy(SMOKE, "grpo", 0, keep_steps=(2,))  # lacks step 2: retrained
    assert fits == [4, 4] and path_step_dir(path, 2).is_dir()
    assert weights_fingerprint(again) == weights_fingerprint(first)
    assert Run(SMOKE, "grpo", 0).path() == path  # keeping steps is not in the run's key
    runs.train_policy(SMOKE, "grpo", 0, keep_steps=(2,))
    assert fits == [4, 4]  # now it has its path: loaded
    with pytest.raises(ValueError, match=r"keep_steps must be integers in 1 \.\. 3"):
        runs.train_policy(SMOKE, "grpo", 0, keep_steps=(4,))


def test_a_step_whose_checkpoint_remains_is_kept_on_resuming_and_a_lost_one_restarts_the_run(
    data, one_thread, fits, monkeypatch, tmp_path, caplog
):
    monkeypatch.setattr(plan_runs, "KEEP_CHECKPOINTS", 10)  # every step's checkpoint stays
    policy = train(tmp_path, ())  # finished, no path; checkpoints 1 .. 4 in its work directory
    final = weights(policy)
    train(tmp_path, (2,))  # copied from checkpoint-2; checkpoint-4 is loaded, not trained on
    assert same(weights(path_step_dir(policy, 2)), weights(tmp_path / "work" / "checkpoint-2"))
    assert same(weights(policy), final) and fits == [4, 4]
    for old in ("checkpoint-1", "checkpoint-2", "path"):  # step 1 lost, with what could redo it
        shutil.rmtree(tmp_path / "work" / old)
    with caplog.at_level(logging.WARNING):
        train(tmp_path, (1, 2))
    assert "training the run from scratch" in caplog.text
    assert same(weights(policy), final)  # trained again from step 0: the same run
    assert not same(weights(path_step_dir(policy, 1)), weights(path_step_dir(policy, 2)))


def test_the_grpo_tasks_of_the_main_seeds_carry_the_path():
    plan = schedule.tasks(SMOKE)
    pathed = {(t.variant.label, t.seed) for t in plan if t.path}
    assert pathed == {("GRPO", seed) for seed in SMOKE.seeds}
    task = next(t for t in plan if t.path)
    assert task.path == SMOKE.path_steps == (2,) and "path at steps 2" in task.name()
    assert task_expectation(SMOKE, task).path == (2,)
    table = status.status(SMOKE, plan)
    assert table.set_index("run").loc[task.key(SMOKE), "path"] == 1


def test_the_record_holds_the_paths_evaluations_and_one_without_them_is_unusable(
    data, one_thread, tmp_path, monkeypatch
):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    task = schedule.Task(experiments.GRPO, 0, ("countdown-l3",), path=(2,))
    record = jobs.run_task(SMOKE, task)
    path = record["path"]
    assert path["steps"] == [2] and set(path["benchmarks"]) == {"2"}
    tables = ledger.path_tables(record, ("countdown-l3",))[2]["countdown-l3"]
    assert len(tables["problems"]) == SMOKE.eval_problems
    step = path_step_dir(task.variant.run_path(SMOKE, 0), 2)
    model, _ = runs.load_path_policy(step.parent.parent, 2)
    assert path["weights"]["2"] == weights_fingerprint(model) != record["weights"]
    assert record["cpu_seconds"]["path"] > 0
    expected = task_expectation(SMOKE, task)
    loaded = ledger.usable(expected)
    assert loaded is not None and ledger.path_tables(loaded, ("countdown-l3",))
    # a record of the same run without its path, or with other steps, cannot stand for the task
    bare = {k: v for k, v in record.items() if k != "path"}
    assert ledger.problems(bare, expected) == [
        "lacks the training path (the policies of steps [2])"
    ]
    assert ledger.problems(bare, dataclasses.replace(expected, path=())) == []
    other = record | {"path": {**path, "steps": [3], "weights": {}, "benchmarks": {}}}
    assert ledger.problems(other, expected) == ["its training path holds steps [3], not [2]"]
    ledger.write(bare)
    assert ledger.usable(expected) is None
    row = status.status(SMOKE, [task]).iloc[0]
    assert row["state"] == "unusable" and "lacks the training path" in row["why"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ({"steps": ["2"]}, "path does not hold a list of integer steps"),
        ({"steps": [2], "weights": {}, "benchmarks": {}}, "weights is not one entry per step"),
        (
            {"steps": [2], "weights": {"2": "f"}, "benchmarks": {"2": {"countdown-l3": {}}}},
            "path step 2 benchmark countdown-l3: problems is not a table",
        ),
    ],
)
def test_a_malformed_path_is_damage(path, says, tmp_path):
    record = a_record(path=path)
    assert any(says in w for w in ledger.shape_problems(record, record["key"]))
    file = tmp_path / "grpo-s0-abc.json"
    file.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="damaged record"):
        assert ledger.load(file) is None
