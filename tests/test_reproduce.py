"""``make reproduce``'s preparation stage: what it plans, and its process pool."""

import json
import os
import shutil
import subprocess
from dataclasses import replace
from functools import partial
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch

from psnlib.replication import reproduce
from psnlib.replication.compute import jobs, pool, starting_points
from psnlib.replication.compute.prefixes import prefix_source
from psnlib.replication.plan import experiments, schedule
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import cost, ledger, paths
from psnlib.replication.report import notebook_runs


def test_planned_work_is_each_run_once_with_all_its_benchmarks():
    work = schedule.planned_work("cpu")
    keys = [v.run_key(get_profile("cpu"), seed) for v, seed, _ in work]
    assert len(keys) == len(set(keys)) == len(schedule.planned_runs("cpu"))
    by_key = dict(zip(keys, work, strict=True))
    grpo0 = by_key[experiments.GRPO.run_key(get_profile("cpu"), 0)]
    id_benchmarks = experiments.benchmarks_of(get_profile("cpu"), "id")
    ood = experiments.benchmarks_of(get_profile("cpu"), "ood")
    assert set(grpo0[2]) == set(id_benchmarks) | set(ood)  # main results, OOD and ablations


ABLATION_CUTS = (("random", "weak"), ("entropy", "same_family"), ("entropy", "weak"))


def test_the_plan_starts_from_every_policy_and_prefix_set_it_needs():
    cpu = get_profile("cpu")
    specs = set(starting_points.policies(cpu))
    assert {cpu.base, cpu.weak, *cpu.other_policies, prefix_source(cpu, "same_family")} == specs
    main = {(seed, "entropy", "weak") for seed in cpu.seeds}
    ablations = {(s, cut, source) for s in cpu.ablation_seeds for cut, source in ABLATION_CUTS}
    assert set(starting_points.prefix_sets(cpu)) == main | ablations


def test_prepare_builds_what_is_missing_then_runs_every_task_without_a_record(monkeypatch):
    stages = {}

    def run_all(stage, tasks, workers, record, fits=None, keep_going=False):
        stages[stage] = tasks
        return []

    monkeypatch.setattr(pool, "run_all", run_all)
    cpu = get_profile("cpu")
    pool.prepare(cpu, 2)
    assert list(stages) == ["policies", "weak prefixes", "runs"]
    assert len(stages["runs"]) == len(schedule.planned_work("cpu"))  # no record here
    premised = [task for _, _, task in stages["runs"] if task.premise]
    assert sorted(task.seed for task in premised) == list(cpu.premise_seeds or cpu.seeds)
    assert {task.variant.arm.name for task in premised} == {"grpo"}
    order = [(task.variant.arm.name, task.seed) for _, _, task in stages["runs"]]
    # the tuning first (issue 51): its choices decide the tuned arms' runs; seed by seed
    tuning = 1 + 10 * len(cpu.tuning_seeds)  # the base policy, GRPO and 3 x 3 knob values
    assert order[0] == ("base", 0) and order[1:3] == [("grpo", 200), ("psn", 200)]
    assert {seed for _, seed in order[1:tuning]} == set(cpu.tuning_seeds)
    assert order[tuning : tuning + 11] == [  # then the primary comparisons, seed by seed
        ("grpo", 0),
        ("psn", 0),
        ("psn_div", 0),
        ("psn_released_fixed", 0),
        ("psn_released", 0),
        ("psn_no_tis", 0),
        ("grpo", 0),  # rollouts at the raised temperature
        ("grpo", 0),  # the weaker entropy bonus (0.03)
        ("grpo", 0),  # the pilot's entropy bonus (0.1)
        ("psn_masked_is", 0),  # the 3PO-style arm
        ("grpo", 1),  # then the next seed
    ]


def _square(x: int) -> str:
    return f"{x * x}"


def test_tasks_run_in_worker_processes_and_failures_surface(capsys, tmp_path):
    timing = tmp_path / "timing.json"
    record = partial(reproduce._record, timing)
    pool.run_all("squares", [(_square, 3), (_square, 4)], workers=2, record=record)
    out = capsys.readouterr().out
    assert "9:" in out and "16:" in out and "2 worker(s)" in out
    entries = json.loads(timing.read_text())  # one per task, wall and CPU time
    assert sorted(e["task"] for e in entries) == ["16", "9"]
    assert all(e["stage"] == "squares" and e["cpu_seconds"] >= 0 for e in entries)
    with pytest.raises(TypeError):
        pool.run_all("bad", [(_square, "x")], workers=1)


