"""Experiment plans, run sharing (the compute budget), and compare / the experiment functions at
the smoke profile."""

import pytest
import torch

from psnlib.replication import budget, experiments, probes, runs
from psnlib.replication.experiments import BASE_POLICY, GRPO, PLANS, PSN, planned_runs
from psnlib.replication.profiles import PROFILES, get_profile
from psnlib.replication.variants import BASE, Variant, compare
from psnlib.tasks.countdown import Problem


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSNLIB_DATA", str(tmp_path_factory.mktemp("data")))
        torch.set_num_threads(1)
        yield


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_plan_is_well_formed(profile):
    for name in PLANS:
        plan = experiments.plan(name, profile)
        labels = [v.label for v in plan.variants]
        assert len(set(labels)) == len(labels), name
        assert plan.seeds and plan.benchmarks, name


def test_unknown_experiment_and_bad_variants_are_named():
    with pytest.raises(ValueError, match=r"unknown experiment 'main'; allowed: \['across"):
        experiments.plan("main", "smoke")
    with pytest.raises(ValueError, match="unknown arm 'ppo'"):
        Variant("x", "ppo")
    with pytest.raises(ValueError, match="no RL settings"):
        Variant("x", BASE, {"sigma": 0.1})
    with pytest.raises(ValueError, match="distinct"):
        compare("smoke", [GRPO, Variant("GRPO", "psn")], (0,))


def test_runs_are_shared_across_experiments():
    cpu = get_profile("cpu")
    table = planned_runs(cpu)
    assert table["run"].is_unique
    bases = table[table.arm == BASE.name]
    assert len(bases) == 1 + len(cpu.other_policies)
    assert bases.benchmarks.max() == len(cpu.benchmarks)  # in- and out-of-distribution
    table = table[table.arm != BASE.name]
    # The main arms at every seed: GRPO, PSN fixed, PSN adaptive II, GRPO + weak prefix, the
    # released code's two PSNs (fixed and Variant I) and PSN without TIS; the exploration
    # baselines at the baseline seeds; every ablation (with issue 41's per-replica draws) and the
    # other policy's two runs at the ablation seeds (issues 31, 41)
    n_main = 7 * len(cpu.seeds)
    n_baselines = (1 + len(cpu.entropy_coefs)) * len(cpu.baseline_seeds)  # temperature, bonuses
    per_seed = 2 + 2 + (len(cpu.sigma_sweep) - 1 + len(cpu.relative_sigmas) + 2) + 1 + 1
    per_seed += 2  # GRPO and PSN + Pass@k training (not a primary comparison)
    per_seed += 4 + 1  # weak prefix: truncation, p = 0.5, p = 1, source; PSN + weak prefix
    per_seed += 2 * len(cpu.other_policies)
    assert len(table) == n_main + n_baselines + per_seed * len(cpu.ablation_seeds)
    grpo0 = table[(table.arm == "grpo") & (table.seed == 0) & (table.policy == "GRPO")]
    assert len(grpo0) == 1 and "main_results" in grpo0.used_by.item()
    assert "tis_ablation" in grpo0.used_by.item() and "coverage" in grpo0.used_by.item()
    # The sweep's sigma and scope at the profile's values are the PSN run itself.
    psn0 = table[table.run == PSN.run_key(cpu, 0)].used_by.item()
    assert psn0.count("sigma_sweep") == 1 and "noise_site" in psn0


def test_compare_trains_once_and_returns_tidy_tables(smoke_data, monkeypatch):
    variants = [
        BASE_POLICY,
        GRPO,
        Variant("PSN step", "psn", {"noise_scope": "step"}, tags={"v": 1}),
    ]
    work = [(v, seed, ("countdown-l1",)) for v in variants for seed in v.seeds((0, 1))]
    todo = budget.pending(get_profile("smoke"), work)
    assert len(todo) == 5 and todo[todo.arm != BASE.name]["train"].all()
    first = compare("smoke", variants, (0, 1), ("countdown-l1",), progress=False)
    assert budget.pending(get_profile("smoke"), work).empty  # trained and evaluated: nothing left
    more = budget.pending(get_profile("smoke"), [(GRPO, 0, ("countdown-l1", "countdown-l2"))])
    assert more[["train", "evaluations"]].values.tolist() == [[False, 1]]
    curves, problems, logs = first["curves"], first["problems"], first["logs"]
    assert list(curves.columns[:3]) == ["policy", "seed", "v"]
    assert set(zip(curves.policy, curves.seed, strict=True)) == {
        ("base", 0),
        ("GRPO", 0),
        ("GRPO", 1),
        ("PSN step", 0),
        ("PSN step", 1),
    }
    assert (curves.benchmark == "countdown-l1").all() and curves.k.max() == 16
    assert len(problems) == 5 * get_profile("smoke").eval_problems
    assert set(logs.policy) == {"GRPO", "PSN step"}
    assert logs.step.max() == get_profile("smoke").rl_steps
    # Everything is cached now: nothing trains, nothing samples.
    monkeypatch.setattr(runs, "PSNGRPOTrainer", lambda *a, **k: pytest.fail("retrained"))
    monkeypatch.setattr("psnlib.evaluate.sample_prompts", lambda *a, **k: pytest.fail("sampled"))
    again = compare("smoke", variants, (0, 1), ("countdown-l1",), progress=False)
    assert again["curves"].equals(curves)


