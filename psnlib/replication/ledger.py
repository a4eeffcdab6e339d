"""The run ledger: one small committed record per finished task, the results that travel.

A time-limited job is shorter than the replication and trained weights cannot go through git, so
what travels is a *record*: ``results/<profile>/<run key>.json``, one per task of the plan
(``psnlib.replication.jobs``: a base policy's evaluations, or an RL run with its evaluations and,
for GRPO at the main seeds, the premise on its checkpoint). It is written once, atomically, and
never edited; it holds everything the notebooks and claims read from that task:

- what it is: ``profile``, ``kind`` (``base`` or ``run``), ``arm``, ``seed``, ``settings`` (every
  resolved trainer setting; ``{}`` for a base policy) and ``evaluation`` (the evaluation settings,
  ``psnlib.replication.evaluation.eval_config`` less the run and weights);
- where it started and what it made: ``start`` (the starting policy's name and weights
  fingerprint) and ``weights`` (the evaluated policy's fingerprint);
- ``code``: per kind of computation in it (``base`` or ``run``, and ``premise``, ``probes`` where
  it holds them), the integer version of that kind's results it was made at
  (``psnlib.replication.codeversion.VERSIONS``);
- the tables: ``log`` (one row per training step), ``benchmarks`` (per benchmark the per-problem
  table, correct counts included so unbiased pass@k can be recomputed, and the pass@k curve),
  where the task ran it ``premise`` (its settings and three stored parts per noise site), ``probes``
  (what a notebook shows of this task's policy beyond its evaluations:
  ``psnlib.replication.probes.PROBES``), and for GRPO at the main seeds ``path``: the policies
  its run kept along the way, evaluated like the final one (``{"steps": [N, ...], "weights":
  {"N": fingerprint}, "benchmarks": {"N": {benchmark: tables}}}``, ``path_tables``);
- the machine and the cost: CPU model, torch threads, package versions, CPU seconds of training,
  evaluation, premise, probes and path.

``load`` reads a record and checks its shape: a damaged one (truncated, not JSON, the wrong
schema, a key other than its file's name, a table that is not one) is named in one warning and
treated as missing, so it is recomputed, never used. ``problems`` says why a whole record cannot
be used *here*: another profile, evaluation settings or starting point, a benchmark, premise,
probe or path step it lacks, or a kind's version that is not the current one (*stale*). Records
are never pooled across those.

The ledger's folder is ``$PSNLIB_RESULTS/<profile>/`` where that is set (``make reproduce
--out`` sets it), else the checkout's ``results/<profile>/``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from psnlib.io import ROOT, atomic_write_text, read_json
from psnlib.replication import codeversion
from psnlib.replication.evaluation import PART_TABLES

SCHEMA = 1
RESULTS_ENV = "PSNLIB_RESULTS"
KINDS = ("base", "run")
PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "numpy")
# What every record holds, and the type of each value.
FIELDS: dict[str, type | tuple[type, ...]] = {
    "schema": int,
    "key": str,
    "profile": str,
    "kind": str,
    "arm": str,
    "seed": int,
    "settings": dict,
    "evaluation": dict,
    "start": dict,
    "weights": str,
    "code": dict,
    "log": dict,
    "benchmarks": dict,
    "machine": dict,
    "cpu_seconds": dict,
}
# The columns a benchmark's tables must have for the analysis to read them: as in the store.
TABLE_COLUMNS = PART_TABLES
# premise.PARTS: its stored steps, in order, per noise site (the MLP's, then every parameter's)
PREMISE_PARTS = (
    "noise",
    "match",
    "temperature",
    "every_parameter_noise",
    "every_parameter_match",
    "every_parameter_temperature",
)


def results_root() -> Path:
    """The ledger's root: ``$PSNLIB_RESULTS``, else the checkout's ``results/``."""
    env = os.environ.get(RESULTS_ENV)
    return Path(env).resolve() if env else ROOT / "results"


def profile_dir(profile: str) -> Path:
    """A profile's records: ``<results_root()>/<profile>/``."""
    return results_root() / profile


