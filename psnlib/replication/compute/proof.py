"""The proof that changed code leaves a kind's records unchanged: re-compute one, compare, pin.

``make prove-version KIND=run`` (``python -m psnlib.replication.compute.proof --kind run``) is the
second way out of the versions' tripwire (``psnlib.replication.records.codeversion``): it
re-computes, on the code of the working tree, the cheapest committed record of each kind asked for
(``choose``: the cheapest committed records of the run ledger that together hold every such kind,
by the CPU seconds they took, each on the benchmarks it holds), compares each with the committed
one on every result field (``first_difference``) and, where all are equal, pins the digest of
every kind they hold (``pin``); the first field that differs is printed and the command fails,
pinning nothing. Without ``--kind`` it proves every kind whose digest moved.

A record is re-computed as ``make reproduce`` computes it (``jobs.run_task``, one torch thread)
but into a temporary folder (``PSNLIB_RESULTS`` and ``PSNLIB_DATA``), so no cache is reused and no
committed record is touched. What a machine or a clock makes is not compared (``UNCOMPARED``: the
versions, CPU model, package versions, CPU seconds, timestamps; ``TIMING_COLUMNS`` of a table);
everything else must be equal in value and type, a NaN where the other has a NaN.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from psnlib.io import atomic_write_text
from psnlib.replication.compute import jobs
from psnlib.replication.plan import schedule
from psnlib.replication.plan.profiles import Profile, get_profile
from psnlib.replication.records import codeversion, ledger, paths, status
from psnlib.replication.records.tables import task_expectation

# A record's fields that a machine or a clock makes, and a table's columns that a clock makes.
UNCOMPARED = ("code", "cpu_seconds", "machine", "made")
TIMING_COLUMNS = ("seconds", "cpu_seconds", "step_time", "step_cpu_time", "build_seconds")
DATA_ENV = "PSNLIB_DATA"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"columns", "data"}


def _same(a: Any, b: Any) -> bool:
    """Two JSON scalars are equal in type and value (a NaN equals a NaN)."""
    return type(a) is type(b) and (a == b or (isinstance(a, float) and a != a and b != b))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _table_difference(where: str, one: dict, two: dict) -> str | None:
    """The first difference of two tables, their ``TIMING_COLUMNS`` left out."""
    keep = [[i for i, c in enumerate(t["columns"]) if c not in TIMING_COLUMNS] for t in (one, two)]
    columns = [[t["columns"][i] for i in k] for t, k in zip((one, two), keep, strict=True)]
    if columns[0] != columns[1]:
        return f"{where}: columns {columns[0]} committed, {columns[1]} re-computed"
    if len(one["data"]) != len(two["data"]):
        return f"{where}: {len(one['data'])} rows committed, {len(two['data'])} re-computed"
    for row, (a, b) in enumerate(zip(one["data"], two["data"], strict=True)):
        for column, i, j in zip(columns[0], keep[0], keep[1], strict=True):
            if not _same(a[i], b[j]):
                return (
                    f"{where} row {row}, column {column}: committed {_show(a[i])}, "
                    f"re-computed {_show(b[j])}"
                )
    return None


def first_difference(committed: Any, made: Any, where: str = "") -> str | None:
    """The first result field in which record ``made`` differs from ``committed`` (in sorted key
    order, tables row by row), as ``<path>: committed X, re-computed Y``; None where none does.
    At the top level ``UNCOMPARED`` is left out, in every table ``TIMING_COLUMNS``."""
    if _is_table(committed) and _is_table(made):
        return _table_difference(where, committed, made)
    if isinstance(committed, dict) and isinstance(made, dict):
        skip = UNCOMPARED if not where else ()
        keys = [set(committed) - set(skip), set(made) - set(skip)]
        if keys[0] != keys[1]:
            return (
                f"{where or 'the record'}: only committed {sorted(keys[0] - keys[1])}, only "
                f"re-computed {sorted(keys[1] - keys[0])}"
            )
        found = (
            first_difference(committed[k], made[k], f"{where}.{k}".lstrip("."))
            for k in sorted(keys[0])
        )
        return next((d for d in found if d is not None), None)
    if isinstance(committed, list) and isinstance(made, list) and len(committed) == len(made):
        found = (
            first_difference(a, b, f"{where}[{i}]")
            for i, (a, b) in enumerate(zip(committed, made, strict=True))
        )
        return next((d for d in found if d is not None), None)
    if _same(committed, made):
        return None
    return f"{where or 'the record'}: committed {_show(committed)}, re-computed {_show(made)}"


def cover(costs: dict[frozenset[str], float], kinds: set[str]) -> list[frozenset[str]]:
    """The cheapest choice among ``costs`` (a record's set of kinds -> what re-computing it
    costs) whose sets together hold every one of ``kinds``; a ValueError where none does."""
    choices = (
        combo
        for n in range(1, len(costs) + 1)
        for combo in itertools.combinations(sorted(costs, key=sorted), n)
        if kinds <= set().union(*combo)
    )
    best = min(choices, key=lambda combo: sum(costs[c] for c in combo), default=None)
    if best is None:
        held = sorted(set().union(*costs)) if costs else []
        raise ValueError(
            f"no usable committed record holds the kinds {sorted(kinds)}; records hold {held}"
        )
    return list(best)


def own_task(profile: Profile, task: schedule.Task, record: dict[str, Any]) -> schedule.Task | None:
    """``task`` evaluated on the benchmarks its committed ``record`` holds (the plan's order,
    then the record's others), where the record is usable for those: a record the plan has
    since asked more benchmarks of is still a proof of its code. None where it is not usable."""
    have = record["benchmarks"]
    benchmarks = (
        *(b for b in task.benchmarks if b in have),
        *(b for b in have if b not in task.benchmarks),
    )
    own = dataclasses.replace(task, benchmarks=benchmarks)
    return None if ledger.problems(record, task_expectation(profile, own)) else own


def choose(profile: Profile, kinds: set[str]) -> list[tuple[schedule.Task, dict[str, Any]]]:
    """The cheapest committed records of ``profile``'s ledger that together hold ``kinds``
    (``cover``, by the CPU seconds each took), each with its task on its own benchmarks
    (``own_task``): the records to re-compute."""
    plan = schedule.tasks(profile)
    table = status.status(profile, plan)
    cheapest: dict[frozenset[str], tuple[float, schedule.Task, dict[str, Any]]] = {}
    for task, row in zip(plan, table.itertuples(), strict=True):
        if row.state not in ("done", "unusable"):
            continue
        record = ledger.load(ledger.record_path(profile.name, row.run))
        task = own_task(profile, task, record)
        if task is None:
            continue
        held = frozenset(record["code"])
        if held not in cheapest or row.cpu_seconds < cheapest[held][0]:
            cheapest[held] = (row.cpu_seconds, task, record)
    chosen = cover({held: found[0] for held, found in cheapest.items()}, kinds)
    return [cheapest[held][1:] for held in chosen]


def elsewhere(folder: Path) -> AbstractContextManager[None]:
    """Within it, the run ledger and the caches are under ``folder`` (``results/``, ``data/``)."""
    return paths.environment({ledger.RESULTS_ENV: folder / "results", DATA_ENV: folder / "data"})


def recompute(profile: Profile, task: schedule.Task) -> dict[str, Any]:
    """``task``'s record computed afresh as ``make reproduce`` computes it (one torch thread),
    into a temporary ledger and data folder, as read back from its file."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="psnlib-proof-") as folder,
            elsewhere(Path(folder)),
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", "computing a record on unpinned code")  # the point
            jobs.run_task(profile, task)
            return ledger.load(ledger.record_path(profile.name, task.key(profile)))
    finally:
        torch.set_num_threads(threads)


def pin(digests: dict[str, str]) -> None:
    """Rewrite the ``DIGESTS`` lines of ``kind: digest`` in ``codeversion``'s source (under
    ``codeversion.PACKAGE``), each of which must be there once."""
    path = codeversion.module_file(codeversion.__name__)
    text = path.read_text()
    for kind, digest in digests.items():
        line = re.compile(rf'^(    "{re.escape(kind)}": )"[0-9a-f]{{12}}",$', re.MULTILINE)
        text, found = line.subn(rf'\g<1>"{digest}",', text)
        if found != 1:
            raise ValueError(f"{path} has {found} DIGESTS lines of {kind!r}, not one")
    atomic_write_text(path, text)


def prove(
    profile: Profile,
    kinds: set[str],
    make: Callable[[Profile, schedule.Task], dict[str, Any]] | None = None,
) -> bool:
    """Re-compute (``make``, by default ``recompute``) the records ``choose`` picks for ``kinds``,
    print how each compares with the committed one and, where every one is equal, pin the digest
    of every kind they hold (``pin``). Whether all were equal."""
    make = make or recompute
    records = choose(profile, kinds)
    proven = sorted({kind for _, record in records for kind in record["code"]})
    digests = {kind: codeversion.code_digest(kind) for kind in proven}  # of the code it runs
    for task, committed in records:
        held = sorted(committed["code"])
        took = sum(committed["cpu_seconds"].values())
        print(f"[proof] re-computing {committed['key']} ({', '.join(held)}; took {took:.0f} CPU s)")
        start, cpu = time.perf_counter(), time.process_time()
        difference = first_difference(committed, make(profile, task))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        if difference is not None:
            print(f"[proof] DIFFERS after {wall:.0f} s: {difference}; nothing pinned")
            return False
        print(f"[proof] bit-exact on every result field ({wall:.0f} s, {cpu:.0f} CPU s)")
    if any(codeversion.code_digest(kind) != digest for kind, digest in digests.items()):
        print("[proof] the code changed while it ran: nothing pinned; prove it again")
        return False
    pin(digests)
    for kind, digest in digests.items():
        print(f"[proof] pinned DIGESTS[{kind!r}] = {digest!r} (was {codeversion.DIGESTS[kind]!r})")
    return True


def main(argv: list[str] | None = None) -> int:
    """The command line; 0 where proven (or nothing to prove), 1 where a record differs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu", help="the ledger's profile (default cpu)")
    parser.add_argument(
        "--kind",
        action="append",
        choices=sorted(codeversion.VERSIONS),
        help="a kind to prove (repeatable); default: every kind whose digest moved",
    )
    args = parser.parse_args(argv)
    kinds = set(args.kind or codeversion.moved())
    if not kinds:
        print("[proof] every kind's digest is pinned: nothing to prove (--kind proves one anyway)")
        return 0
    return 0 if prove(get_profile(args.profile), kinds) else 1


if __name__ == "__main__":
    sys.exit(main())
