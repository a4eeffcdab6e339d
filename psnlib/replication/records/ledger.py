"""The run ledger: one small committed record per finished task, the results that travel.

A time-limited job is shorter than the replication and trained weights cannot go through git, so
what travels is a *record*: ``results/<profile>/<run key>.json``, one per task of the plan
(``psnlib.replication.compute.jobs``: a base policy's evaluations, or an RL run with its evaluations
and, for GRPO at the main seeds, the premise on its checkpoint). It is written once, atomically, and
never edited; it holds everything the notebooks and claims read from that task:

- what it is: ``profile``, ``kind`` (``base`` or ``run``), ``arm``, ``seed``, ``settings`` (every
  resolved trainer setting; ``{}`` for a base policy) and ``evaluation`` (the evaluation settings,
  ``psnlib.replication.compute.evaluation.eval_config`` less the run and weights);
- where it started and what it made: ``start`` (the starting policy's name and weights
  fingerprint) and ``weights`` (the evaluated policy's fingerprint);
- ``code``: per kind of computation in it (``base`` or ``run``, and ``premise``, ``probes`` where
  it holds them), the integer version of that kind's results it was made at
  (``psnlib.replication.records.codeversion.VERSIONS``);
- the tables: ``log`` (one row per training step), ``benchmarks`` (per benchmark the per-problem
  table, correct counts included so unbiased pass@k can be recomputed, and the pass@k curve),
  where the task ran it ``premise`` (its settings and three stored parts per noise site), ``probes``
  (what a notebook shows of this task's policy beyond its evaluations:
  ``psnlib.replication.plan.probes.PROBES``), and for GRPO at the main seeds ``path``: the policies
  its run kept along the way, evaluated like the final one (``{"steps": [N, ...], "weights":
  {"N": fingerprint}, "benchmarks": {"N": {benchmark: tables}}}``, ``path_tables``);
- the machine and the cost: CPU model, torch threads, package versions, CPU seconds of training,
  evaluation, premise, probes and path.

``load`` reads a record and checks it against its schema (``psnlib.replication.records.schema``:
its size and depth, the type of every field the code reads, the values it computes with): a
damaged one (truncated, not JSON, the wrong schema, a key other than its file's name, a table
that is not one, a count, pass@k or CPU second that is not one) is named in one warning and
treated as missing, so it is recomputed, never used. ``problems`` says why a whole record cannot
be used *here*: another profile, evaluation settings or starting point, a benchmark, premise,
probe or path step it lacks, or a kind's version that is not the current one (*stale*). Records
are never pooled across those.

The ledger's folder is ``$PSNLIB_RESULTS/<profile>/`` where that is set (``make reproduce
--out`` sets it), else the checkout's ``results/<profile>/``.
"""

from __future__ import annotations

import json
import os
import platform
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from psnlib.io import atomic_write_text
from psnlib.paths import ROOT
from psnlib.replication.records import codeversion, schema
from psnlib.replication.records.schema import PREMISE_PARTS, TABLE_COLUMNS, shape_problems
from psnlib.replication.records.schema import SCHEMA as SCHEMA  # what jobs.run_task stamps

RESULTS_ENV = "PSNLIB_RESULTS"
PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "numpy")


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


def examine(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The record at ``path`` and ``""``; or None and why it is damage (not a regular file, over
    ``schema.MAX_BYTES``, not JSON, nested too deep, or ``shape_problems``); or None and
    ``""`` where there is none."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return None, "not a regular file"
    record, damage = schema.read(path)
    if record is None:
        return None, damage or ""
    wrong = shape_problems(record, path.stem)
    return (None, "; ".join(wrong)) if wrong else (record, "")


def load(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none; a damaged one (``examine``) is named in
    a warning and treated as missing, so its task is computed again."""
    record, damage = examine(path)
    if damage:
        warnings.warn(f"ignoring the damaged record {path}: {damage}", stacklevel=2)
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
    it needs the premise, the probes it needs (``psnlib.replication.plan.probes.PROBES``), and the
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
