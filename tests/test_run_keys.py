"""The run keys of every planned run are the ones the committed replication cache holds: a change
to the layout or to what a key covers must not orphan finished runs. The list was written by the
code of 684c706 (``planned_runs(p)["run"]``, one thread)."""

import json
from pathlib import Path

import pytest

from psnlib.replication.experiments import planned_runs

KEYS = json.loads((Path(__file__).parent / "data" / "planned_run_keys.json").read_text())
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("profile", sorted(KEYS))
def test_planned_run_keys_are_the_committed_ones(profile):
    assert sorted(planned_runs(profile)["run"]) == KEYS[profile]
