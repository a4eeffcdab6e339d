"""The run keys of every planned run: a change to the layout or to what a key covers must not
orphan finished runs. ``planned_run_keys.json`` was written by the code of 684c706
(``planned_runs(p)["run"]``, one thread), before issue 31 added runs: every one of those keys is
still planned. ``planned_run_keys_31.json`` is the whole plan since issue 31 (the released code's
PSN, the exploration baselines, the ablations at four seeds), pinned exactly."""

import json
from pathlib import Path

import pytest

from psnlib.replication.experiments import planned_runs

DATA = Path(__file__).parent / "data"
BEFORE = json.loads((DATA / "planned_run_keys.json").read_text())
NOW = json.loads((DATA / "planned_run_keys_31.json").read_text())
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("profile", sorted(BEFORE))
def test_every_run_planned_before_issue_31_is_still_planned(profile):
    planned = set(planned_runs(profile)["run"])
    assert sorted(set(BEFORE[profile]) - planned) == []


@pytest.mark.parametrize("profile", sorted(NOW))
def test_planned_run_keys_are_the_pinned_ones(profile):
    assert sorted(planned_runs(profile)["run"]) == NOW[profile]
