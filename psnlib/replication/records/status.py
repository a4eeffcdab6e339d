"""Where a round stands: per task of the plan, whether its ledger record is done, missing, stale,
damaged or unusable, with the reasons (``status``), and what each task costs, from the done
records' measured CPU seconds (``estimate``)."""

from __future__ import annotations

from statistics import median

import pandas as pd

from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.schedule import Task, tasks
from psnlib.replication.records import ledger
from psnlib.replication.records.tables import task_expectation


def status(profile: Profile, plan: list[Task] | None = None) -> pd.DataFrame:
    """One row per task of ``plan`` (default: ``tasks(profile)``), in its order: policy, arm,
    seed, run (its key), ``state`` (``done``, ``missing``, or ``stale``/``damaged``/``unusable``,
    with the reasons in ``why``: a damaged record is named there, not in a warning) and the CPU
    seconds a done record took (``cpu_seconds``)."""
    rows = []
    for task in plan if plan is not None else tasks(profile):
        expected = task_expectation(profile, task)
        path = ledger.record_path(expected.profile, expected.key)
        record, damage = ledger.examine(path)
        wrong = ledger.problems(record, expected) if record is not None else [damage]
        if record is None:
            state = "damaged" if damage else "missing"
        elif not wrong:
            state = "done"
        else:
            state = "stale" if any(w.startswith("stale") for w in wrong) else "unusable"
        cpu = sum(record["cpu_seconds"].values()) if record is not None else float("nan")
        rows.append(
            {"policy": task.variant.label, "arm": task.variant.arm.name, "seed": task.seed}
            | {"run": expected.key, "benchmarks": len(task.benchmarks), "premise": task.premise}
            | {"path": len(task.path)}
            | {"state": state, "why": "; ".join(wrong), "cpu_seconds": cpu}
        )
    return pd.DataFrame(rows)


def estimate(table: pd.DataFrame) -> pd.Series:
    """CPU seconds each task of ``status``'s table costs: its own record's where done; else the
    median of the done records of its arm with as many benchmarks, the same premise flag and as
    many path steps, else of any arm with as many benchmarks, else of every done record (NaN with
    none done)."""
    done = table[table["state"] == "done"]
    rough = [
        lambda row: (
            (done["arm"] == row.arm)
            & (done["benchmarks"] == row.benchmarks)
            & (done["premise"] == row.premise)
            & (done["path"] == row.path)
        ),
        lambda row: done["benchmarks"] == row.benchmarks,
        lambda row: done["arm"] == done["arm"],
    ]
    costs = []
    for row in table.itertuples():
        cost = row.cpu_seconds if row.state == "done" else float("nan")
        for like in rough if row.state != "done" else ():
            similar = done[like(row)]["cpu_seconds"]
            if len(similar):
                cost = float(median(similar))
                break
        costs.append(cost)
    return pd.Series(costs, index=table.index, name="estimate")
