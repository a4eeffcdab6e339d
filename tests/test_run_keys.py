"""The run keys of every planned run, pinned: a change to the plan, to the layout or to what a key
covers must be deliberate (``make pin-run-keys`` re-pins ``tests/data/planned_run_keys.json``), and
it must not orphan a committed record: every record of the run ledger is still planned.

The pinned file is the whole plan of round two at cpu (issue 41 and its amendment: 262 keys, the
keys of every committed record) and of the smoke profile."""

import json
from pathlib import Path

import pytest

from psnlib.replication.plan.schedule import planned_runs

ROOT = Path(__file__).resolve().parents[1]
PINNED = json.loads((ROOT / "tests" / "data" / "planned_run_keys.json").read_text())
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("profile", sorted(PINNED))
def test_planned_run_keys_are_the_pinned_ones(profile):
    """A plan that moved says which keys came and went (re-pin with ``make pin-run-keys``)."""
    planned = set(planned_runs(profile)["run"])
    pinned = set(PINNED[profile])
    assert (sorted(planned - pinned), sorted(pinned - planned)) == ([], [])


@pytest.mark.parametrize("profile", sorted(PINNED))
def test_every_committed_record_is_still_planned(profile):
    """No record of ``results/<profile>`` is orphaned by the plan (a key it no longer makes)."""
    records = {path.stem for path in (ROOT / "results" / profile).glob("*.json")}
    assert sorted(records - set(planned_runs(profile)["run"])) == []
