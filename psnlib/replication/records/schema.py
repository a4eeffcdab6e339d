"""The schema of a run ledger record (``psnlib.replication.records.ledger``): what a record must
hold for its readers to use it as stored.

A record is read from a file anyone can edit or pull from git, so nothing in it is trusted:
``read`` refuses a file over ``MAX_BYTES`` or nested deeper than ``MAX_DEPTH`` (a record is 10
deep; JSON nested 100,000 deep would stop Python's reader with a ``RecursionError``), and
``shape_problems`` checks the type of every field the code reads and the values it computes with:
the code versions are integers, the CPU seconds finite and >= 0 (a negative one would pass a
budget), every benchmark's pass@k curve finite in [0, 1] at integer k >= 1 (an all-NaN curve is no
result), every per-problem table integer ``n >= 1`` and ``0 <= correct <= n``, the premise's
tables finite. A record that fails is damage: the ledger names it and treats it as missing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# What a benchmark's stored part must hold (``ResultStore.load``'s ``required``): a part that
# parses but lacks a table, a column or rows is named and recomputed, never averaged without it.
PART_TABLES = {"problems": ("n", "correct"), "curves": ("k", "pass_at_k")}

SCHEMA = 1
KINDS = ("base", "run")
MAX_BYTES = 64 * 2**20  # the largest record is ~0.7 MB
MAX_DEPTH = 32  # a record is 10 deep (a premise part's table's row's list of numbers)
# How far outside [0, 1] a pass@k may lie by rounding (a committed curve holds -5.7e-14).
ROUNDING = 1e-9
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
# Per premise table, the columns that must be finite numbers where the table has them.
PREMISE_FINITE = {
    "search": ("temperature", "pass@1"),
    "result": ("temperature",),
    "time": ("seconds", "cpu_seconds"),
}


def read(path: Path) -> tuple[Any, str | None]:
    """The JSON in record file ``path`` (None, None: there is none), or None and why it cannot
    be a record: over ``MAX_BYTES`` (not read), not JSON, or nested deeper than ``MAX_DEPTH``."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return None, f"it holds {size} bytes, over the {MAX_BYTES} a record may"
        found = json.loads(path.read_bytes())  # UTF-8 (or -16, -32), whatever the locale
    except FileNotFoundError:
        return None, None
    except RecursionError:
        return None, f"it is nested deeper than the {MAX_DEPTH} levels a record may be"
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None, f"it does not parse: {err}"
    if depth_over(found, MAX_DEPTH):
        return None, f"it is nested deeper than the {MAX_DEPTH} levels a record may be"
    return found, None


