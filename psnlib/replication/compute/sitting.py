"""What a sitting of ``python -m psnlib.replication.reproduce`` checks before its first task, so
that no work is computed and then thrown away: its time limit (``--budget``, ``--until``:
``seconds_left``), the committed starting points it starts from (``check_starting_points``:
damaged, they are named with the ``git checkout`` that restores them, never trained again), and
files where its records and stored parts go (``check_ledger``, ``check_parts``,
``check_prefix_sets``; the command line checks the last two too). Each failure is
a one-line ValueError naming the value or file and what to do.
"""

from __future__ import annotations

import datetime
import os
import shlex
from collections.abc import Iterable
from pathlib import Path

from psnlib.cache import load_json
from psnlib.paths import ROOT, check_writable, data_dir
from psnlib.replication.plan import policies, schedule
from psnlib.replication.plan.profiles import PolicySpec, Profile
from psnlib.replication.records import ledger
from psnlib.replication.records.tables import task_expectation


def until(clock: str, now: datetime.datetime | None = None) -> float:
    """Seconds from ``now`` (default: this moment, local time) to the next ``HH:MM``; a
    ValueError names a ``clock`` that is not one (an empty one too: an unset ``$UNTIL``)."""
    if not clock.strip():
        raise ValueError(
            "--until is empty (an unset variable, as in --until $UNTIL?); pass a time of day "
            "HH:MM, or leave --until out for no limit"
        )
    try:
        hour, minute = (int(x) for x in clock.split(":"))
        now = now or datetime.datetime.now()
        end = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError as err:
        raise ValueError(
            f"--until must be a time of day HH:MM (e.g. 17:45), got {clock!r}"
        ) from err
    if end <= now:
        end += datetime.timedelta(days=1)
    return (end - now).total_seconds()


def seconds_left(
    budget: float | None, clock: str | None, now: datetime.datetime | None = None
) -> float | None:
    """A sitting's time: ``--budget``'s seconds, the seconds to ``--until``'s ``HH:MM``, the
    earlier of the two where both are given, or None (no limit) where neither is."""
    limits = [] if budget is None else [budget]
    if clock is not None:
        limits.append(until(clock, now))
    return min(limits) if limits else None


def restore(path: Path) -> str:
    """The command that restores ``path``, tracked in git, in the checkout."""
    return f"`git -C {shlex.quote(str(ROOT))} checkout -- {shlex.quote(str(path))}`"


def check_starting_points(specs: Iterable[PolicySpec]) -> None:
    """The committed starting points among ``specs`` must be whole: ``fingerprints.json`` a
    mapping of policy names to fingerprints, each policy it names a directory, and each
    committed policy directory named in it. Else a ValueError naming the damage and the
    ``git checkout`` that restores it: a policy trained again here need not have the weights
    the records were made from, so it is never done silently."""
    root = policies.committed_root()
    names = sorted({policies.policy_name(s) for s in specs if s.name_or_path is None})
    file = root / policies.FINGERPRINTS
    if not os.path.lexists(file) and not any(os.path.lexists(root / n) for n in names):
        return  # none of them is committed (smoke's, say)
    try:
        known = load_json(file)
    except ValueError as err:  # psnlib.cache.Damaged: missing, a directory, or not JSON
        raise ValueError(
            f"the committed starting points' fingerprints are damaged ({err}): restore them "
            f"with {restore(file)}"
        ) from err
    if not isinstance(known, dict) or not all(isinstance(v, str) for v in known.values()):
        raise ValueError(
            f"the committed starting points' fingerprints {file} are damaged (not a mapping of "
            f"policy names to fingerprints): restore them with {restore(file)}"
        )
    for name in names:
        path = root / name
        if name in known and (path.is_symlink() or not path.is_dir()):
            there = "missing" if not os.path.lexists(path) else "not a directory"
            if path.is_symlink():
                there = "a symbolic link"
            raise ValueError(
                f"the committed starting policy {path} is {there}: restore it with "
                f"{restore(path)} (trained again here, it need not match the records' weights)"
            )
        if name not in known and path.is_dir():
            raise ValueError(
                f"the committed starting policy {path} has no fingerprint in {file}: restore "
                f"that file with {restore(file)}"
            )


def check_ledger(profile: Profile, plan: list[schedule.Task]) -> None:
    """Each task of ``plan`` can have its record written: the ledger's folder of its profile can
    be written in (or made), and no directory, symbolic link or other non-file stands where its
    record goes."""
    folders = set()
    for task in plan:
        expected = task_expectation(profile, task)
        path = ledger.record_path(expected.profile, expected.key)
        if path.parent not in folders:
            check_writable(path.parent, "the run ledger's folder")
            folders.add(path.parent)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            kind = "a symbolic link" if path.is_symlink() else "not a file"
            raise ValueError(
                f"the record {path} is {kind}, and a task's record is written there as a file: "
                "remove it and run again"
            )


def _first_not_file(pattern: str, root: Path) -> Path | None:
    """The first entry matching ``pattern`` under ``root`` that is not a regular file, if any."""
    return next((path for path in sorted(root.glob(pattern)) if not path.is_file()), None)


def _remove(path: Path) -> str:
    return f"remove it (rm -r {shlex.quote(str(path))}; it is computed again) and run again"


def check_parts(profile: Profile, run_key: str = "*") -> None:
    """The result parts stored at ``profile`` (``<data>/results/<profile>/<run key>-*/*.json``;
    of every run key by default) are files: a directory in place of one, read as JSON when its
    benchmark is evaluated, is named with what to do before any work."""
    path = _first_not_file(f"{run_key}-*/*.json", data_dir() / "results" / profile.name)
    if path is not None:
        raise ValueError(f"the stored result part {path} is not a file: {_remove(path)}")


def check_prefix_sets() -> None:
    """The weak-prefix sets, cached (``<data>/cache/weak_prefixes/``) and committed
    (``results/start/prefixes/``), are files; else a ValueError naming the first that is not."""
    path = _first_not_file("*.json", data_dir() / "cache" / "weak_prefixes")
    if path is not None:
        raise ValueError(f"the cached weak-prefix set {path} is not a file: {_remove(path)}")
    path = _first_not_file("*.json", policies.committed_root().parent / "prefixes")
    if path is not None:
        raise ValueError(
            f"the committed weak-prefix set {path} is not a file: restore it with {restore(path)}"
        )
