"""What a round cost, from the ledger's records: per task its training and evaluation CPU seconds
and the CPU model it ran on (``measured_compute``), and their sums per CPU model
(``compute_by_machine``). Nothing is trained or evaluated."""

from __future__ import annotations

import pandas as pd

from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.schedule import tasks
from psnlib.replication.records import ledger
from psnlib.replication.records.tables import task_expectation


def measured_compute(profile: Profile) -> pd.DataFrame:
    """What each planned run cost, from its ledger record; nothing is trained or evaluated.

    One row per task of the plan (``tasks``): run, policy, seed,
    ``train_seconds`` (CPU seconds of its training, the trainer's ``step_cpu_time``; 0 for a base
    policy), ``eval_seconds`` (CPU seconds of its evaluations, training path, premise and probes)
    and ``cpu`` (the CPU model the record was made on); NaN (None) where its record is not done.
    One thread each, so about its wall time on a quiet machine.
    """
    rows = []
    for task in tasks(profile):
        expected = task_expectation(profile, task)
        record = ledger.usable(expected)
        cpu = record["cpu_seconds"] if record is not None else {}
        row = {"run": expected.key, "policy": task.variant.label, "seed": task.seed}
        train = cpu.get("train") if task.kind == "run" else 0.0 if record else None
        evaluate = sum(cpu.values()) - cpu["train"] if record else None
        model = record["machine"]["cpu"] if record else None
        rows.append(row | {"train_seconds": train, "eval_seconds": evaluate, "cpu": model})
    return pd.DataFrame(rows).astype({"train_seconds": float, "eval_seconds": float})


def compute_by_machine(compute: pd.DataFrame) -> pd.DataFrame:
    """``measured_compute``'s finished tasks summed per CPU model: one row per model with its
    ``tasks`` and the CPU hours of their training, of their evaluations (with path, premise and
    probes) and of both (``cpu_hours``), most tasks first."""
    done = compute.dropna(subset=["train_seconds", "eval_seconds"])
    per = done.groupby("cpu")
    table = pd.DataFrame(
        {
            "tasks": per.size(),
            "train_hours": per["train_seconds"].sum() / 3600,
            "eval_hours": per["eval_seconds"].sum() / 3600,
        }
    )
    table["cpu_hours"] = table["train_hours"] + table["eval_hours"]
    return table.sort_values("tasks", ascending=False).reset_index()
