"""A ledger record is checked against its schema on load (issue 50, items 2 and 3): a record that
parses but holds the wrong types, a non-finite or negative value, or JSON nested 100,000 deep is
named once and treated as missing; it never stops ``--status``, a sitting or a notebook's
reader."""

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from test_ledger import a_record, expected_of

from psnlib.replication.plan import schedule
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger, schema, status

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    return tmp_path / "results"


def _premise() -> dict:
    problems = {"columns": ["n", "correct"], "data": [[4, 1]]}
    result = {"columns": ["temperature", "matched"], "data": [[1.1, True]]}
    search = {"columns": ["temperature", "pass@1"], "data": [[1.0, 0.2], [1.1, 0.25]]}
    time = {"columns": ["seconds", "cpu_seconds"], "data": [[1.0, 1.0]]}
    tables = {
        "noise": {"problems": problems, "time": time},
        "match": {"search": search, "result": result, "time": time},
        "temperature": {"problems": problems, "result": result, "time": time},
    }
    parts = {
        f"{prefix}{step}": tables[step]
        for prefix in ("", "every_parameter_")
        for step in ("noise", "match", "temperature")
    }
    return {"config": {}, "parts": parts}


def _edit(record: dict, how: str) -> dict | str:
    """``record`` damaged as ``how`` says, or the text of a file that is no record."""
    curves = record["benchmarks"]["countdown-l3"]["curves"]
    if how == "cpu_seconds a string":
        record["cpu_seconds"]["train"] = "53.4"
    elif how == "cpu_seconds null":
        record["cpu_seconds"]["evaluate"] = None
    elif how == "cpu_seconds negative":
        record["cpu_seconds"]["train"] = -1e9
    elif how == "a code version that is a list":
        record["code"]["run"] = [1]
    elif how == "an all-NaN pass@k curve":
        curves["data"] = [[row[0], math.nan, *row[2:]] for row in curves["data"]]
    elif how == "a count that is a string":
        record["benchmarks"]["countdown-l3"]["problems"]["data"][0][1] = "4"
    elif how == "a start fingerprint that is a number":
        record["start"]["fingerprint"] = 3
    elif how == "a premise search with a NaN pass@1":
        record["premise"] = _premise()
        record["premise"]["parts"]["match"]["search"]["data"][0][1] = math.nan
    elif how == "a premise time that is infinite":
        record["premise"] = _premise()
        record["premise"]["parts"]["every_parameter_noise"]["time"]["data"][0][0] = math.inf
    elif how == "nested 100,000 deep":
        return "[" * 100_000 + "]" * 100_000
    return record


DAMAGE = [
    "cpu_seconds a string",
    "cpu_seconds null",
    "cpu_seconds negative",
    "a code version that is a list",
    "an all-NaN pass@k curve",
    "a count that is a string",
    "a start fingerprint that is a number",
    "a premise search with a NaN pass@1",
    "a premise time that is infinite",
    "nested 100,000 deep",
]


def test_a_whole_record_and_one_with_the_premise_pass(results):
    assert ledger.shape_problems(a_record(), "grpo-s0-abc") == []
    assert ledger.shape_problems(a_record(premise=_premise()), "grpo-s0-abc") == []


@pytest.mark.parametrize("how", DAMAGE)
def test_a_record_of_the_wrong_types_or_values_is_named_and_missing(results, how):
    record = a_record()
    path = ledger.write(record)
    edited = _edit(json.loads(path.read_text()), how)
    path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    with pytest.warns(UserWarning, match=f"damaged record {path}") as caught:
        assert ledger.usable(expected_of(record)) is None  # notebook 02's reader
    assert len(caught) == 1
    if isinstance(edited, dict):  # and such a record is never written
        with pytest.raises(ValueError, match="malformed"):
            ledger.write(edited)


def test_a_record_over_the_size_bound_is_not_read(results, monkeypatch):
    path = ledger.write(a_record())
    monkeypatch.setattr(schema, "MAX_BYTES", 100)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read an oversized file"))
    record, damage = ledger.examine(path)
    assert record is None and "over the 100 a record may" in damage


def _smoke_grpo() -> tuple[list[schedule.Task], str]:
    profile = get_profile("smoke")
    plan = schedule.tasks(profile)
    return plan, next(t.key(profile) for t in plan if t.key(profile).startswith("grpo-s0-"))


@pytest.mark.parametrize("how", DAMAGE)
def test_status_names_a_damaged_record_and_goes_on(results, how):
    profile = get_profile("smoke")
    plan, key = _smoke_grpo()
    path = ledger.record_path("smoke", key)
    path.parent.mkdir(parents=True)
    edited = _edit(a_record(key, "smoke"), how)
    path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named in the table, not in a warning as well
        table = status.status(profile, plan)
    row = table[table["run"] == key].iloc[0]
    assert row["state"] == "damaged" and row["why"]
    assert set(table["state"]) == {"missing", "damaged"}
    # nothing measured, so no task is priced below zero (a --budget of 1e-9 then starts none)
    assert status.estimate(table).isna().all()


def test_status_of_a_record_nested_100000_deep_is_one_line(tmp_path):
    """The issue's command: ``--status`` lists the record as damaged, with why, and exits 0."""
    _, key = _smoke_grpo()
    path = tmp_path / "results" / "smoke" / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text("[" * 100_000 + "]" * 100_000)
    command = [sys.executable, "-m", "psnlib.replication.reproduce", "--profile", "smoke"]
    done = subprocess.run(
        [*command, "--status", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if key in line]
    assert said == [
        f"  damaged: GRPO seed 0 ({key}): it is nested deeper than the 32 levels a record may be"
    ]
