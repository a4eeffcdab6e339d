"""psnlib.replication.compute.budget: what an experiment still has to compute (the plans only read
the ledger) and the SFT builds still to make, said before they start."""

import pytest

from psnlib.replication.analysis import summaries
from psnlib.replication.compute import budget, runs
from psnlib.replication.plan import experiments
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords

SMOKE = get_profile("smoke")


def _key(variant, seed):
    return variant.run_key(SMOKE, seed)


def test_a_fresh_plan_is_all_pending_and_running_it_names_what_is_missing_computing_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    plan = experiments.main_results(SMOKE)
    todo = budget.pending(plan.profile, plan.work())
    assert len(todo) == 1 + 3 * len(plan.seeds)  # base once, three arms at every seed
    assert todo["train"].all() and (todo["evaluations"] == len(plan.benchmarks)).all()

    def train(*args, **kwargs):
        raise AssertionError("a plan's run trained a policy")

    monkeypatch.setattr(runs, "load_variant", train)
    with pytest.raises(MissingRecords, match="GRPO seed 0"):
        summaries.read(plan, progress=False)


def test_unbuilt_policies_are_announced_with_their_measured_sft_time(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))  # nothing built
    monkeypatch.setattr(budget, "figures_dir", lambda profile: tmp_path)
    p = SMOKE
    policies = {"base": p.base, "weak": p.weak}
    assert budget.sft_announcement(p, policies) == (
        "[psnlib] to build by SFT first: the base and weak policy"
    )
    (tmp_path / budget.TESTBED_METRICS).write_text('{"build_seconds": {"base": 600, "weak": 60}}')
    assert budget.sft_announcement(p, policies) == (
        "[psnlib] to build by SFT first: the base and weak policy, about 11 min as measured in "
        "figures/smoke/01_testbed.json"
    )
    monkeypatch.setattr(budget, "policy_dir", lambda spec: tmp_path)  # an existing directory
    assert budget.sft_announcement(p, policies) is None
