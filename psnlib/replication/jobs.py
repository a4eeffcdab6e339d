"""The plan's tasks, each computed into one ledger record (``psnlib.replication.ledger``).

A ``Task`` is one policy of the plan (``experiments.planned_work``: a variant at a seed) with
every benchmark any experiment evaluates it on; an RL task trains the run, evaluates it and, for
GRPO at the premise's seeds, runs the premise on the checkpoint it has just made, so no
checkpoint ever has to travel; GRPO at the main seeds also keeps its policy at the profile's
``path_steps`` and evaluates each like the final one (its training path, the frontier of "GRPO
trained less": ``psnlib.replication.frontier``). ``tasks`` lists them in the order that answers
the primary comparisons first (``PRIORITY``); ``run_task`` computes one and writes its record;
``status`` says, per task, whether its record is done, missing or stale, and ``estimate`` what a
task will cost, from the records' measured CPU seconds.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median
from typing import Any

import pandas as pd

from psnlib.replication import frontier, ledger
from psnlib.replication.codeversion import stamp
from psnlib.replication.evaluation import eval_settings, evaluate_parts
from psnlib.replication.experiments import BASE_POLICY, GRPO, PLANS, planned_work
from psnlib.replication.premise import premise, premise_parts, premise_settings
from psnlib.replication.pretrain import base_policy
from psnlib.replication.probes import PROBES, probe_seed
from psnlib.replication.profiles import Profile
from psnlib.replication.records import MissingRecords as MissingRecords  # jobs.MissingRecords
from psnlib.replication.records import require
from psnlib.replication.runs import load_path_policy
from psnlib.replication.store import weights_fingerprint
from psnlib.replication.variants import (
    BASE,
    EVAL_SEED,
    Variant,
    expectation,
    load_variant,
    start_name,
)

# The plans whose policies run first, group by group: the primary comparisons of issue 41 at the
# main seeds (GRPO with the premise and its path, PSN fixed and adaptive II, the released code's
# two PSNs, the TIS three-way, the exploration baselines), then the other main arms (weak
# prefixes, the out-of-distribution evaluations); the rest (ablations, other models) last. Within
# a group, seed by seed, so that the pairs of every comparison fill in together.
PRIORITY = (
    (
        "rl_narrows_coverage",
        "released_code",
        "main_results",
        "tis_three_way",
        "exploration_baselines",
    ),
    ("weak_prefix", "entropy_dynamics", "coverage", "ood"),
)


@dataclass(frozen=True)
class Task:
    """One policy of the plan: ``variant`` at ``seed``, evaluated on ``benchmarks``, the premise
    on its checkpoint if ``premise``, ``probes`` (names of ``psnlib.replication.probes.
    PROBES``) on its policy, and its training path: the policies its run keeps at the steps of
    ``path``, each evaluated on ``benchmarks``."""

    variant: Variant
    seed: int
    benchmarks: tuple[str, ...]
    premise: bool = False
    probes: tuple[str, ...] = ()
    path: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        """``base`` (evaluations of a starting policy) or ``run`` (an RL run)."""
        return "base" if self.variant.arm == BASE else "run"

    def key(self, profile: Profile) -> str:
        """Its run key: the name of its record."""
        return self.variant.run_key(profile, self.seed)

    def expected(self, profile: Profile) -> ledger.Expected:
        """What its record must match (``psnlib.replication.variants.expectation``)."""
        settings = premise_settings(profile) if self.premise else None
        return expectation(
            profile, self.variant, self.seed, self.benchmarks, settings, self.probes, self.path
        )

    def name(self) -> str:
        """How progress lines name it."""
        what = f"{self.variant.label} seed {self.seed} ({len(self.benchmarks)} benchmarks"
        extra = ["premise"] if self.premise else []
        extra += [f"path at steps {', '.join(map(str, self.path))}"] if self.path else []
        return what + "".join(f", {x}" for x in [*extra, *self.probes]) + ")"


def _group(profile: Profile) -> dict[str, int]:
    """Run key -> the first ``PRIORITY`` group of a plan that uses it."""
    first: dict[str, int] = {}
    for group, names in enumerate(PRIORITY):
        for name in names:
            plan = PLANS[name](profile)
            for v in plan.variants:
                for seed in v.seeds(plan.seeds):
                    first.setdefault(v.run_key(profile, seed), group)
    return first


def tasks(profile: Profile) -> list[Task]:
    """Every task of ``profile``'s plan, primary comparisons first (``PRIORITY``)."""
    premise_seeds = set(premise(profile).seeds)
    grpo = {GRPO.run_key(profile, seed): seed for seed in premise_seeds}
    pathed = {GRPO.run_key(profile, seed): seed for seed in profile.seeds}
    probed: dict[str, list[str]] = {}
    for name, probe in PROBES.items():
        for v in probe.variants:
            probed.setdefault(v.run_key(profile, probe_seed(profile)), []).append(name)
    found = [
        Task(
            v,
            seed,
            benchmarks,
            premise=grpo.get(key := v.run_key(profile, seed)) == seed,
            probes=tuple(probed.get(key, ())),
            path=profile.path_steps if pathed.get(key) == seed else (),
        )
        for v, seed, benchmarks in planned_work(profile)
    ]
    group, last = _group(profile), len(PRIORITY)
    order = {id(task): i for i, task in enumerate(found)}
    return sorted(found, key=lambda t: (group.get(t.key(profile), last), t.seed, order[id(t)]))


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
            {name: PROBES[name].compute(p, model, tokenizer) for name in task.probes}
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


def status(profile: Profile, plan: list[Task] | None = None) -> pd.DataFrame:
    """One row per task of ``plan`` (default: ``tasks(profile)``), in its order: policy, arm,
    seed, run (its key), ``state`` (``done``, ``missing``, or ``stale``/``damaged``/``unusable``,
    with the reasons in ``why``: a damaged record is named there, not in a warning) and the CPU
    seconds a done record took (``cpu_seconds``)."""
    rows = []
    for task in plan if plan is not None else tasks(profile):
        expected = task.expected(profile)
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
        expected = task.expected(profile)
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


def training_paths(
    profile: Profile,
    benchmarks: tuple[str, ...],
    seeds: Iterable[int] | None = None,
) -> pd.DataFrame:
    """GRPO's training paths at ``profile``'s main seeds (or those of ``seeds`` among them) as
    ``psnlib.replication.frontier.points`` (seed, step, pass1, passmax) on ``benchmarks``, from
    the run ledger's records of the base policy and of GRPO's path tasks (``tasks``); nothing is
    trained or evaluated: a task without a usable record is a ``MissingRecords`` that names it,
    before anything is read."""
    plan = tasks(profile)
    wanted = set(profile.seeds if seeds is None else seeds)
    start = next(t for t in plan if t.variant.label == BASE_POLICY.label)
    kept = [t for t in plan if t.path and t.seed in wanted]
    if not kept:
        raise ValueError(
            f"profile {profile.name!r} keeps GRPO's path at none of the seeds {sorted(wanted)} "
            f"(path_steps {profile.path_steps}, main seeds {profile.seeds})"
        )
    needed = {t.name(): t.expected(profile) for t in (start, *kept)}
    base, *grpo = require(profile.name, needed, "GRPO's training path").values()
    steps = frontier.path_problems(base, grpo, benchmarks)
    return frontier.points(steps, profile, ("seed", "step"))
