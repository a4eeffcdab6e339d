"""One task of the plan computed into its ledger record (``psnlib.replication.records.ledger``).

``run_task`` takes a ``psnlib.replication.plan.schedule.Task`` (one policy of the plan with every
benchmark any experiment evaluates it on): an RL task trains the run, evaluates it and, for GRPO
at the premise's seeds, runs the premise on the checkpoint it has just made, so no checkpoint
ever has to travel; GRPO at the main seeds also keeps its policy at the profile's
``path_steps`` and evaluates each like the final one (its training path, read by
``psnlib.replication.analysis.frontier``); the task of the first main seed computes the probes.
Which tasks there are, and in what order, is ``psnlib.replication.plan.schedule``'s; whether a
task's record is done, and what one costs, ``psnlib.replication.records.status``'.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from psnlib.replication.compute.evaluation import evaluate_parts
from psnlib.replication.compute.premise_evaluation import premise_parts
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.probing import COMPUTE
from psnlib.replication.compute.runs import load_path_policy, load_variant
from psnlib.replication.compute.store import weights_fingerprint
from psnlib.replication.plan.evaluation import eval_settings
from psnlib.replication.plan.premise import premise_settings
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.schedule import Task
from psnlib.replication.plan.variants import EVAL_SEED, start_name
from psnlib.replication.records import ledger
from psnlib.replication.records.codeversion import stamp


def run_task(profile: Profile, task: Task) -> dict[str, Any]:
    """Compute ``task`` (train, evaluate, premise, probes, path; each resumed from the caches where
    a sitting was cut short), write its record and return it."""
    p, key = task.variant.profile(profile), task.key(profile)
    cpu = time.process_time()
    model, tokenizer, log = load_variant(profile, task.variant, task.seed, task.path)
    trained = time.process_time() - cpu
    if "step_cpu_time" in log:  # the trainer's own measure, whichever sitting trained it
        trained = float(log["step_cpu_time"].sum())
    cpu = time.process_time()
    parts = evaluate_parts(
        model, tokenizer, p, task.benchmarks, run_key=key, seed=EVAL_SEED, progress=False
    )
    evaluated = time.process_time() - cpu
    kinds = [task.kind]
    record: dict[str, Any] = {}
    cpu = time.process_time()
    if task.premise:
        kinds.append("premise")
        record["premise"] = {
            "config": premise_settings(profile),
            "parts": ledger.parts_json(premise_parts(profile, task.seed)),
        }
    premised = time.process_time() - cpu
    cpu = time.process_time()
    if task.probes:
        kinds.append("probes")
        record["probes"] = ledger.parts_json(
            {name: COMPUTE[name](p, model, tokenizer) for name in task.probes}
        )
    probed = time.process_time() - cpu
    cpu = time.process_time()
    if task.path:
        record["path"] = _path(p, task, key)
    pathed = time.process_time() - cpu
    start, _, _ = base_policy(p)
    run = None if task.kind == "base" else task.variant.run(profile, task.seed)
    settings = {} if run is None else run.settings()
    record |= {
        "schema": ledger.SCHEMA,
        "key": key,
        "profile": p.name,
        "kind": task.kind,
        "arm": task.variant.arm.name,
        "seed": task.seed,
        "settings": settings,
        "evaluation": eval_settings(p, EVAL_SEED),
        "start": {"policy": start_name(p.base), "fingerprint": weights_fingerprint(start)},
        "weights": weights_fingerprint(model),
        "code": stamp(kinds),
        "log": ledger.table_json(log),
        "benchmarks": ledger.parts_json(parts),
        "machine": ledger.machine(),
        "cpu_seconds": {
            "train": trained,
            "evaluate": evaluated,
            "premise": premised,
            "probes": probed,
            "path": pathed,
        },
        "made": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    ledger.write(record)
    return record


def _path(profile: Profile, task: Task, key: str) -> dict[str, Any]:
    """The ``path`` of ``task``'s record: the policy its run kept at each step of ``task.path``,
    evaluated like the final one (run key ``<key>-step<N>``), with its weights fingerprint."""
    run_dir = task.variant.run_path(profile, task.seed)
    weights, benchmarks = {}, {}
    for step in task.path:
        model, tokenizer = load_path_policy(run_dir, step)
        weights[str(step)] = weights_fingerprint(model)
        parts = evaluate_parts(
            model,
            tokenizer,
            profile,
            task.benchmarks,
            run_key=f"{key}-step{step}",
            seed=EVAL_SEED,
            progress=False,
        )
        benchmarks[str(step)] = ledger.parts_json(parts)
    return {"steps": list(task.path), "weights": weights, "benchmarks": benchmarks}