def record_path(profile: str, key: str) -> Path:
    """The record of task ``key`` at ``profile``."""
    return profile_dir(profile) / f"{key}.json"


def table_json(table: pd.DataFrame) -> dict[str, list]:
    """A table as a record keeps it: its columns and rows (the index dropped)."""
    return {"columns": list(table.columns), "data": table.to_dict(orient="split")["data"]}


def json_table(stored: dict[str, list]) -> pd.DataFrame:
    """The table ``table_json`` wrote."""
    return pd.DataFrame(stored["data"], columns=stored["columns"])


def package_versions() -> dict[str, str]:
    """Python's version and those of the packages whose arithmetic the results depend on."""
    return {"python": platform.python_version(), **{name: version(name) for name in PACKAGES}}


def machine() -> dict[str, Any]:
    """The CPU model, the torch threads and the package versions of this process."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if "model name" in line), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "threads": torch.get_num_threads(), "packages": package_versions()}


def _is_table(value: Any) -> bool:
    if not isinstance(value, dict) or set(value) != {"columns", "data"}:
        return False
    columns, data = value["columns"], value["data"]
    width = len(columns) if isinstance(columns, list) else -1
    return isinstance(data, list) and all(isinstance(r, list) and len(r) == width for r in data)


def shape_problems(record: Any, key: str) -> list[str]:
    """What is wrong with the shape of ``record``, the content of file ``<key>.json``."""
    if not isinstance(record, dict):
        return [f"holds a JSON {type(record).__name__}, not a record"]
    wrong = [
        f"{name} is missing or not a {getattr(kind, '__name__', kind)}"
        for name, kind in FIELDS.items()
        if not isinstance(record.get(name), kind) or isinstance(record.get(name), bool)
    ]
    if wrong:
        return wrong
    if record["schema"] != SCHEMA:
        return [f"schema {record['schema']} is not this code's {SCHEMA}"]
    if record["key"] != key:
        return [f"its key {record['key']!r} is not its file's name {key!r}"]
    if record["kind"] not in KINDS:
        return [f"kind {record['kind']!r} is not one of {KINDS}"]
    if not _is_table(record["log"]):
        wrong.append("log is not a table")
    wrong += _benchmark_problems(record["benchmarks"], "benchmark")
    if "path" in record:
        wrong += _path_problems(record["path"])
    probes = record.get("probes", {})
    if not isinstance(probes, dict) or not all(
        isinstance(tables, dict) and tables and all(_is_table(t) for t in tables.values())
        for tables in probes.values()
    ):
        wrong.append("probes is not a set of named tables")
    premise = record.get("premise")
    if premise is not None:
        parts = premise.get("parts") if isinstance(premise, dict) else None
        if not isinstance(parts, dict) or set(parts) != set(PREMISE_PARTS):
            wrong.append(f"premise does not hold the parts {PREMISE_PARTS}")
        else:
            wrong += [
                f"premise part {part}: {name} is not a table"
                for part, tables in parts.items()
                for name, table in (tables.items() if isinstance(tables, dict) else [("?", 0)])
                if not _is_table(table)
            ]
            wrong += _premise_values(parts)
    return wrong


def _benchmark_problems(benchmarks: Any, where: str) -> list[str]:
    """What is wrong with a set of benchmarks' tables (``TABLE_COLUMNS``); ``where`` names them."""
    if not isinstance(benchmarks, dict):
        return [f"{where}s are not a set of benchmarks"]
    wrong = []
    for benchmark, tables in benchmarks.items():
        for name, columns in TABLE_COLUMNS.items():
            table = tables.get(name) if isinstance(tables, dict) else None
            if not _is_table(table) or not set(columns) <= set(table["columns"]):
                wrong.append(f"{where} {benchmark}: {name} is not a table with {columns}")
            elif not table["data"]:
                wrong.append(f"{where} {benchmark}: {name} has no rows")
    return wrong


