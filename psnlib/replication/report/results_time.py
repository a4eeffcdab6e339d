"""What a reproduction cost, in RESULTS.md's words: the timing log of ``make reproduce``
(``reproduce_timing.json``, written by ``psnlib.replication.reproduce``: per-task CPU and wall
seconds, the notebooks' wall seconds) and the run ledger's own CPU seconds per task
(``psnlib.replication.records.cost.measured_compute``), summed per CPU model of the records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from psnlib.replication.records.cost import compute_by_machine


def _is_notebook(entry: dict[str, Any]) -> bool:
    """Whether a ``reproduce_timing.json`` entry is a notebook's (its stage is ``NN_name``)."""
    return entry.get("stage", "")[:2].isdigit()


def timing_summary(path: str | Path) -> dict[str, float]:
    """What ``reproduce_timing.json`` (``psnlib.replication.reproduce``) recorded: per-task CPU and
    wall seconds of the prepare stage (tasks, workers), and the notebooks' wall seconds."""
    entries = json.loads(Path(path).read_text()) if Path(path).exists() else []
    tasks = [e for e in entries if "task" in e]
    notebooks = [e for e in entries if _is_notebook(e)]
    workers = max((e["workers"] for e in tasks), default=1)
    cpu = sum(e["cpu_seconds"] for e in tasks)
    prepares = [i for i, e in enumerate(entries) if e.get("stage") == "prepare"]
    last = entries[prepares[-1] :] if prepares else []  # the latest make reproduce
    first_runs = {}  # its notebooks, each at its first execution (a forced re-run not counted)
    for e in filter(_is_notebook, last):
        first_runs.setdefault(e["stage"], e["seconds"])
    return {
        "tasks": len(tasks),
        "task_cpu_seconds": cpu,
        "task_wall_seconds": sum(e["seconds"] for e in tasks),
        "workers": workers,
        "notebooks": len(notebooks),
        "notebook_seconds": sum(e["seconds"] for e in notebooks),
        "estimate_seconds": cpu / workers + sum(e["seconds"] for e in notebooks),
        # wall seconds of the latest prepare stage and of the notebooks that ran after it
        "last_prepare_seconds": last[0]["seconds"] if last else 0,
        "last_notebooks": len(first_runs),
        "last_notebook_seconds": sum(first_runs.values()),
    }


def _cores(n: int) -> str:
    return f"{n} core" + ("s" if n != 1 else "")


def timing_text(t: dict) -> str:
    """``timing_summary``'s numbers in words."""
    if not t["tasks"]:
        return "`reproduce_timing.json` holds no per-task timing yet."
    return (
        f"`reproduce_timing.json` records {t['tasks']} prepare tasks (policies, weak prefixes, "
        f"runs with their evaluations) taking {t['task_cpu_seconds'] / 3600:.2f} CPU hours, one "
        f"thread each, on {t['workers']} workers, and {t['notebooks']} notebook executions "
        f"taking {t['notebook_seconds'] / 60:.0f} minutes: "
        f"{t['estimate_seconds'] / 3600:.2f} hours on {_cores(t['workers'])}. A task that an "
        "earlier, interrupted run had finished is loaded and counts ~0 s, so after a resumed "
        "run this is a lower bound of a run from scratch."
    ) + (
        f" The latest `make reproduce` prepared in {t['last_prepare_seconds'] / 3600:.2f} hours "
        f"of wall time on {t['workers']} workers, then ran {t['last_notebooks']} notebooks in "
        f"{t['last_notebook_seconds'] / 60:.0f} minutes."
        if t["last_prepare_seconds"]
        else ""
    )


def compute_text(compute: pd.DataFrame, timing: dict) -> str:
    """``measured_compute``'s table in words: tasks done, CPU hours, per CPU model."""
    machines = compute_by_machine(compute)
    done, train, evaluate = machines[["tasks", "train_hours", "eval_hours"]].sum()
    per = "; ".join(
        f"{m.cpu}: {m.tasks} tasks, {m.cpu_hours:.2f} CPU hours" for m in machines.itertuples()
    )
    return (
        f"The run ledger's records (`psnlib.replication.records.cost.measured_compute`): "
        f"{int(done)} of {len(compute)} planned tasks finished, their training took {train:.2f} "
        f"CPU hours and their evaluations (with training paths, premise and probes) "
        f"{evaluate:.2f}, each task on one thread (so about its wall time on a quiet machine): "
        f"{(train + evaluate) / timing['workers']:.2f} hours on {_cores(timing['workers'])}, "
        f"before building the policies and the notebooks. Per CPU model of the records: {per}."
    )