def depth_over(value: Any, limit: int) -> bool:
    """Whether JSON ``value`` is nested more than ``limit`` levels deep (no recursion)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        if isinstance(item, dict | list):
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return False


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def is_table(value: Any) -> bool:
    """Whether ``value`` is a table as a record keeps it: distinct string ``columns`` and
    ``data`` rows of their width."""
    if not isinstance(value, dict) or set(value) != {"columns", "data"}:
        return False
    columns, data = value["columns"], value["data"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        return False
    width = len(columns) if len(set(columns)) == len(columns) else -1
    return isinstance(data, list) and all(isinstance(r, list) and len(r) == width for r in data)


def _column(table: dict, name: str) -> list[Any]:
    i = table["columns"].index(name)
    return [row[i] for row in table["data"]]


def shape_problems(record: Any, key: str) -> list[str]:
    """What is wrong with ``record``, the content of file ``<key>.json``: its shape, the types
    of the fields the code reads and the values it computes with (see the module docstring)."""
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
    wrong += _field_problems(record)
    if not is_table(record["log"]):
        wrong.append("log is not a table")
    elif not all(_number(v) or v is None for row in record["log"]["data"] for v in row):
        wrong.append("log holds a value that is not a number")
    wrong += _benchmark_problems(record["benchmarks"], "benchmark")
    if "path" in record:
        wrong += _path_problems(record["path"])
    probes = record.get("probes", {})
    if not isinstance(probes, dict) or not all(
        isinstance(tables, dict) and tables and all(is_table(t) for t in tables.values())
        for tables in probes.values()
    ):
        wrong.append("probes is not a set of named tables")
    if record.get("premise") is not None:
        wrong += _premise_problems(record["premise"])
    return wrong


def _field_problems(record: dict[str, Any]) -> list[str]:
    """What is wrong with the values of a record's small fields: its seed, code versions,
    starting point, machine and CPU seconds."""
    wrong = [] if record["seed"] >= 0 else [f"seed {record['seed']} is negative"]
    wrong += [
        f"code: the version of {kind!r} is {made!r}, not an integer"
        for kind, made in record["code"].items()
        if not _integer(made)
    ]
    start = record["start"]
    if not all(isinstance(start.get(name), str) for name in ("policy", "fingerprint")):
        wrong.append("start does not name its policy and fingerprint (strings)")
    held = record["machine"]
    if not isinstance(held.get("cpu"), str) or not _integer(held.get("threads")):
        wrong.append("machine does not hold its cpu (a string) and threads (an integer)")
    seconds = record["cpu_seconds"]
    if "train" not in seconds:
        wrong.append("cpu_seconds lacks train")
    wrong += [
        f"cpu_seconds {name} is {value!r}, not a finite number of seconds >= 0"
        for name, value in seconds.items()
        if not _finite(value) or value < 0
    ]
    return wrong


def _benchmark_problems(benchmarks: Any, where: str) -> list[str]:
    """What is wrong with a set of benchmarks' tables (``TABLE_COLUMNS``, ``_values``); ``where``
    names them."""
    if not isinstance(benchmarks, dict):
        return [f"{where}s are not a set of benchmarks"]
    wrong = []
    for benchmark, tables in benchmarks.items():
        for name, columns in TABLE_COLUMNS.items():
            table = tables.get(name) if isinstance(tables, dict) else None
            if not is_table(table) or not set(columns) <= set(table["columns"]):
                wrong.append(f"{where} {benchmark}: {name} is not a table with {columns}")
            elif not table["data"]:
                wrong.append(f"{where} {benchmark}: {name} has no rows")
            else:
                wrong += [f"{where} {benchmark}: {name} {w}" for w in _values(name, table)]
    return wrong


def _values(name: str, table: dict) -> list[str]:
    """What is wrong with the values of a ``problems`` or ``curves`` table: a count that is not
    an integer ``n >= 1`` with ``0 <= correct <= n``, a k that is not an integer >= 1, a pass@k
    that is not finite in [0, 1] (to ``ROUNDING``)."""
    if name == "problems":
        pairs = zip(_column(table, "n"), _column(table, "correct"), strict=True)
        if not all(_integer(n) and _integer(c) and 0 <= c <= n and n >= 1 for n, c in pairs):
            return ["holds a count that is not an integer n >= 1 with 0 <= correct <= n"]
        return []
    if not all(_integer(k) and k >= 1 for k in _column(table, "k")):
        return ["holds a k that is not an integer >= 1"]
    if not all(_finite(v) and -ROUNDING <= v <= 1 + ROUNDING for v in _column(table, "pass_at_k")):
        return ["holds a pass@k that is not a finite number in [0, 1]"]
    return []


def _path_problems(path: Any) -> list[str]:
    """What is wrong with a record's ``path``: its ``steps`` distinct integers, and per step (its
    decimal string) a weights fingerprint and benchmarks' tables."""
    steps = path.get("steps") if isinstance(path, dict) else None
    if not isinstance(steps, list) or not all(_integer(s) for s in steps):
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


def _premise_problems(premise: Any) -> list[str]:
    """What is wrong with a record's premise: its ``parts`` (``PREMISE_PARTS``) named tables,
    their counts (``_values``) and ``PREMISE_FINITE`` columns finite, and a finite temperature
    T > 0 in the match and the temperature part of each noise site alike."""
    parts = premise.get("parts") if isinstance(premise, dict) else None
    if not isinstance(parts, dict) or set(parts) != set(PREMISE_PARTS):
        return [f"premise does not hold the parts {PREMISE_PARTS}"]
    wrong = []
    for part, tables in parts.items():
        if not isinstance(tables, dict) or not all(is_table(t) for t in tables.values()):
            wrong.append(f"premise part {part}: a table is not a table")
            continue
        problems = tables.get("problems")
        if problems is not None and {"n", "correct"} <= set(problems["columns"]):
            wrong += [f"premise part {part}: problems {w}" for w in _values("problems", problems)]
        wrong += [
            f"premise part {part}: {name} {column} holds a value that is not finite"
            for name, columns in PREMISE_FINITE.items()
            if name in tables
            for column in columns
            if column in tables[name]["columns"]
            and not all(_finite(v) for v in _column(tables[name], column))
        ]
        if part.endswith(("match", "temperature")):
            result = tables.get("result")
            has = result is not None and "temperature" in result["columns"]
            temperatures = _column(result, "temperature") if has else []
            T = temperatures[0] if temperatures else None
            if not _finite(T) or T <= 0:
                wrong.append(f"premise part {part}: temperature {T} is not a finite T > 0")
    return wrong
