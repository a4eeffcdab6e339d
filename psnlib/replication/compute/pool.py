"""The plan's tasks computed in local worker processes: what ``make reproduce`` runs before the
notebooks when its executor is local (``psnlib.replication.compute.slurm`` submits the same tasks to
a Slurm job array).

``prepare`` builds the starting policies and weak-prefix sets that are neither committed nor cached
(``starting``), then computes every task of the plan without a usable ledger record
(``psnlib.replication.compute.jobs``), ``workers`` spawned processes at a time, one torch thread
each, primary comparisons first; with a deadline it starts no task whose measured cost says it would
not end in time. ``run_all`` is the pool: a task that fails is reported in one line (``label``: its
run key, then the error) and, where asked, the others go on; the workers die with the process that
started them (``_die_with_parent``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any

import pandas as pd
import torch

from psnlib.replication.compute import jobs, starting_points
from psnlib.replication.compute.prefixes import prefix_train_set
from psnlib.replication.compute.pretrain import build_policy
from psnlib.replication.plan import schedule
from psnlib.replication.plan.policies import policy_dir, policy_name
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.records import status

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def _build(spec: PolicySpec) -> str:
    build_policy(spec)
    return f"policy {spec.family}-{spec.size}-{spec.sft_style}"


def _prefixes(profile: Profile, seed: int, truncation: str, source: str) -> str:
    prefix_train_set(profile, seed, truncation=truncation, source=source, progress=False)
    return f"prefixes seed {seed}, {truncation} cut, {source} source"


def _task(profile: Profile, task: schedule.Task) -> str:
    jobs.run_task(profile, task)
    return task.name()


def label(task: tuple) -> str:
    """How a progress line names a task ``(function, *args)`` of ``run_all``: a plan's task by
    its run key, a policy by its directory's name, a prefix set by its seed, cut and source."""
    function, *args = task
    if function is _task:
        profile, planned = args
        return f"{planned.key(profile)} ({planned.variant.label} seed {planned.seed})"
    if function is _build:
        return f"policy {policy_name(args[0])}"
    if function is _prefixes:
        return "prefixes seed {}, {} cut, {} source".format(*args[1:])
    return f"{getattr(function, '__name__', function)}{tuple(args)!r}"


def _die_with_parent() -> None:
    """In a worker: ask the kernel to kill it when its parent dies (Linux' PR_SET_PDEATHSIG), so
    a ``kill -9`` of ``make reproduce`` leaves no worker behind; elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the request: go now
        os._exit(1)


def _one_thread(task: Callable[..., str], *args: Any) -> tuple[str, float, float]:
    """Run one task on one torch thread: its name, wall seconds and CPU seconds."""
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    name = task(*args)
    return name, time.perf_counter() - start, time.process_time() - cpu


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes that die with this one (``_die_with_parent``)."""
    return ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_die_with_parent
    )


def run_all(
    stage: str,
    tasks: list[tuple],
    workers: int,
    record: Callable[[dict], None] | None = None,
    fits: Callable[[int], bool] | None = None,
    keep_going: bool = False,
) -> list[str]:
    """Run ``(function, *args)`` tasks, ``workers`` processes at a time, in order; report each,
    and ``record`` its wall and CPU seconds (a timing log). One thread per task, so the CPU
    seconds are its wall time on a quiet machine, unlike wall time not stretched by other jobs
    or pauses.
    ``fits(i)`` says whether task ``i`` may start now (``--budget``); one that may not is left
    out. A task that fails raises its error, or with ``keep_going`` is reported and the others go
    on. Returns the names of the tasks that failed."""
    print(f"[psnlib] {stage}: {len(tasks)} task(s), {workers} worker(s)", flush=True)
    failed: list[str] = []
    pool = worker_pool(workers) if workers > 1 else None
    waiting: list[int] = list(range(len(tasks)))
    running: dict[Any, int] = {}
    done = 0
    try:
        while waiting or running:
            while waiting and len(running) < max(workers, 1):
                i = waiting.pop(0)
                if fits is not None and not fits(i):
                    continue
                if pool is None:
                    running[_Now(tasks[i])] = i
                else:
                    running[pool.submit(_one_thread, *tasks[i])] = i
            if not running:
                break
            finished = wait(running, return_when=FIRST_COMPLETED).done if pool else list(running)
            for future in finished:
                i, done = running.pop(future), done + 1
                try:
                    name, seconds, cpu = future.result()
                except Exception as err:
                    if not keep_going:
                        raise
                    failed.append(label(tasks[i]))
                    why = f"{type(err).__name__}: {' '.join(str(err).split())}"
                    print(f"[psnlib]   {done}/{len(tasks)} FAILED {failed[-1]}: {why}", flush=True)
                    continue
                print(f"[psnlib]   {done}/{len(tasks)} {name}: {seconds:.0f} s", flush=True)
                if record is not None:
                    entry = {"stage": stage, "task": name, "workers": workers}
                    record({**entry, "seconds": round(seconds), "cpu_seconds": round(cpu)})
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return failed


class _Now:
    """A task run here, now, with ``Future``'s ``result``: the one-worker path of ``_run_all``."""

    def __init__(self, task: tuple) -> None:
        try:
            self._value, self._error = _one_thread(*task), None
        except Exception as err:
            self._value, self._error = None, err

    def result(self) -> tuple[str, float, float]:
        if self._error is not None:
            raise self._error
        return self._value


def starting(profile: Profile, workers: int, record: Callable[[dict], None] | None = None) -> None:
    """Build the starting policies and weak-prefix sets of the plan that are neither committed
    nor cached, ``workers`` processes at a time (the first stages of ``prepare``)."""
    todo = [s for s in starting_points.policies(profile) if not policy_dir(s).exists()]
    run_all("policies", [(_build, spec) for spec in todo], workers, record)
    prefix_tasks = [(_prefixes, profile, *key) for key in starting_points.prefix_sets(profile)]
    run_all("weak prefixes", prefix_tasks, workers, record)


def prepare(
    profile: Profile,
    workers: int,
    record: Callable[[dict], None] | None = None,
    deadline: float | None = None,
) -> pd.DataFrame:
    """Compute every task of the plan whose record is not done
    (``psnlib.replication.compute.jobs``), ``workers`` at a time, primary comparisons first: first
    the starting policies and prefix sets that are neither committed nor cached, then the tasks.
    With ``deadline`` (a ``time.monotonic()`` value) a task starts only if its estimated CPU seconds
    (``status.estimate``; one thread each, so about its wall time) end before it. Returns the plan's
    status after (``status.status``)."""
    starting(profile, workers, record)
    plan = schedule.tasks(profile)
    table = status.status(profile, plan)
    costs = status.estimate(table)
    left = [i for i in range(len(plan)) if table["state"].iloc[i] != "done"]
    for row in table[~table["state"].isin(["done", "missing"])].itertuples():
        print(f"[psnlib]   {row.state}, computed again: {row.run}: {row.why}", flush=True)

    def fits(i: int) -> bool:
        cost = costs.iloc[left[i]]
        if deadline is None or cost != cost:  # no deadline, or nothing measured to go by
            return deadline is None or time.monotonic() < deadline
        if time.monotonic() + cost <= deadline:
            return True
        print(f"[psnlib]   not started: {plan[left[i]].name()} (about {cost:.0f} s)", flush=True)
        return False

    tasks = [(_task, profile, plan[i]) for i in left]
    failed = run_all("runs", tasks, workers, record, fits, keep_going=True)
    if failed:
        print(f"[psnlib] {len(failed)} task(s) failed; their records are not written", flush=True)
    return status.status(profile, plan)
