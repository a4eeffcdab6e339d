"""The records' versions, decided at review time: the digest tripwire and the proof that pins it."""

import dataclasses
import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest

from psnlib.paths import ROOT
from psnlib.replication.compute import proof
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import codeversion, ledger, status

COMMITTED = ROOT / "results" / "cpu"
CHEAP = "base-0094015387a6"  # the committed record that took the fewest CPU seconds (50)


def test_every_kinds_code_is_pinned():
    """The tripwire: a change of the code a kind of record depends on is decided at review."""
    moved = codeversion.moved()
    assert not moved, codeversion.tripwire(moved)


def test_every_committed_record_states_its_kinds_version():
    records = sorted(COMMITTED.glob("*.json"))
    assert len(records) >= 262
    for path in records:
        record = json.loads(path.read_text())
        code = record["code"]
        assert record["kind"] in code, path.name
        for kind, made in code.items():
            assert type(made) is int and 1 <= made <= codeversion.VERSIONS[kind], (path.name, kind)


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of psnlib's sources that ``codeversion`` digests instead of the real ones, with
    the digests of the copy as it is pinned (whatever the working tree's state)."""
    copy = tmp_path / "psnlib"
    shutil.copytree(codeversion.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeversion, "PACKAGE", copy)
    for kind in codeversion.VERSIONS:
        monkeypatch.setitem(codeversion.DIGESTS, kind, codeversion.code_digest(kind))
    return copy


def _pinned_in(source: Path) -> tuple[dict[str, int], dict[str, str]]:
    """``VERSIONS`` and ``DIGESTS`` as the module at ``source`` defines them."""
    spec = importlib.util.spec_from_file_location("pinned_codeversion", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VERSIONS, module.DIGESTS


def test_an_arithmetic_edit_in_noise_trips_the_run_kind_until_bumped_or_repinned(package_copy):
    noise = package_copy / "noise.py"
    line = "sigma = sigma * param"  # the relative noise's scale
    assert line in noise.read_text()
    noise.write_text(noise.read_text().replace(line, "sigma = 2 * sigma * param", 1))
    moved = codeversion.moved()
    assert "run" in moved and "premise" in moved
    message = codeversion.tripwire(moved)
    assert "The run code changed" in message
    assert "bump VERSIONS['run']" in message and f"DIGESTS['run'] = \"{moved['run']}\"" in message
    assert "make prove-version KIND=run" in message

    # one way out: its results change, the version is bumped and its records are stale
    source = package_copy / "replication" / "records" / "codeversion.py"
    record = json.loads((COMMITTED / "psn-s4-bdeeb1d55bef.json").read_text())
    assert codeversion.current("run", record["code"]["run"])
    with pytest.MonkeyPatch.context() as bumped:
        bumped.setitem(codeversion.VERSIONS, "run", codeversion.VERSIONS["run"] + 1)
        bumped.setitem(codeversion.DIGESTS, "run", moved["run"])
        assert "run" not in codeversion.moved()
        assert not codeversion.current("run", record["code"]["run"])
    # the other: a proof re-pins the digest (here without one), the version stays
    proof.pin({"run": moved["run"]})
    versions, digests = _pinned_in(source)
    assert digests["run"] == moved["run"] and versions == codeversion.VERSIONS


def test_moving_a_function_between_compute_modules_leaves_every_record_current(
    package_copy, monkeypatch
):
    """A pure move (here ``noise.noise_seed`` into a module of its own) moves a digest, which
    the tripwire names, and stales no record: 'current' is the version a record states."""
    noise = package_copy / "noise.py"
    text = noise.read_text()
    start = text.index("def noise_seed(")
    end = text.index("\n\n\ndef ", start) + 3
    (package_copy / "noise_seeds.py").write_text(
        '"""Noise seeds."""\n\nimport hashlib\n\n\n' + text[start:end].rstrip() + "\n"
    )
    imports = "from torch import nn\n"
    noise.write_text(
        text[:start].replace(imports, imports + "\nfrom psnlib.noise_seeds import noise_seed\n")
        + text[end:]
    )
    assert "def noise_seed" not in noise.read_text()
    assert "run" in codeversion.moved()
    monkeypatch.setenv(ledger.RESULTS_ENV, str(ROOT / "results"))  # the committed records
    table = status.status(get_profile("cpu"))
    states = table[table["state"] != "missing"]["state"].value_counts().to_dict()  # committed
    assert states == {"done": len(list(COMMITTED.glob("*.json")))}


# ------------------------------------------------------------------------------------ the proof


def _committed(key: str = CHEAP) -> dict:
    return json.loads((COMMITTED / f"{key}.json").read_text())


def test_the_comparison_leaves_out_what_a_machine_or_clock_makes():
    committed = _committed()
    made = json.loads(json.dumps(committed))
    made |= {"cpu_seconds": {"train": 0.0}, "made": "tomorrow", "machine": {"cpu": "other"}}
    made["code"] = {"base": 99}
    curves = made["benchmarks"]["countdown-l1"]["curves"]
    seconds = curves["columns"].index("seconds")
    curves["data"][0][seconds] += 1.0
    assert proof.first_difference(committed, made) is None
    k = curves["columns"].index("pass_at_k")
    curves["data"][3][k] = math.nextafter(curves["data"][3][k], 2.0)  # one bit
    assert proof.first_difference(committed, made).startswith(
        "benchmarks.countdown-l1.curves row 3, column pass_at_k: committed "
    )


@pytest.mark.parametrize(
    ("one", "two", "differs"),
    [
        (math.nan, math.nan, False),
        (1, 1.0, True),  # a type is a result too: a CSV writes them apart
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ([1, 2], [1, 2, 3], True),
        ("x", "x", False),
    ],
)
def test_values_are_equal_only_in_type_and_value(one, two, differs):
    found = proof.first_difference({"field": one}, {"field": two})
    assert (found is not None) == differs
    assert found is None or found.startswith("field")


def test_the_cheapest_choice_holds_every_kind_asked_for():
    costs = {
        frozenset({"run"}): 56.0,
        frozenset({"base"}): 50.0,
        frozenset({"run", "premise"}): 333.0,
        frozenset({"run", "probes"}): 165.0,
        frozenset({"base", "probes"}): 184.0,
        frozenset({"run", "premise", "probes"}): 623.0,
    }
    assert proof.cover(costs, {"run"}) == [frozenset({"run"})]
    assert set(proof.cover(costs, {"base", "run", "premise", "probes"})) == {
        frozenset({"base", "probes"}),
        frozenset({"run", "premise"}),
    }
    with pytest.raises(
        ValueError, match=r"no usable committed record holds the kinds \['premise'\]"
    ):
        proof.cover({frozenset({"run"}): 1.0}, {"premise"})


def test_a_record_the_plan_asks_more_benchmarks_of_still_proves_its_code(monkeypatch):
    """A plan that adds a benchmark to every task leaves no record "done"; the proof re-computes
    the cheapest one on the benchmarks it holds (the plan's order), not on the plan's."""
    monkeypatch.setenv(ledger.RESULTS_ENV, str(ROOT / "results"))  # the committed records
    planned = proof.schedule.tasks

    def more(profile):
        return [
            dataclasses.replace(t, benchmarks=(*t.benchmarks, "gsm8k")) for t in planned(profile)
        ]

    monkeypatch.setattr(proof.schedule, "tasks", more)
    cpu = get_profile("cpu")
    assert set(status.status(cpu, more(cpu))["state"]) <= {"unusable", "missing"}
    ((task, record),) = proof.choose(cpu, {"base"})
    assert record["key"] == CHEAP and set(record["code"]) == {"base"}
    assert task.benchmarks == tuple(b for b in cpu.benchmarks if b in record["benchmarks"])
    assert set(task.benchmarks) == set(record["benchmarks"]) and "gsm8k" not in task.benchmarks


@pytest.fixture
def one_record(monkeypatch, package_copy):
    """The proof re-computes the committed ``CHEAP`` record only, pinning into the copy's
    ``codeversion`` source, which it returns."""
    committed = _committed()
    monkeypatch.setattr(proof, "choose", lambda profile, kinds: [(None, committed)])
    return package_copy / "replication" / "records" / "codeversion.py"


def test_the_proof_fails_when_a_recomputed_record_differs(one_record, monkeypatch, capsys):
    def tampered(profile, task):
        made = _committed()
        table = made["benchmarks"]["countdown-l3"]["problems"]
        table["data"][5][table["columns"].index("correct")] += 1
        return made

    monkeypatch.setattr(proof, "recompute", tampered)
    before = one_record.read_text()
    assert proof.main(["--kind", "base"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS" in out and "benchmarks.countdown-l3.problems row 5, column correct" in out
    assert one_record.read_text() == before  # nothing pinned


def test_the_proof_pins_every_kind_of_a_bit_exact_record(one_record, monkeypatch, capsys):
    def again(profile, task):
        return _committed() | {"cpu_seconds": {"evaluate": 1.0}, "made": "now"}

    monkeypatch.setitem(codeversion.DIGESTS, "base", "0" * 12)  # as if the base code moved
    assert proof.prove(get_profile("cpu"), {"base"}, make=again)
    assert "bit-exact on every result field" in capsys.readouterr().out
    versions, digests = _pinned_in(one_record)
    assert digests["base"] == codeversion.code_digest("base") and versions == codeversion.VERSIONS