def _path_problems(path: Any) -> list[str]:
    """What is wrong with a record's ``path``: its ``steps`` distinct integers, and per step (its
    decimal string) a weights fingerprint and benchmarks' tables."""
    steps = path.get("steps") if isinstance(path, dict) else None
    if not isinstance(steps, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in steps
    ):
        return ["path does not hold a list of integer steps"]
    wrong = [f"path: steps {steps} are not distinct"] if len(set(steps)) != len(steps) else []
    for part, kind in (("weights", str), ("benchmarks", dict)):
        held = path.get(part)
        if not isinstance(held, dict) or set(held) != {str(s) for s in steps}:
            wrong.append(f"path: {part} is not one entry per step {steps}")
        elif not all(isinstance(v, kind) for v in held.values()):
            wrong.append(f"path: {part} are not {kind.__name__}s")
        elif part == "benchmarks":
            for step, benchmarks in held.items():
                wrong += _benchmark_problems(benchmarks, f"path step {step} benchmark")
    return wrong


def _premise_values(parts: dict[str, dict]) -> list[str]:
    """What is wrong with the values the premise's parts must hold: a finite temperature in the
    match and the temperature part of each noise site alike."""
    wrong = []
    for part in (p for p in PREMISE_PARTS if p.endswith(("match", "temperature"))):
        result = parts[part].get("result")
        rows = json_table(result) if result is not None else pd.DataFrame()
        T = rows["temperature"].iloc[0] if "temperature" in rows and len(rows) else None
        if not isinstance(T, int | float) or not math.isfinite(T) or T <= 0:
            wrong.append(f"premise part {part}: temperature {T} is not a finite T > 0")
    return wrong


