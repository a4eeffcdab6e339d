"""The notebooks' probes travel in the records of the tasks that compute them: read back with no
weights and no caches, the same tables."""

import shutil

import pandas as pd
import pytest

from psnlib.replication.analysis import probe_tables
from psnlib.replication.compute import jobs, probing, runs
from psnlib.replication.plan import probes, schedule
from psnlib.replication.plan.experiments import BASE_POLICY, GRPO, PSN
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords
from psnlib.tasks.countdown import Problem


@pytest.fixture
def smoke(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    return get_profile("smoke")


def _no_weights(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a policy was loaded")

    for name in ("base_policy", "weak_policy", "prefix_train_set"):
        monkeypatch.setattr(probing, name, refuse)
    monkeypatch.setattr(runs, "load_variant", refuse)


def test_the_plan_puts_each_probe_on_the_tasks_of_its_policies():
    smoke = get_profile("smoke")
    plan = schedule.tasks(smoke)
    probed = {(name, task.key(smoke)) for task in plan for name in task.probes}
    wanted = {
        (name, v.run_key(smoke, smoke.seeds[0]))
        for name, probe in probes.PROBES.items()
        for v in probe.variants
    }
    assert probed == wanted
    keys = {name: {k for n, k in probed if n == name} for name in probes.PROBES}
    assert keys["testbed"] == {BASE_POLICY.run_key(smoke, 0)}
    assert keys["examples"] == {GRPO.run_key(smoke, 0), PSN.run_key(smoke, 0)}


def test_base_probes_are_read_from_the_record_without_weights(smoke, tmp_path, monkeypatch):
    (task,) = [t for t in schedule.tasks(smoke) if "testbed" in t.probes]
    record = jobs.run_task(smoke, task)
    assert set(record["probes"]) == {"testbed", "prefix_quality", "temperatures"}
    shutil.rmtree(tmp_path / "data")
    _no_weights(monkeypatch)
    made = ledger.probe_tables(record, "testbed")
    shown = probe_tables.testbed(smoke)  # notebook 01: the ablation benchmarks
    assert set(shown["curves"]["benchmark"]) == set(smoke.ablation_benchmarks)
    expected = made["curves"][made["curves"]["benchmark"].isin(smoke.ablation_benchmarks)]
    pd.testing.assert_frame_equal(shown["curves"], expected.reset_index(drop=True))
    quality = probe_tables.prefix_quality_table(smoke, smoke.seeds[0])
    pd.testing.assert_frame_equal(quality, ledger.probe_tables(record, "prefix_quality")["quality"])
    at_t = probe_tables.base_temperatures(smoke)
    assert list(at_t["temperature"]) == [smoke.eval_temperature, *probes.PAPER_TEMPERATURES]
    assert not (tmp_path / "data").exists()


def test_samples_side_by_side_are_read_from_the_records_without_weights(
    smoke, tmp_path, monkeypatch
):
    made = {}
    for task in schedule.tasks(smoke):
        if "examples" in task.probes:
            made[task.variant.label] = jobs.run_task(smoke, task)
    examples = ledger.probe_tables(made[PSN.label], "examples")["examples"]
    prompt = examples["prompt"].iloc[0]
    numbers, target = prompt.removesuffix(":").split("->")
    problem = Problem(tuple(int(n) for n in numbers.split()), int(target))
    shutil.rmtree(tmp_path / "data")
    _no_weights(monkeypatch)
    shown = probe_tables.side_by_side(smoke, [GRPO, PSN], problem, smoke.seeds[0])
    assert list(shown["policy"].unique()) == [GRPO.label, PSN.label]
    ours = shown[shown["policy"] == PSN.label]["response"].tolist()
    assert ours == examples[examples["prompt"] == prompt]["response"].tolist()
    assert not (tmp_path / "data").exists()


def test_a_probe_missing_from_the_record_is_named_not_computed(smoke, monkeypatch):
    _no_weights(monkeypatch)
    monkeypatch.setattr(probing, "_prefix_quality", lambda *a: pytest.fail("computed"))
    with pytest.raises(MissingRecords, match="prefix_quality probe at seed 0 only, not 1"):
        probe_tables.prefix_quality_table(smoke, 1)
    with pytest.raises(MissingRecords, match=r"no usable record of \['base seed 0 \(prefix_q"):
        probe_tables.prefix_quality_table(smoke)
