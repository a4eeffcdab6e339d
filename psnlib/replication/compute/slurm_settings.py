"""What each task of ``--executor slurm``'s job array asks for, and the checks made before anything
is submitted (``psnlib.replication.compute.slurm`` submits).

``SlurmOptions``: a partition, a time limit in minutes, CPUs, memory, GPUs and the array's
concurrency cap, from the profile's defaults (``defaults``; ``paper``'s GPUs are
``configs/accelerate/multi_gpu.yaml``'s processes), then a YAML file (``--slurm-config``, the same
keys), then the command line (``add_arguments``, ``from_arguments``). Bad input is a one-line
ValueError before anything is submitted: a value of the wrong type (``time: true`` is no number of
minutes) or out of range (an infinite memory), an unknown key in the file, submitit not installed,
Slurm's ``sbatch``, ``srun``, ``squeue`` or ``sinfo`` not on PATH, a partition ``sinfo`` does not
list, a time limit shorter than a task's measured cost (``status.estimate``). ``setup`` is what the
job script exports: the data directory and the ledger, quoted for the shell.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from psnlib.replication.plan.profiles import Profile
from psnlib.replication.records import ledger
from psnlib.replication.records.paths import ROOT

ACCELERATE = ROOT / "configs" / "accelerate" / "multi_gpu.yaml"
COMMANDS = ("sbatch", "srun", "squeue", "sinfo")  # srun: submitit's job script runs the task
EXPORTED = ("PSNLIB_DATA", ledger.RESULTS_ENV)  # what a job needs of this process' environment


@dataclass(frozen=True)
class SlurmOptions:
    """What each array task asks for: ``partition`` (None: the cluster's default), ``time`` (its
    limit in minutes), ``cpus_per_task``, ``mem_gb``, ``gpus_per_task``, and ``array_parallelism``
    (how many run at once)."""

    partition: str | None = None
    time: int = 60
    cpus_per_task: int = 1
    mem_gb: float = 4.0
    gpus_per_task: int = 0
    array_parallelism: int = 256

    @property
    def mem(self) -> str:
        """The memory as sbatch takes it: whole MB, rounded up (``0MB`` would mean all)."""
        return f"{math.ceil(self.mem_gb * 1024)}MB"


def _accelerate_gpus() -> int:
    """The GPUs ``configs/accelerate/multi_gpu.yaml`` trains on (its ``num_processes``)."""
    import yaml

    return int(yaml.safe_load(ACCELERATE.read_text())["num_processes"])


def defaults(profile: Profile) -> SlurmOptions:
    """A profile's defaults: ``smoke`` and ``cpu`` 1 CPU and no GPU per task (tiny models, one
    thread each); ``gpu`` one GPU; ``paper`` the GPUs of its accelerate config, 8 CPUs each."""
    if profile.name == "paper":
        gpus = _accelerate_gpus()
        return SlurmOptions(
            time=48 * 60, cpus_per_task=8 * gpus, mem_gb=64.0 * gpus, gpus_per_task=gpus
        )
    if profile.name == "gpu":
        return SlurmOptions(time=24 * 60, cpus_per_task=8, mem_gb=64.0, gpus_per_task=1)
    if profile.name == "cpu":
        return SlurmOptions(time=6 * 60)
    return SlurmOptions(time=30)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check(chosen: SlurmOptions) -> SlurmOptions:
    """``chosen`` if each value has its type and range, else a ValueError naming the first that
    has not: a bool (YAML's ``true``) is no number, an infinite or NaN memory no amount."""
    for name in ("time", "cpus_per_task", "array_parallelism"):
        value = getattr(chosen, name)
        if not _integer(value) or value < 1:
            raise ValueError(f"slurm {name} must be an integer >= 1, got {value!r}")
    if not _integer(chosen.gpus_per_task) or chosen.gpus_per_task < 0:
        raise ValueError(
            f"slurm gpus_per_task must be an integer >= 0, got {chosen.gpus_per_task!r}"
        )
    mem = chosen.mem_gb
    if isinstance(mem, bool) or not isinstance(mem, int | float) or not 0 < mem < math.inf:
        raise ValueError(f"slurm mem_gb must be a finite number of GB > 0, got {mem!r}")
    partition = chosen.partition
    if partition is not None and (not isinstance(partition, str) or not partition.strip()):
        raise ValueError(f"slurm partition must be a partition's name, got {partition!r}")
    return chosen


def options(profile: Profile, config: Path | None = None, **given: Any) -> SlurmOptions:
    """The profile's defaults, then ``config`` (YAML with ``SlurmOptions``' keys), then the
    values ``given`` that are not None, checked (``check``). A file that cannot be read, an
    unknown key or a value out of range is a ValueError naming it."""
    chosen = defaults(profile)
    names = [f.name for f in fields(SlurmOptions)]
    if config is not None:
        import yaml

        try:
            loaded = yaml.safe_load(Path(config).read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"--slurm-config {str(config)!r} cannot be read: {err}") from err
        if not isinstance(loaded, dict):
            raise ValueError(f"--slurm-config {str(config)!r} must be a mapping of {names}")
        unknown = sorted(set(loaded) - set(names), key=str)
        if unknown:
            raise ValueError(
                f"--slurm-config {str(config)!r}: unknown key(s) {unknown}; allowed: {names}"
            )
        chosen = replace(chosen, **loaded)
    return check(replace(chosen, **{k: v for k, v in given.items() if v is not None}))


def check_cluster(chosen: SlurmOptions) -> None:
    """submitit importable, Slurm's commands (``COMMANDS``) on PATH, the partition one ``sinfo``
    lists; else a ValueError of one line."""
    if importlib.util.find_spec("submitit") is None:
        raise ValueError(
            "--executor slurm needs submitit, which is not installed: pip install -e '.[slurm]'"
        )
    for command in COMMANDS:
        if shutil.which(command) is None:
            raise ValueError(f"--executor slurm needs Slurm's {command!r}, not found on PATH")
    if chosen.partition is not None:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True)
        partitions = sorted(set(out.stdout.split()))
        if out.returncode != 0:
            raise ValueError(f"sinfo failed (is Slurm reachable?): {out.stderr.strip()}")
        if chosen.partition not in partitions:
            raise ValueError(
                f"--partition {chosen.partition!r} is not a partition of this cluster; "
                f"sinfo lists {partitions}"
            )