def load(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none; a damaged one (see ``shape_problems``)
    is named in a warning and treated as missing, so its task is computed again."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        warnings.warn(f"ignoring the record {path}: not a regular file", stacklevel=2)
        return None
    record = read_json(path, "record")  # None, with a warning, where it does not parse
    if record is None:
        return None
    wrong = shape_problems(record, path.stem)
    if wrong:
        warnings.warn(f"ignoring the damaged record {path}: {'; '.join(wrong)}", stacklevel=2)
        return None
    return record


def write(record: dict[str, Any]) -> Path:
    """Write ``record`` to its place (``record_path``) atomically, as compact JSON (one line,
    sorted keys: about 40% of the indented size, and a record is never edited, so never diffed);
    a record whose shape is wrong is a ValueError, and nothing is written."""
    wrong = shape_problems(record, record.get("key", "") if isinstance(record, dict) else "")
    if wrong:
        raise ValueError(f"refusing to write a malformed record: {'; '.join(wrong)}")
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    return atomic_write_text(record_path(record["profile"], record["key"]), text + "\n")


@dataclass(frozen=True)
class Expected:
    """What a task's record must match to be used: its profile and key, the kinds of computation
    it needs (each at its current version), its evaluation settings, the benchmarks it needs, the
    starting policy's fingerprint (None where none is known here), the premise's settings where
    it needs the premise, the probes it needs (``psnlib.replication.probes.PROBES``), and the
    steps of its training path (``path``), each evaluated on ``benchmarks``."""

    profile: str
    key: str
    kinds: tuple[str, ...]
    evaluation: dict[str, Any]
    benchmarks: tuple[str, ...]
    start: str | None = None
    premise: dict[str, Any] | None = None
    probes: tuple[str, ...] = ()
    path: tuple[int, ...] = ()


def problems(record: dict[str, Any], expected: Expected) -> list[str]:
    """Why ``record`` cannot stand for ``expected`` here (empty: it can). A version of a kind
    that is not the current one (``codeversion.current``) makes it *stale*."""
    wrong = []
    if record["profile"] != expected.profile:
        wrong.append(f"made at profile {record['profile']!r}, not {expected.profile!r}")
    for kind in expected.kinds:
        made = record["code"].get(kind)
        if not codeversion.current(kind, made):
            wrong.append(
                f"stale: the {kind} code changed since it was made (version {made}, now "
                f"{codeversion.version(kind)})"
            )
    if record["evaluation"] != expected.evaluation:
        wrong.append("made with other evaluation settings")
    missing = [b for b in expected.benchmarks if b not in record["benchmarks"]]
    if missing:
        wrong.append(f"lacks the benchmarks {missing}")
    if expected.start is not None and record["start"].get("fingerprint") != expected.start:
        wrong.append(
            f"made from another starting policy (weights {record['start'].get('fingerprint')}, "
            f"here {expected.start})"
        )
    if expected.premise is not None:
        premise = record.get("premise")
        if premise is None:
            wrong.append("lacks the premise")
        elif premise.get("config") != expected.premise:
            wrong.append("its premise was made with other settings")
    lacking = [name for name in expected.probes if name not in record.get("probes", {})]
    if lacking:
        wrong.append(f"lacks the probes {lacking}")
    if expected.path:
        wrong += _path_lacks(record.get("path"), expected)
    return wrong


def _path_lacks(path: dict[str, Any] | None, expected: Expected) -> list[str]:
    """Why a record's ``path`` cannot stand for the training path ``expected`` needs."""
    want = sorted(expected.path)
    if path is None:
        return [f"lacks the training path (the policies of steps {want})"]
    if sorted(path["steps"]) != want:
        return [f"its training path holds steps {sorted(path['steps'])}, not {want}"]
    return [
        f"its training path step {step} lacks the benchmarks {missing}"
        for step in want
        if (missing := [b for b in expected.benchmarks if b not in path["benchmarks"][str(step)]])
    ]


def usable(expected: Expected) -> dict[str, Any] | None:
    """The record of ``expected`` if there is one that can be used here (``problems``), else
    None."""
    record = load(record_path(expected.profile, expected.key))
    return record if record is not None and not problems(record, expected) else None


def log_table(record: dict[str, Any]) -> pd.DataFrame:
    """A record's training log (empty for a base policy), one row per step."""
    return json_table(record["log"])


def benchmark_tables(
    record: dict[str, Any], benchmarks: tuple[str, ...]
) -> dict[str, dict[str, pd.DataFrame]]:
    """A record's tables of ``benchmarks``: ``{benchmark: {"problems": ..., "curves": ...}}``."""
    return {
        b: {n: json_table(record["benchmarks"][b][n]) for n in TABLE_COLUMNS} for b in benchmarks
    }


def path_tables(
    record: dict[str, Any], benchmarks: tuple[str, ...]
) -> dict[int, dict[str, dict[str, pd.DataFrame]]]:
    """A record's training path: per kept step (in order), its tables of ``benchmarks`` as
    ``benchmark_tables`` gives the final policy's; ``{}`` where the record has no path."""
    path = record.get("path", {"steps": []})
    return {
        step: benchmark_tables({"benchmarks": path["benchmarks"][str(step)]}, benchmarks)
        for step in sorted(path["steps"])
    }


def premise_parts(record: dict[str, Any]) -> dict[str, dict[str, pd.DataFrame]]:
    """A record's premise parts (``PREMISE_PARTS``), each ``{table name: table}``."""
    parts = record["premise"]["parts"]
    return {part: {n: json_table(t) for n, t in parts[part].items()} for part in PREMISE_PARTS}


def probe_tables(record: dict[str, Any], name: str) -> dict[str, pd.DataFrame]:
    """The tables of probe ``name`` in a record."""
    return {n: json_table(t) for n, t in record["probes"][name].items()}


def parts_json(parts: dict[str, dict[str, pd.DataFrame]]) -> dict[str, dict[str, dict]]:
    """Named groups of tables as a record keeps them (``table_json``)."""
    return {name: {n: table_json(t) for n, t in tables.items()} for name, tables in parts.items()}


def one_start(records: list[dict[str, Any]]) -> None:
    """Refuse to pool records made from different starting policies: a ValueError naming them
    where two records of one starting policy name hold different weights fingerprints."""
    seen: dict[str, tuple[str, str]] = {}
    for record in records:
        name, weights = record["start"].get("policy"), record["start"].get("fingerprint")
        first = seen.setdefault(name, (weights, record["key"]))
        if first[0] != weights:
            raise ValueError(
                f"records {first[1]} and {record['key']} were made from different {name} "
                f"starting policies (weights {first[0]} and {weights}): they cannot be pooled; "
                "re-make the records of one of them from the committed starting point"
            )
