"""The run keys of every planned run: a change to the layout or to what a key covers must not
orphan finished runs. ``planned_run_keys.json`` was written by the code of 684c706
(``planned_runs(p)["run"]``, one thread), before issue 31 added runs: every one of those keys is
still planned. ``planned_run_keys_31.json`` was the whole plan of issue 31 (the released code's
PSN, the exploration baselines, the ablations at four seeds): every one of those keys is still
planned but the weak entropy bonus's (0.001), which issue 41 dropped. ``planned_run_keys_41.json``
is the whole plan of issue 41 (the released fixed configuration, the TIS three-way and the
baselines at 16 seeds, five ablation seeds, the per-replica draws): the plan now is exactly that
and, at cpu, the weaker entropy bonus (0.03) at the 16 baseline seeds, added when the 0.1 bonus
diverged in the round (profiles.py)."""

import json
from pathlib import Path

import pytest

from psnlib.replication.experiments import entropy_bonus, planned_runs
from psnlib.replication.profiles import get_profile

DATA = Path(__file__).parent / "data"
BEFORE = json.loads((DATA / "planned_run_keys.json").read_text())
ISSUE_31 = json.loads((DATA / "planned_run_keys_31.json").read_text())
NOW = json.loads((DATA / "planned_run_keys_41.json").read_text())
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("profile", sorted(BEFORE))
def test_every_run_planned_before_issue_31_is_still_planned(profile):
    planned = set(planned_runs(profile)["run"])
    assert sorted(set(BEFORE[profile]) - planned) == []


@pytest.mark.parametrize("profile", sorted(ISSUE_31))
def test_every_run_of_issue_31_is_still_planned_but_the_weak_entropy_bonus(profile):
    p = get_profile(profile)
    dropped = sorted(set(ISSUE_31[profile]) - set(planned_runs(p)["run"]))
    weak_bonus = entropy_bonus(0.001)  # issue 31 ran it at the 8 baseline seeds of cpu
    expected = [] if 0.001 in p.entropy_coefs else [weak_bonus.run_key(p, s) for s in range(8)]
    assert dropped == sorted(expected)


@pytest.mark.parametrize("profile", sorted(NOW))
def test_planned_run_keys_are_the_pinned_ones_and_the_weaker_bonus(profile):
    p = get_profile(profile)
    added = (
        [entropy_bonus(0.03).run_key(p, s) for s in p.baseline_seeds] if profile == "cpu" else []
    )
    assert sorted(planned_runs(p)["run"]) == sorted(NOW[profile] + added)