def test_experiments_are_documented_functions_returning_their_plan():
    """Go-to-definition on an experiment lands on its own function, not a factory's closure."""
    for name, function in PLANS.items():
        assert function.__qualname__ == name and function.__module__ == experiments.__name__
        assert function.__doc__ and "notebook" in function.__doc__, name
        assert function(get_profile("smoke")).name == name
    assert experiments.plan("main_results", "cpu").variants == experiments.MAIN


def test_a_variant_shows_the_settings_it_changes_from_grpo():
    cpu = get_profile("cpu")
    assert GRPO.effective_settings(cpu) == {} and BASE_POLICY.effective_settings(cpu) == {}
    assert PSN.effective_settings(cpu) == {"sigma": cpu.psn_sigma, "use_tis": True}
    assert experiments.PSN_DIV.effective_settings(cpu) == {
        "sigma": cpu.psn_sigma,
        "sigma_scheduler": "diversity",
        "div_similarity": "lexical",
        "div_fraction": 0.5,
        "use_tis": True,
    }
    # A setting at GRPO's own value is no change; one at PSNGRPOConfig's default neither.
    same = Variant("x", "grpo", {"noise_scope": cpu.psn_scope, "tis_level": "token"})
    assert same.effective_settings(cpu) == {}
    assert experiments.WEAK_PREFIX.effective_settings(cpu) == {
        "prefix_truncation": "entropy",
        "prefix_source": "weak",
        "prefix_prob": 0.2,
    }


def test_the_arms_table_reads_the_plans_variants():
    tis = experiments.plan("tis_ablation", "cpu").arms()
    assert list(tis.index) == ["GRPO", "PSN fixed", "PSN, no TIS", "PSN, sequence-level TIS"] + [
        "PSN, TIS cap C=2"
    ]
    changed = tis["settings that differ from GRPO"]
    sigma = f"sigma={get_profile('cpu').psn_sigma}"
    assert changed["PSN, TIS cap C=2"] == f"{sigma}, tis_cap=2, use_tis=True"
    assert changed["PSN, no TIS"] == sigma
    assert (tis["seeds"] == len(get_profile("cpu").ablation_seeds)).all()
    main = experiments.plan("main_results", "cpu").arms()
    assert main.loc["base", "seeds"] == 1 and main.loc["GRPO", "seeds"] == len(
        get_profile("cpu").seeds
    )
    across = experiments.plan("across_models", "cpu").arms()
    assert set(across["base policy"]) == {"qwen2-base", "llama-weak"}


def test_experiment_functions_add_their_tables(smoke_data):
    r = experiments.rl_narrows_coverage(get_profile("smoke")).run(seeds=(0,), progress=False)
    assert {"curves", "problems", "logs", "summary"} <= set(r)
    assert "average" in set(r["summary"].benchmark)
    assert set(r["curves"].policy) == {"base", "GRPO"}
    frontier = probes.noise_frontier(get_profile("smoke"), sigmas=(0.0, 0.01))
    assert list(frontier.policy.unique()) == ["sigma=0", "sigma=0.01"]
    assert set(frontier.benchmark) == set(get_profile("smoke").ablation_benchmarks)


def test_side_by_side_shows_correct_answers_first(smoke_data):
    shown = probes.side_by_side(get_profile("smoke"), [BASE_POLICY], Problem((7, 3, 5, 4), 22))
    assert len(shown) == get_profile("smoke").example_responses
    assert shown.correct.tolist() == sorted(shown.correct, reverse=True)
    assert (shown.correct_in_draw >= shown.correct.sum()).all()


def test_testbed_reports_both_policies(smoke_data):
    r = probes.testbed(get_profile("smoke"))
    assert r["policies"].policy.tolist() == ["base", "weak"]
    assert set(r["curves"].policy) == {"base", "weak"}
