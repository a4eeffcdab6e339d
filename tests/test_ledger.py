"""The run ledger: records' shape and damage, staleness by version, code digests, pooling,
atomicity."""

import json
import math
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest

from psnlib.replication.records import codeversion, ledger

PACKAGE = codeversion.PACKAGE


def _table(frame: pd.DataFrame) -> dict:
    return ledger.table_json(frame)


def a_record(key: str = "grpo-s0-abc", profile: str = "smoke", **changes) -> dict:
    """A record of the shape ``jobs.run_task`` writes, with made-up tables."""
    problems = pd.DataFrame({"problem": [0, 1], "n": [4, 4], "correct": [1, 0]})
    curves = pd.DataFrame({"k": [1, 4], "pass_at_k": [0.125, 0.5], "lo": [0.0, 0.0]})
    record = {
        "schema": ledger.SCHEMA,
        "key": key,
        "profile": profile,
        "kind": "run",
        "arm": "grpo",
        "seed": 0,
        "settings": {"sigma": 0.0},
        "evaluation": {"problems": 2, "samples": 4, "ks": [1, 4]},
        "start": {"policy": "qwen2-tiny", "fingerprint": "f00"},
        "weights": "beef",
        "code": {"run": codeversion.VERSIONS["run"]},
        "log": _table(pd.DataFrame({"step": [1, 2], "reward": [0.1, 0.2]})),
        "benchmarks": {"countdown-l3": {"problems": _table(problems), "curves": _table(curves)}},
        "machine": ledger.machine(),
        "cpu_seconds": {"train": 1.0, "evaluate": 2.0, "premise": 0.0},
    }
    return record | changes


def expected_of(record: dict, **changes) -> ledger.Expected:
    base = ledger.Expected(
        profile=record["profile"],
        key=record["key"],
        kinds=("run",),
        evaluation=record["evaluation"],
        benchmarks=("countdown-l3",),
        start=record["start"]["fingerprint"],
    )
    return ledger.Expected(**{**base.__dict__, **changes})


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    return tmp_path / "results"


def test_a_written_record_reads_back_as_the_same_tables(results):
    record = a_record()
    path = ledger.write(record)
    assert path == results / "smoke" / "grpo-s0-abc.json"
    loaded = ledger.usable(expected_of(record))
    assert loaded is not None
    tables = ledger.benchmark_tables(loaded, ("countdown-l3",))["countdown-l3"]
    assert tables["problems"]["correct"].tolist() == [1, 0]
    assert tables["curves"]["pass_at_k"].tolist() == [0.125, 0.5]  # floats exact through JSON
    assert ledger.log_table(loaded)["reward"].tolist() == [0.1, 0.2]


def _damage(path: Path, how: str) -> None:
    record = json.loads(path.read_text())
    if how == "truncated":
        path.write_text(path.read_text()[:200])
    elif how == "not json":
        path.write_text("<html>not a record</html>")
    elif how == "a list":
        path.write_text("[]")
    elif how == "wrong schema":
        path.write_text(json.dumps(record | {"schema": 99}))
    elif how == "another key":
        path.write_text(json.dumps(record | {"key": "psn-s0-xyz"}))
    elif how == "no tables":  # valid JSON, a benchmark without its tables
        path.write_text(json.dumps(record | {"benchmarks": {"countdown-l3": {}}}))
    elif how == "empty table":
        empty = {"columns": ["n", "correct"], "data": []}
        tables = {"problems": empty, "curves": record["benchmarks"]["countdown-l3"]["curves"]}
        path.write_text(json.dumps(record | {"benchmarks": {"countdown-l3": tables}}))
    elif how == "ragged table":
        log = {"columns": ["step", "reward"], "data": [[1, 0.1], [2]]}
        path.write_text(json.dumps(record | {"log": log}))
    elif how == "seed a string":
        path.write_text(json.dumps(record | {"seed": "0"}))


DAMAGES = [
    "truncated",
    "not json",
    "a list",
    "wrong schema",
    "another key",
    "no tables",
    "empty table",
    "ragged table",
    "seed a string",
]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_record_is_named_and_never_used(results, how):
    record = a_record()
    path = ledger.write(record)
    _damage(path, how)
    with pytest.warns(UserWarning, match=str(path)):
        assert ledger.usable(expected_of(record)) is None


