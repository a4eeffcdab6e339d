"""psnlib.replication.budget: what an experiment still has to compute, priced with measured per-run
times, said before it starts."""

import pandas as pd
import pytest

from psnlib.replication import budget, experiments
from psnlib.replication.experiments import BASE_POLICY, GRPO, PSN, PSN_KL
from psnlib.replication.profiles import get_profile

SMOKE = get_profile("smoke")


def _key(variant, seed):
    return variant.run_key(SMOKE, seed)


def test_estimate_prices_each_run_by_its_own_then_its_arms_measured_cost():
    planned = [(GRPO, 0, ("a", "b")), (PSN, 0, ("a",)), (BASE_POLICY, 0, ("a", "b"))]
    measured = pd.DataFrame(
        {
            "run": [_key(GRPO, 0), _key(PSN, 0), _key(BASE_POLICY, 0), "gone-s0-123"],
            "train_seconds": [100.0, 300.0, 0.0, 9999.0],  # a run no longer planned: ignored
            "eval_seconds": [40.0, 30.0, 20.0, 9999.0],
        }
    )
    todo = pd.DataFrame(
        [
            {"run": _key(GRPO, 0), "arm": "grpo", "train": True, "evaluations": 2},
            {"run": _key(PSN, 1), "arm": "psn", "train": True, "evaluations": 1},
            {"run": _key(PSN_KL, 0), "arm": "psn_kl", "train": True, "evaluations": 0},
            {"run": _key(BASE_POLICY, 0), "arm": "base", "train": True, "evaluations": 2},
            {"run": _key(GRPO, 1), "arm": "grpo", "train": False, "evaluations": 1},
        ]
    )
    # One evaluation (a run on a benchmark) costs (40 + 30 + 20) / (2 + 1 + 2) = 18 s. GRPO s0
    # its own 100 s; PSN s1 its arm's median, 300 s; the KL arm, never measured, the median of
    # all RL runs, 200 s; the base policy's SFT is not priced here.
    expected = (100 + 2 * 18) + (300 + 18) + 200 + 2 * 18 + 18
    assert budget.estimate_seconds(todo, measured, planned, SMOKE) == pytest.approx(expected)


def test_announcement_says_what_is_computed_and_for_how_long():
    todo = pd.DataFrame(
        [
            {"policy": "base", "seed": 0, "run": "b", "arm": "base", "train": True},
            {"policy": "GRPO", "seed": 0, "run": "g", "arm": "grpo", "train": True},
            {"policy": "GRPO", "seed": 1, "run": "h", "arm": "grpo", "train": False},
        ]
    ).assign(evaluations=[2, 2, 1])
    text = budget.announcement("main_results", todo, 4, 750.0, "figures/cpu/x.csv")
    assert text == (
        "[psnlib] main_results: 1 of 4 policies to train by RL, 5 evaluations to compute, a base "
        "policy to build by SFT first; about 12 min at the per-run times measured in "
        "figures/cpu/x.csv"
    )
    assert budget.announcement("m", todo, 4, None).endswith(
        "(no measured times for this profile to estimate from)"
    )
    assert budget.announcement("m", todo.iloc[:0], 4, None) == (
        "[psnlib] m: all 4 policies and their evaluations are cached"
    )


def test_a_fresh_plan_is_all_pending_and_run_announces_it_first(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    plan = experiments.main_results(SMOKE)
    todo = plan.pending()
    assert len(todo) == 1 + 3 * len(plan.seeds)  # base once, three arms at every seed
    assert todo["train"].all() and (todo["evaluations"] == len(plan.benchmarks)).all()
    figures = tmp_path / "figures"
    figures.mkdir()
    runs = [v.run_key(SMOKE, s) for v, s, _ in plan.work()]
    costs = pd.DataFrame({"run": runs, "train_seconds": 60.0, "eval_seconds": 6.0})
    costs.to_csv(figures / budget.COMPUTE_TABLE, index=False)
    monkeypatch.setattr(budget, "figures_dir", lambda profile: figures)
    said = []

    def compare(*args, **kwargs):
        said.append(capsys.readouterr().out)
        return {"curves": pd.DataFrame()}

    monkeypatch.setattr(experiments, "compare", compare)
    plan.run()
    assert said and said[0].startswith(f"[psnlib] main_results: 6 of {len(todo)} policies to")
    planned = {v.run_key(SMOKE, s): len(b) for v, s, b in experiments.planned_work(SMOKE)}
    per_evaluation = 6.0 * len(runs) / sum(planned[key] for key in runs)
    minutes = (6 * 60.0 + todo["evaluations"].sum() * per_evaluation) / 60
    assert f"about {minutes:.0f} min at the per-run times measured in figures/smoke/" in said[0]


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