def test_measured_compute_reads_the_records_and_computes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    torch.set_num_threads(1)
    smoke, benchmarks = get_profile("smoke"), ("countdown-l3",)
    plan = [
        schedule.Task(experiments.BASE_POLICY, 0, benchmarks),
        schedule.Task(experiments.GRPO, 0, benchmarks),
    ]
    monkeypatch.setattr(cost, "tasks", lambda profile: plan)
    record = jobs.run_task(smoke, plan[1])  # not the base
    shutil.rmtree(tmp_path / "data")  # no weights, no caches: the record alone
    monkeypatch.setattr(jobs, "run_task", None)  # nothing may compute
    table = cost.measured_compute(smoke).set_index("policy")
    log = ledger.log_table(record)
    assert table.loc["GRPO", "train_seconds"] == log["step_cpu_time"].sum()
    cpu = record["cpu_seconds"]
    assert table.loc["GRPO", "eval_seconds"] == sum(cpu.values()) - cpu["train"]
    assert cpu["evaluate"] > 0
    assert np.isnan(table.loc["base", "eval_seconds"])  # no record
    assert table.loc["GRPO", "cpu"] == record["machine"]["cpu"]
    assert pd.isna(table.loc["base", "cpu"])  # no record
    machines = cost.compute_by_machine(table.reset_index()).set_index("cpu")
    assert machines.loc[record["machine"]["cpu"], "tasks"] == 1  # the base has no record
    assert machines["cpu_hours"].sum() * 3600 == pytest.approx(sum(cpu.values()))
    assert not (tmp_path / "data").exists()


def test_a_fresh_checkout_remakes_committed_figures_and_a_resumed_one_skips_what_it_did(
    tmp_path, monkeypatch
):
    """Figures committed with the checkout (metrics JSON, an old timing log) are not taken as
    done: only a notebook this checkout's reproduction finished (``runs/<profile>/*.done``) is
    skipped, and the timing log starts with this reproduction."""
    figures = tmp_path / "figures" / "smoke"
    figures.mkdir(parents=True)
    (figures / "00_quickstart.json").write_text("{}")  # as committed
    (figures / reproduce.TIMING_FILE).write_text('[{"stage": "00_quickstart", "seconds": 999}]')
    ran = []

    def fake_run(path, profile, figures_dir, runs_dir):
        ran.append(path.stem)

    monkeypatch.setattr(reproduce, "run_notebook", fake_run)
    argv = ["--profile", "smoke", "--out", str(tmp_path), "--workers", "0", "--only", "00_quick"]
    reproduce.main(argv)
    assert ran == ["00_quickstart"]  # made again despite the committed metrics
    log = json.loads((figures / reproduce.TIMING_FILE).read_text())
    assert [e["stage"] for e in log] == ["00_quickstart"] and log[0]["seconds"] < 999
    assert (tmp_path / "runs" / "smoke" / "00_quickstart.done").exists()
    reproduce.main(argv)  # resumed: done in this checkout, so skipped
    assert ran == ["00_quickstart"]
    reproduce.main([*argv, "--force"])
    assert ran == ["00_quickstart"] * 2
    smoke = reproduce.get_profile("smoke")  # other settings: not done at these
    monkeypatch.setitem(reproduce.PROFILES, "smoke", replace(smoke, seeds=(0, 1, 2, 3)))
    reproduce.main(argv)
    assert ran == ["00_quickstart"] * 3
    reproduce.main(argv)
    assert ran == ["00_quickstart"] * 3
    records = tmp_path / "results" / "smoke"  # a git pull brings a record: made again
    records.mkdir(parents=True, exist_ok=True)
    (records / "grpo-s0-000000000000.json").write_text("{}")
    reproduce.main(argv)
    assert ran == ["00_quickstart"] * 4
    (records / "grpo-s0-000000000000.json").write_text('{"changed": 1}')
    reproduce.main(argv)
    assert ran == ["00_quickstart"] * 5