def test_a_premise_with_a_nan_temperature_is_damage_not_a_match(results):
    part = {"problems": _table(pd.DataFrame({"n": [4], "correct": [1]}))}
    result = _table(pd.DataFrame({"temperature": [math.nan], "matched": [True]}))
    good = _table(pd.DataFrame({"temperature": [1.1], "matched": [True]}))
    parts = {}
    for site, T in (("", result), ("every_parameter_", good)):  # the MLP's T is NaN
        parts |= {
            f"{site}noise": part,
            f"{site}match": {"search": _table(pd.DataFrame({"temperature": [1.0]})), "result": T},
            f"{site}temperature": part | {"result": T},
        }
    assert set(parts) == set(ledger.PREMISE_PARTS)
    record = a_record(premise={"config": {}, "parts": parts})
    wrong = ledger.shape_problems(record, record["key"])
    assert [w for w in wrong if "temperature nan" in w] == [
        "premise part match: temperature nan is not a finite T > 0",
        "premise part temperature: temperature nan is not a finite T > 0",
    ]
    with pytest.raises(ValueError, match="malformed record"):
        ledger.write(record)
    assert not (results / "smoke").exists()  # nothing written


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"profile": "cpu"}, "made at profile 'smoke', not 'cpu'"),
        ({"start": "0ther"}, "made from another starting policy"),
        ({"benchmarks": ("countdown-l3", "countdown-l5")}, "lacks the benchmarks"),
        ({"evaluation": {"problems": 100}}, "other evaluation settings"),
        ({"kinds": ("run", "premise"), "premise": {"sigma": 1}}, "lacks the premise"),
    ],
)
def test_a_record_is_not_used_where_it_does_not_belong(results, change, reason):
    record = a_record()
    ledger.write(record)
    wrong = ledger.problems(record, expected_of(record, **change))
    assert any(reason in w for w in wrong), wrong
    assert ledger.usable(expected_of(record, **change)) is None


def test_records_of_two_starting_points_are_never_pooled():
    one = a_record("grpo-s0-a")
    two = a_record("grpo-s1-b", start={"policy": "qwen2-tiny", "fingerprint": "other"})
    ledger.one_start([one, a_record("grpo-s2-c")])  # the same start: fine
    with pytest.raises(ValueError, match="grpo-s0-a and grpo-s1-b .* cannot be pooled"):
        ledger.one_start([one, two])


def test_two_writers_of_one_record_leave_one_whole_record(results):
    record = a_record()
    errors = []

    def write_many(seed: int) -> None:
        try:
            for _ in range(30):
                ledger.write(record | {"seed": seed})
        except Exception as err:  # pragma: no cover - the failure being tested for
            errors.append(err)

    threads = [threading.Thread(target=write_many, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    folder = results / "smoke"
    assert [p.name for p in folder.iterdir()] == ["grpo-s0-abc.json"]  # no temp file left
    assert ledger.load(folder / "grpo-s0-abc.json")["seed"] in (0, 1)


def test_a_write_killed_midway_leaves_no_record(results, monkeypatch):
    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # as a kill lands while the JSON is written

    monkeypatch.setattr(json, "dumps", killed)
    with pytest.raises(KeyboardInterrupt):
        ledger.write(a_record())
    monkeypatch.undo()
    folder = results / "smoke"
    assert not folder.exists() or not list(folder.iterdir())


# ------------------------------------------------------------------------ versions, digests


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of psnlib's sources that ``codeversion`` digests instead of the real ones."""
    copy = tmp_path / "psnlib"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeversion, "PACKAGE", copy)
    return copy


def digests() -> dict[str, str]:
    return {kind: codeversion.code_digest(kind) for kind in codeversion.VERSIONS}


def test_the_digest_reads_the_sources_it_names(package_copy):
    modules = codeversion.closure(codeversion.ROOTS["run"])
    assert {"psnlib.noise", "psnlib.trainer.trainer", "psnlib.replication.compute.runs"} <= set(
        modules
    )
    assert not set(modules) & codeversion.ANALYSIS
    before = digests()
    (package_copy / "noise.py").write_text("")
    assert digests()["run"] != before["run"]


def test_an_edited_docstring_comment_or_layout_in_noise_moves_no_digest(package_copy):
    before = digests()
    noise = package_copy / "noise.py"
    text = noise.read_text()
    first_doc = text.index('"""') + 3
    text = text[:first_doc] + "Reworded: " + text[first_doc:]  # the module's docstring
    text = text.replace("\ndef ", "\n# a new comment\n\n\ndef ", 1)  # a comment, blank lines
    noise.write_text(text)
    assert digests() == before


def test_a_changed_line_in_the_perturbation_moves_the_digests_of_the_kinds_that_use_it(
    package_copy,
):
    before = digests()
    noise = package_copy / "noise.py"
    text = noise.read_text()
    line = "sigma = sigma * param"  # the relative noise's scale
    assert line in text
    noise.write_text(text.replace(line, "sigma = 2 * sigma * param", 1))
    after = digests()
    assert all(after[kind] != before[kind] for kind in ("run", "premise", "probes"))


def test_a_changed_claim_or_figure_moves_no_digest(package_copy):
    before = digests()
    for name in ("analysis/verdicts.py", "report/plots.py", "analysis/summaries.py"):
        path = package_copy / "replication" / name
        path.write_text(path.read_text() + "\nCHANGED = 1\n")
    assert digests() == before


def test_a_record_of_an_older_version_is_stale_and_one_of_moved_code_is_not(
    results, package_copy, monkeypatch
):
    record = a_record()
    ledger.write(record)
    trainer = package_copy / "trainer" / "trainer.py"
    trainer.write_text(trainer.read_text() + "\nCHANGED = 1\n")  # moves the run digest only
    assert ledger.usable(expected_of(record)) is not None
    monkeypatch.setitem(codeversion.VERSIONS, "run", record["code"]["run"] + 1)  # a bump
    wrong = ledger.problems(record, expected_of(record))
    assert wrong == [
        f"stale: the run code changed since it was made (version {record['code']['run']}, now "
        f"{record['code']['run'] + 1})"
    ]
    assert ledger.usable(expected_of(record)) is None