def check_time(chosen: SlurmOptions, table: pd.DataFrame) -> None:
    """A ValueError naming the first task of ``table`` (``status.status`` with ``status.estimate``'s
    column ``estimate``: CPU seconds on one thread) whose cost exceeds the time limit."""
    for row in table.itertuples():
        cost = row.estimate
        if cost == cost and cost > chosen.time * 60:
            raise ValueError(
                f"--time {chosen.time} min is shorter than the measured cost of {row.policy} seed "
                f"{row.seed} ({row.run}): about {cost / 60:.0f} min; give at least "
                f"{int(cost // 60) + 1}"
            )


def setup() -> list[str]:
    """The job script's setup lines: ``export`` of the variables of ``EXPORTED`` set here, each
    value quoted for the shell (``shlex.quote``), so that a path holding ``'``, ``$(...)``,
    backticks or spaces reaches the job as it is and runs nothing."""
    return [
        f"export {name}={shlex.quote(os.environ[name])}" for name in EXPORTED if name in os.environ
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor`` and the Slurm executor's flags."""
    parser.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="where the tasks run: local worker processes, or a Slurm job array (submitit)",
    )
    group = parser.add_argument_group("slurm executor (--executor slurm; defaults per profile)")
    group.add_argument("--partition", help="the Slurm partition (default: the cluster's)")
    group.add_argument("--time", type=int, help="time limit of each task, in minutes")
    group.add_argument("--cpus-per-task", type=int, help="CPUs (and torch threads) per task")
    group.add_argument("--mem-gb", type=float, help="memory per task, in GB")
    group.add_argument("--gpus-per-task", type=int, help="GPUs per task")
    group.add_argument("--array-parallelism", type=int, help="tasks of the array run at once")
    group.add_argument("--slurm-config", type=Path, help="YAML file with the keys above")
    group.add_argument("--no-wait", action="store_true", help="submit and return at once")
    group.add_argument("--runs", nargs="+", help="only these run keys (default: every task)")


def from_arguments(args: argparse.Namespace, profile: Profile) -> SlurmOptions:
    """The Slurm executor's settings of a command line (``options``)."""
    return options(
        profile,
        args.slurm_config,
        partition=args.partition,
        time=args.time,
        cpus_per_task=args.cpus_per_task,
        mem_gb=args.mem_gb,
        gpus_per_task=args.gpus_per_task,
        array_parallelism=args.array_parallelism,
    )
