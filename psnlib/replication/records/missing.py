"""What the analysis and the report read: the run ledger's records, never a policy.

A reader asks for the records of the tasks it needs (``require``) and gets them all, or a
``MissingRecords`` that names every missing one before anything is read: only the compute layer
(``psnlib.replication.compute.jobs.run_task``, called by ``make reproduce``) trains or evaluates a
policy and writes its record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psnlib.replication.records import ledger


class MissingRecords(LookupError):
    """Records a reader needs are not in the run ledger (the message names their tasks)."""


def require(profile: str, needed: Mapping[str, ledger.Expected], what: str) -> dict[str, Any]:
    """The usable record of each of ``needed`` (a task's name -> what its record must match),
    by name; ``MissingRecords`` naming every task without one (for ``what``), at ``profile``."""
    records = {name: ledger.usable(expected) for name, expected in needed.items()}
    missing = [name for name, record in records.items() if record is None]
    if missing:
        raise MissingRecords(
            f"no usable record of {missing} in {ledger.profile_dir(profile)}: run `make "
            f"reproduce PROFILE={profile}` for {what}"
        )
    return records