def test_the_published_report_names_no_machine_directory(tmp_path):
    nb = nbformat.v4.new_notebook()
    root = tmp_path / "checkout"
    cell = nbformat.v4.new_code_cell(f'figures_dir = "{root}/figures/cpu"')
    text = f"written to {root}/figures/cpu/x.json\n"
    cell.outputs = [nbformat.v4.new_output("stream", text=text)]
    nb.cells.append(cell)
    report = notebook_runs.static_report(nb, root)
    assert report.cells[0].source == 'figures_dir = "../figures/cpu"'
    assert report.cells[0].outputs[0]["text"] == "written to ../figures/cpu/x.json\n"
    # a reproduction with --out elsewhere publishes the same report
    out = tmp_path / "elsewhere"
    nb.cells[0].source = f'figures_dir = "{out}/figures/cpu"'
    assert (
        notebook_runs.static_report(nb, root, out).cells[0].source
        == 'figures_dir = "../figures/cpu"'
    )


def test_run_notebook_is_quiet_and_publishes_no_machine_directory(tmp_path, capfd):
    """A notebook run does not print the kernel's start-up notices (ipykernel 7 warns at every
    start that its localhost sockets are unencrypted: one line per notebook), and its report,
    run with ``--out`` outside the checkout, names the figures as a default run does."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(
            "profile = 'x'\nfigures_dir = ''\nmetrics_path = ''", metadata={"tags": ["parameters"]}
        ),
        nbformat.v4.new_code_cell("open(metrics_path, 'w').write('{}')\nprint(figures_dir)"),
    ]
    path = tmp_path / "nb" / "00_tiny.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    out = tmp_path / "out"  # as `python -m psnlib.replication.reproduce --out <tmp_path>/out`
    figures = out / "figures" / "smoke"
    metrics = notebook_runs.run_notebook(path, "smoke", figures, out / "runs" / "smoke")
    assert metrics.read_text() == "{}"
    report = (figures / "notebooks" / path.name).read_text()
    assert str(out) not in report and "../figures/smoke" in report
    assert "[IPKernelApp] WARNING" not in "".join(capfd.readouterr())


def test_prepare_says_which_records_are_stale_and_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    smoke = get_profile("smoke")
    task = schedule.tasks(smoke)[1]
    stale = {"run": 0, "base": 0}  # made by code whose version has been bumped since (now 1)
    record = {
        "schema": ledger.SCHEMA,
        "key": task.key(smoke),
        "profile": "smoke",
        "kind": task.kind,
        "arm": task.variant.arm.name,
        "seed": task.seed,
        "settings": {},
        "evaluation": {},
        "start": {"policy": "p", "fingerprint": "f"},
        "weights": "",
        "code": stale,
        "log": {"columns": [], "data": []},
        "benchmarks": {},
        "machine": {"cpu": "c", "threads": 1},
        "cpu_seconds": {"train": 0.0},
    }
    ledger.write(record)  # a well-formed record (ledger.write checks it), of an old version
    monkeypatch.setattr(pool, "run_all", lambda *args, **kwargs: [])
    pool.prepare(smoke, 1)
    out = capsys.readouterr().out
    assert f"stale, computed again: {task.key(smoke)}: stale: the run code changed" in out


def test_make_reproduce_passes_a_time_budget_on_to_the_sitting():
    """``make reproduce BUDGET=... UNTIL=...`` (a sitting shorter than the round) reaches
    ``reproduce`` as ``--budget`` and ``--until``; without them neither is passed."""
    root = Path(__file__).resolve().parents[1]

    def recipe(*variables: str) -> str:
        made = subprocess.run(
            ["make", "-n", "reproduce", *variables], cwd=root, capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr
        return made.stdout

    timed = recipe("BUDGET=7200", "UNTIL=03:10")
    assert "--budget 7200" in timed and "--until 03:10" in timed
    plain = recipe()
    assert "psnlib.replication.reproduce --profile cpu" in plain
    assert "--budget" not in plain and "--until" not in plain


def test_the_environment_holds_the_folders_within_and_what_it_held_after(monkeypatch):
    """``paths.environment`` (reproduce's ledger and data folders, proof's temporary ones): set
    within, restored after, an unset variable unset again, even when the body raises."""
    monkeypatch.setenv("PSNLIB_TEST_SET", "before")
    monkeypatch.delenv("PSNLIB_TEST_UNSET", raising=False)
    with (
        pytest.raises(RuntimeError, match="inside"),
        paths.environment({"PSNLIB_TEST_SET": Path("/a"), "PSNLIB_TEST_UNSET": "b"}),
    ):
        assert (os.environ["PSNLIB_TEST_SET"], os.environ["PSNLIB_TEST_UNSET"]) == ("/a", "b")
        raise RuntimeError("inside")
    assert os.environ["PSNLIB_TEST_SET"] == "before" and "PSNLIB_TEST_UNSET" not in os.environ
