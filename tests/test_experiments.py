"""Experiment plans, run sharing (the compute budget), and compare / the experiment functions at
the smoke profile: they read the run ledger's records and never train (a missing record is a
``MissingRecords`` naming it)."""

import pytest

from psnlib.replication.analysis import probe_tables, summaries
from psnlib.replication.compute import jobs, runs
from psnlib.replication.plan import experiments, schedule
from psnlib.replication.plan.experiments import BASE_POLICY, GRPO, PLANS, PSN
from psnlib.replication.plan.profiles import PROFILES, get_profile
from psnlib.replication.plan.schedule import planned_runs
from psnlib.replication.plan.variants import BASE, Variant
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords
from psnlib.replication.records.tables import compare
from psnlib.tasks.countdown import Problem


@pytest.fixture
def smoke_data(tmp_path, monkeypatch, one_thread):
    """Empty caches and an empty run ledger."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_plan_is_well_formed(profile):
    for name in PLANS:
        plan = experiments.plan(name, profile)
        labels = [v.label for v in plan.variants]
        assert len(set(labels)) == len(labels), name
        assert (plan.seeds and plan.benchmarks) or not plan.variants, name  # empty: not here


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
    # in- and out-of-distribution, and the tuning problems (for the tuning's training path)
    assert bases.benchmarks.max() == len(cpu.benchmarks) + len(cpu.tuning_benchmarks)
    table = table[table.arm != BASE.name]
    # The main arms at every seed: GRPO, PSN fixed, PSN adaptive II, GRPO + weak prefix, the
    # released code's two PSNs (fixed and Variant I) and PSN without TIS; the exploration
    # baselines at the baseline seeds; every ablation (with issue 41's per-replica draws) and the
    # other policy's two runs at the ablation seeds (issues 31, 41)
    n_main = 7 * len(cpu.seeds) + len(cpu.seeds)  # and the 3PO-style arm (issue 51)
    n_baselines = (1 + len(cpu.entropy_coefs)) * len(cpu.baseline_seeds)  # temperature, bonuses
    n_baselines -= sum(len(cpu.baseline_seeds) - len(s) for _, s in cpu.entropy_coef_seeds)
    # issue 51: the tuning (GRPO and three values of three knobs) at the tuning seeds, and the
    # released-code chain's two ablation-only arms (per-step noise, replicas) at its fresh seeds
    n_tuning = (1 + 3 * 3) * len(cpu.tuning_seeds)
    n_chain = 2 * len(cpu.chain_seeds)
    n_tuned = len(cpu.tuned_values) * len(cpu.tuned_seeds)  # each knob's choice, fresh seeds
    per_seed = 2 + 2 + (len(cpu.sigma_sweep) - 1 + len(cpu.relative_sigmas) + 2) + 1 + 1
    per_seed += 2  # GRPO and PSN + Pass@k training (not a primary comparison)
    per_seed += 4 + 1  # weak prefix: truncation, p = 0.5, p = 1, source; PSN + weak prefix
    per_seed += 2 * len(cpu.other_policies)
    ablations = per_seed * len(cpu.ablation_seeds)
    assert len(table) == n_main + n_baselines + n_tuning + n_chain + n_tuned + ablations
    grpo0 = table[(table.arm == "grpo") & (table.seed == 0) & (table.policy == "GRPO")]
    assert len(grpo0) == 1 and "main_results" in grpo0.used_by.item()
    assert "tis_ablation" in grpo0.used_by.item() and "coverage" in grpo0.used_by.item()
    # The sweep's sigma and scope at the profile's values are the PSN run itself.
    psn0 = table[table.run == PSN.run_key(cpu, 0)].used_by.item()
    assert psn0.count("sigma_sweep") == 1 and "noise_site" in psn0


def _no_compute(monkeypatch) -> None:
    """Training or sampling from now on fails the test."""
    monkeypatch.setattr(runs, "PSNGRPOTrainer", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(runs, "train_policy", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(runs, "load_variant", lambda *a, **k: pytest.fail("loaded a policy"))
    monkeypatch.setattr("psnlib.evaluate.sample_prompts", lambda *a, **k: pytest.fail("sampled"))


def test_compare_reads_the_records_and_trains_nothing(smoke_data, monkeypatch):
    variants_ = [
        BASE_POLICY,
        GRPO,
        Variant("PSN step", "psn", {"noise_scope": "step"}, tags={"v": 1}),
    ]
    smoke, benchmarks = get_profile("smoke"), ("countdown-l1",)
    for v in variants_:
        for seed in v.seeds((0, 1)):
            jobs.run_task(smoke, schedule.Task(v, seed, benchmarks))  # what make reproduce does
    _no_compute(monkeypatch)
    tables = compare("smoke", variants_, (0, 1), benchmarks)
    curves, problems, logs = tables["curves"], tables["problems"], tables["logs"]
    assert list(curves.columns[:3]) == ["policy", "seed", "v"]
    assert set(zip(curves.policy, curves.seed, strict=True)) == {
        ("base", 0),
        ("GRPO", 0),
        ("GRPO", 1),
        ("PSN step", 0),
        ("PSN step", 1),
    }
    assert (curves.benchmark == "countdown-l1").all() and curves.k.max() == 16
    assert len(problems) == 5 * smoke.eval_problems
    assert set(logs.policy) == {"GRPO", "PSN step"}
    assert logs.step.max() == smoke.rl_steps


def test_compare_names_every_missing_record_and_trains_nothing(smoke_data, monkeypatch):
    _no_compute(monkeypatch)
    with pytest.raises(MissingRecords, match=r"\['base seed 0', 'GRPO seed 0', 'GRPO seed 1'\]"):
        compare("smoke", [BASE_POLICY, GRPO], (0, 1), ("countdown-l1",))
    with pytest.raises(MissingRecords, match=r"no usable record of \['base seed 0', 'GRPO seed 0"):
        summaries.read(experiments.rl_narrows_coverage(get_profile("smoke")), (0,), False)


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


def test_probes_name_what_no_record_holds_and_compute_nothing(smoke_data, monkeypatch):
    _no_compute(monkeypatch)
    smoke = get_profile("smoke")
    for read in (
        lambda: probe_tables.testbed(smoke),
        lambda: probe_tables.prefix_quality_table(smoke),
        lambda: probe_tables.base_temperatures(smoke),
        lambda: probe_tables.calibration(smoke),
        lambda: probe_tables.side_by_side(smoke, [BASE_POLICY], Problem((7, 3, 5, 4), 22)),
    ):
        with pytest.raises(MissingRecords, match=r"no usable record of \['(base|GRPO) seed 0 \("):
            read()
    with pytest.raises(MissingRecords, match="at seed 0 only, not 1"):
        probe_tables.calibration(smoke, 1)
