"""The premise, powered (psnlib.replication.plan.premise, computed by
psnlib.replication.compute.premise_evaluation, read by psnlib.replication.analysis.premise_tables):
the temperature search, the noise draws (one per rollout slot), the two noise sites (PSN fixed's
MLP, the released code's every parameter), the plan's paired tables, its caches, and bad input."""

import math
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from psnlib import noise as noise_module
from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.analysis import premise_tables
from psnlib.replication.analysis.claim_stats import PASS_AT_MAX
from psnlib.replication.analysis.premise_tables import paired_interval
from psnlib.replication.compute import premise_evaluation
from psnlib.replication.compute import premise_sampling as sampling_module
from psnlib.replication.compute.premise_sampling import (
    judge,
    match_temperature,
    pass1_at_temperatures,
    pool_draws,
    sample_problems,
)
from psnlib.replication.compute.store import ResultStore
from psnlib.replication.plan import arms
from psnlib.replication.plan import premise as premise_module
from psnlib.replication.plan.experiments import GRPO
from psnlib.replication.plan.premise import MATCHED_TEMPERATURE, SAMPLING_NOISE, premise
from psnlib.replication.plan.profiles import RELEASED_SIGMA, get_profile
from psnlib.replication.plan.variants import EVAL_SEED
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords
from psnlib.replication.records.tables import premise_expectation
from psnlib.replication.report.regime import main_benchmark
from psnlib.tasks import load_benchmark
from psnlib.tasks.countdown import Problem, enumerate_solutions

# The smoke profile with fewer, shorter samples: the premise's own work, in seconds
SMALL = get_profile("smoke").with_overrides(eval_problems=4, max_completion_length=16)


def computed(plan, seeds=None) -> dict[str, pd.DataFrame]:
    """The premise's tables of ``plan`` at ``seeds``, each checkpoint computed (or loaded) here."""
    return premise_tables.tables(plan, premise_evaluation.compute(plan, seeds, progress=False))


def test_the_search_finds_the_temperature_of_a_monotone_pass1():
    def falling(t):  # pass@1 falls as T rises, as a sharpened policy's does
        return 0.12 * math.exp(-1.5 * (t - 1.0))

    for true_t in (1.0, 1.1, 1.37, 1.9):
        found = match_temperature(falling, falling(true_t), start=1.0, bounds=(0.5, 2.0))
        assert found.matched and found.temperature == pytest.approx(true_t, abs=5e-3)
        assert len(found.trace) <= 1 + 3 + 2  # T0, steps to 1.25 / 1.5 / 2, two halvings
    assert [t for t, _ in match_temperature(falling, falling(1.1)).trace][:2] == [1.0, 1.25]
    # noise that raises pass@1 above T = 1's is matched below 1
    found = match_temperature(falling, falling(0.7), start=1.0)
    assert found.matched and found.temperature == pytest.approx(0.7, abs=5e-3)
    assert all(t <= 1.0 for t, _ in found.trace)
    # a linear pass@1 is matched exactly (the chord of the last bracket)
    found = match_temperature(lambda t: 0.3 - 0.1 * t, 0.3 - 0.1 * 1.234, iterations=2)
    assert found.temperature == pytest.approx(1.234, abs=1e-12)


def test_a_target_no_temperature_reaches_is_reported_unmatched_at_the_nearest():
    def falling(t):
        return 0.30 - 0.10 * (t - 1.0)  # 0.35 at T = 0.5, 0.20 at T = 2

    low = match_temperature(falling, 0.05)  # noise far below even T = 2's pass@1
    assert not low.matched and low.temperature == 2.0
    assert [t for t, _ in low.trace] == [1.0, 1.25, 1.5, 2.0]  # walked to the bound, no more
    high = match_temperature(falling, 0.5)
    assert not high.matched and high.temperature == 0.5
    assert [t for t, _ in high.trace] == [1.0, 0.75, 0.5]
    # a policy that never solves matches at the start (equal pass@1, 0), in one estimate
    zero = match_temperature(lambda t: 0.0, 0.0)
    assert zero.matched and zero.temperature == 1.0 and len(zero.trace) == 1


def test_the_search_refuses_bad_input():
    with pytest.raises(ValueError, match=r"target must be a pass@1 in \[0, 1\], got 1.5"):
        match_temperature(lambda t: 0.1, 1.5)
    with pytest.raises(ValueError, match="bounds must be 0 < lo < hi"):
        match_temperature(lambda t: 0.1, 0.1, bounds=(2.0, 1.0))
    with pytest.raises(ValueError, match="lo <= start <= hi"):
        match_temperature(lambda t: 0.1, 0.1, start=3.0)
    with pytest.raises(ValueError, match="iterations must be an integer >= 0, got -1"):
        match_temperature(lambda t: 0.1, 0.1, iterations=-1)
    with pytest.raises(ValueError, match="step must be a finite number > 0, got 0"):
        match_temperature(lambda t: 0.1, 0.1, step=0)


def test_draws_pool_into_one_row_per_problem():
    a = pd.DataFrame(
        {"prompt": ["p", "q"], "n": [2, 2], "correct": [1, 0], "length": [10.0, 20.0]}
        | {"entropy": [0.5, np.nan], "note": ["x", "y"]}
    )
    b = a.assign(correct=[2, 1], length=[30.0, 20.0], entropy=[1.5, 1.0], note=["x", "z"])
    pooled = pool_draws([a, b])
    assert list(pooled.columns) == ["prompt", "n", "correct", "length", "entropy"]
    assert pooled["n"].tolist() == [4, 4] and pooled["correct"].tolist() == [3, 1]
    assert pooled["length"].tolist() == [20.0, 20.0] and pooled["entropy"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="at least one draw"):
        pool_draws([])
    with pytest.raises(ValueError, match="same problems and columns"):
        pool_draws([a, b.iloc[:1]])


def test_samples_are_judged_exactly():
    dataset = load_benchmark("countdown-l3", 2)
    numbers, target = dataset[0]["numbers"], dataset[0]["target"]
    wrong = f"{numbers[0]}+{numbers[1]}={numbers[0] + numbers[1]}"
    assert judge("countdown-l3", dataset, [[wrong, "", "x"], []]) == [0, 0]
    solved = enumerate_solutions(Problem(tuple(numbers), target))[0]
    assert judge("countdown-l3", dataset, [[solved, solved, wrong], []]) == [2, 0]


def test_the_plan_compares_two_views_of_the_grpo_run_on_the_main_benchmark():
    for name in ("smoke", "cpu"):
        p = get_profile(name)
        plan = premise(p)
        assert plan.name == "premise" and plan.seeds == (p.premise_seeds or p.seeds)
        assert plan.variants[:2] == [SAMPLING_NOISE, MATCHED_TEMPERATURE]  # the MLP site's
        assert plan.benchmarks == (main_benchmark(p),) and plan.sigma == p.psn_sigma
        assert p.eval_samples % plan.draws == 0 and plan.search_samples >= 1
        for v in plan.variants:  # the GRPO run itself: nothing new trains
            assert v.run_key(p, 3) == GRPO.run_key(p, 3)
    assert len(premise("cpu").seeds) == 16
    assert SAMPLING_NOISE.label == "GRPO, sampled under noise"
    assert MATCHED_TEMPERATURE.label == "GRPO, temperature at equal pass@1"
    assert list(premise("smoke").arms().index[:2]) == [
        SAMPLING_NOISE.label,
        MATCHED_TEMPERATURE.label,
    ]


def test_the_plan_refuses_bad_input():
    smoke = get_profile("smoke")
    for seeds in ("0,1", [0.5]):  # computed or read from the ledger: refused before any work
        with pytest.raises(ValueError, match="seeds must be None or a non-empty list"):
            premise_evaluation.compute(premise(smoke), seeds=seeds, progress=False)
        with pytest.raises(ValueError, match="seeds must be None or a non-empty list"):
            premise_tables.read(premise(smoke), seeds=seeds, progress=False)
    with pytest.raises(ValueError, match="eval_samples must be >= 8 .* got 4"):
        premise(smoke.with_overrides(eval_samples=4, ks=(1, 2, 4)))
    with pytest.raises(ValueError, match=r"eval_temperature must lie in the searched \[0.5, 2.0\]"):
        premise(smoke.with_overrides(eval_temperature=3.0))
    with pytest.raises(ValueError, match="unknown profile 'tiny'"):
        premise("tiny")
    with pytest.raises(ValueError, match=r"seeds must be .* got \['0'\]"):
        premise_evaluation.premise_parts(smoke, "0")
    tokenizer = build_tokenizer()
    model = tiny_policy("qwen2", "smoke", tokenizer, seed=0)
    dataset = load_benchmark("countdown-l3", 2)
    with pytest.raises(ValueError, match=r"draws must be >= 1 and divide samples \(16\), got 3"):
        sample_problems(
            model,
            tokenizer,
            dataset,
            "countdown-l3",
            samples=16,
            draws=3,
            temperature=1.0,
            sigma=0.0,
            noise_seed=0,
            max_new_tokens=8,
        )


def _three_checkpoints(K: int) -> pd.DataFrame:
    """A matched table of three seeds (the third unmatched), noise ahead by 0.1, 0.1 and 0.2."""
    return pd.DataFrame(
        {
            "seed": [0, 1, 2],
            "matched": [True, True, False],
            "noise pass@1": [0.10, 0.10, 0.10],
            "temperature pass@1": [0.10, 0.11, 0.14],
            f"noise pass@{K}": [0.50, 0.60, 0.70],
            f"temperature pass@{K}": [0.40, 0.50, 0.50],
        }
    )


def test_the_paired_interval_is_a_t_interval_over_seeds():
    K = SMALL.ks[-1]
    matched = _three_checkpoints(K)
    table = paired_interval(matched, SMALL).set_index(["statistic", "seeds"])
    every = table.loc[(f"pass@{K}", "all")]
    d = np.array([10.0, 10.0, 20.0])  # noise - temperature, points
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert every["S"] == 3 and every["difference"] == pytest.approx(d.mean())
    assert (every["lo"], every["hi"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert every["noise"] == pytest.approx(60.0) and every["temperature"] == pytest.approx(140 / 3)
    only = table.loc[(f"pass@{K}", "matched")]  # seeds 0 and 1: both +10, no spread
    assert only["S"] == 2 and only["lo"] == pytest.approx(10.0) == only["hi"]
    assert table.loc[("pass@1", "all"), "difference"] == pytest.approx(-5 / 3)  # 0, -1, -4
    one = paired_interval(matched.iloc[:1], SMALL).set_index(["statistic", "seeds"])
    assert math.isnan(one.loc[(f"pass@{K}", "all"), "lo"])  # one seed: no interval
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\), got 95"):
        paired_interval(matched, SMALL, level=95)


def test_pass1_is_measured_at_each_temperature(one_thread):
    tokenizer = build_tokenizer()
    model = tiny_policy("qwen2", "smoke", tokenizer, seed=0).eval()
    table = pass1_at_temperatures(model, tokenizer, SMALL, "countdown-l3", (1.0, 0.6), samples=4)
    assert list(table["temperature"]) == [1.0, 0.6] and (table["samples"] == 4).all()
    assert ((table["lo"] <= table["pass@1"]) & (table["pass@1"] <= table["hi"])).all()
    with pytest.raises(ValueError, match="temperatures must be finite numbers > 0, got"):
        pass1_at_temperatures(model, tokenizer, SMALL, "countdown-l3", (1.0, 0.0))


@pytest.fixture
def untrained(monkeypatch, tmp_path, one_thread):
    """An empty data directory, and the GRPO checkpoint of each seed replaced by an untrained
    smoke policy (no SFT, no RL: the premise's own work only)."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    tokenizer = build_tokenizer()
    models = {}

    def load(profile, variant, seed):
        assert variant == GRPO, variant
        if seed not in models:
            models[seed] = tiny_policy("qwen2", "smoke", tokenizer, seed=seed).eval()
        return models[seed], tokenizer, pd.DataFrame()

    monkeypatch.setattr(premise_evaluation, "load_variant", load)
    return tmp_path


def test_both_policies_are_sampled_on_the_same_problems_and_streams(untrained):
    smoke = SMALL
    out = computed(premise(smoke))
    problems, matched = out["problems"], out["matched"]
    assert set(out) >= {"problems", "curves", "logs", "summary", "matched", "search"}
    keys = ["seed", "benchmark", "prompt"]
    plan = premise(smoke)
    assert (problems["n"] == smoke.eval_samples).all() and set(problems.seed) == set(smoke.seeds)
    assert set(problems.benchmark) == {main_benchmark(smoke)}
    assert matched["matched"].dtype == bool
    for site, policies in premise_module.POLICIES.items():
        noise, hot = (problems[problems.policy == v.label] for v in policies)
        assert len(noise) == len(smoke.seeds) * smoke.eval_problems
        assert (noise["site"] == site).all() and (hot["site"] == site).all()
        assert noise[keys].reset_index(drop=True).equals(hot[keys].reset_index(drop=True))
        assert (noise["sigma"] == plan.sigma_at(site)).all() and (hot["sigma"] == 0).all()
        # the claims' statistic reads both from it: per seed and problem, pass@K of each
        a, b = (PASS_AT_MAX.problem_values(problems, v.label, smoke) for v in policies)
        both = a.merge(b, on=keys, suffixes=("_noise", "_temperature"))
        assert len(both) == len(a) == len(b) and both["value_noise"].between(0, 1).all()
        rows = matched[matched["site"] == site]
        assert list(rows["seed"]) == list(smoke.seeds)
        K = smoke.ks[-1]
        for column in ("noise pass@1", "temperature pass@1", f"noise pass@{K}", "cpu_seconds"):
            assert rows[column].notna().all(), column
        # the noise is applied: sampled under it, the same streams write other completions
        # (exactly equal at sigma 0: the next test)
        assert (noise["entropy"].to_numpy() != hot["entropy"].to_numpy()).all()
    assert set(out["curves"]["k"]) == set(smoke.ks) and out["logs"].empty


def test_without_noise_both_policies_draw_identical_samples(untrained):
    """Common random numbers: at sigma 0 the noise arm is the clean policy, and at the matched
    temperature (T = 1, both pass@1 0 here) the same streams write the same completions."""
    clean = SMALL.with_overrides(psn_sigma=0.0)  # both sites' (smoke states no released sigma)
    out = computed(premise(clean), seeds=(0,))
    assert out["matched"]["temperature"].tolist() == [1.0, 1.0]  # per site
    columns = ["prompt", "n", "correct", "entropy", "length"]
    for noise_policy, hot_policy in premise_module.POLICIES.values():
        noise, hot = (
            out["problems"][out["problems"].policy == v.label] for v in (noise_policy, hot_policy)
        )
        assert noise[columns].reset_index(drop=True).equals(hot[columns].reset_index(drop=True))


def test_a_finished_premise_is_loaded_and_a_killed_one_resumes(untrained, monkeypatch):
    smoke = SMALL
    plan = premise(smoke)
    assert premise_evaluation.pending(plan)["premise"].all()
    first = computed(plan)
    assert premise_evaluation.pending(plan)["premise"].sum() == 0  # every checkpoint's stored
    assert "0 checkpoints to evaluate" in premise_evaluation.announcement(plan)  # (GRPO faked)
    calls = []
    real = premise_evaluation.sample_problems

    def counted(*args, **kwargs):
        calls.append(kwargs["temperature"])
        return real(*args, **kwargs)

    def fail(*args, **kwargs):
        pytest.fail("evaluated again")

    monkeypatch.setattr(premise_evaluation, "sample_problems", fail)
    again = computed(plan)
    for name in ("problems", "matched", "search", "curves"):
        pd.testing.assert_frame_equal(again[name], first[name], check_dtype=False)
    # a run killed before its last parts: only those are computed again
    (folder,) = untrained.glob(f"results/smoke/premise-{GRPO.run_key(smoke, 1)}-*")
    assert {p.stem for p in folder.glob("*.json")} - {"config"} == set(premise_module.PARTS)
    for part in ("temperature", "every_parameter_temperature"):
        (folder / f"{part}.json").unlink()
    monkeypatch.setattr(premise_evaluation, "sample_problems", counted)
    resumed = computed(plan)
    assert len(calls) == 2  # the full evaluation at each site's matched temperature
    pd.testing.assert_frame_equal(resumed["problems"], first["problems"], check_dtype=False)


def test_a_stored_premise_part_without_rows_is_named_and_recomputed(untrained, monkeypatch):
    """A stored part that parses but holds no rows (valid JSON, wrong content) is named in a
    warning and sampled again, never read as a checkpoint with no problems."""
    plan = premise(SMALL)
    first = computed(plan, seeds=(0,))
    (part,) = untrained.glob(f"results/smoke/premise-{GRPO.run_key(SMALL, 0)}-*/temperature.json")
    store = ResultStore(part.parent)
    tables = store.load("temperature")
    store.save("temperature", {**tables, "problems": tables["problems"].iloc[:0]})
    calls = []
    real = premise_evaluation.sample_problems

    def counted(*args, **kwargs):
        calls.append(kwargs["temperature"])
        return real(*args, **kwargs)

    monkeypatch.setattr(premise_evaluation, "sample_problems", counted)
    with pytest.warns(UserWarning, match=r"temperature\.json: table 'problems' has no rows"):
        again = computed(plan, seeds=(0,))
    assert len(calls) == 1  # the full evaluation at the matched temperature, once more
    pd.testing.assert_frame_equal(again["problems"], first["problems"], check_dtype=False)


def test_a_stored_match_with_a_nan_temperature_is_searched_again(untrained, monkeypatch):
    """A stored match part that parses but names T = NaN (damaged, yet valid JSON) is never
    sampled at: the search runs again and the temperature part is made at a finite T."""
    plan = premise(SMALL)
    first = computed(plan, seeds=(0,))
    (part,) = untrained.glob(f"results/smoke/premise-{GRPO.run_key(SMALL, 0)}-*/match.json")
    store = ResultStore(part.parent)
    match = store.load("match")
    store.save("match", {**match, "result": match["result"].assign(temperature=math.nan)})
    sampled = []
    real = premise_evaluation.sample_problems

    def counted(*args, **kwargs):
        sampled.append(kwargs["temperature"])
        return real(*args, **kwargs)

    monkeypatch.setattr(premise_evaluation, "sample_problems", counted)
    again = computed(plan, seeds=(0,))
    assert sampled and all(math.isfinite(t) for t in sampled)
    matched = float(again["matched"]["temperature"].iloc[0])
    assert math.isfinite(matched) and matched == float(first["matched"]["temperature"].iloc[0])


# ------------------------------------------------ draws as training does; the released site


def test_the_noise_is_drawn_once_per_rollout_slot():
    """As PSN fixed draws it in training (scope 'rollout': rollout k of every group runs noise
    sample k): D = num_generations draws, and D must divide eval_samples."""
    for name in ("smoke", "cpu"):
        p = get_profile(name)
        assert premise(p).draws == p.num_generations == premise_module.draws_for(p)
    assert premise("cpu").draws == 8
    assert premise(SMALL.with_overrides(num_generations=8)).draws == 8  # 2 samples a draw
    with pytest.raises(ValueError, match="num_generations must divide eval_samples, got .*=16"):
        premise(SMALL.with_overrides(num_generations=3))


def _recorded(monkeypatch, moved_from=None):
    """Record every noise context and sampling call of ``premise_sampling`` in order (the real
    ones run): ("noise", targets, sigma, noise seed, step, index[, names of the parameters that
    differ from ``moved_from`` inside it]) and ("sample", prompts, n, seed, temperature)."""
    calls = []
    real_perturbed, real_sample = sampling_module.perturbed, sampling_module.sample_prompts

    @contextmanager
    def perturbed(model, config, step=0, index=0, sigma=None):
        with real_perturbed(model, config, step, index, sigma) as m:
            call = ("noise", config.targets, config.sigma, config.seed, step, index)
            if moved_from is not None:
                moved = {k for k, p in m.named_parameters() if not torch.equal(p, moved_from[k])}
                call += (moved,)
            calls.append(call)
            yield m

    def sample_prompts(model, tokenizer, prompts, n, **kwargs):
        calls.append(("sample", len(prompts), n, kwargs["seed"], kwargs["temperature"]))
        return real_sample(model, tokenizer, prompts, n, **kwargs)

    monkeypatch.setattr(sampling_module, "perturbed", perturbed)
    monkeypatch.setattr(sampling_module, "sample_prompts", sample_prompts)
    return calls


def test_each_draw_writes_its_share_of_every_problem_under_its_noise_index(untrained, monkeypatch):
    profile = SMALL.with_overrides(num_generations=8)
    D, P = 8, profile.eval_problems
    share = profile.eval_samples // D  # 2
    calls = _recorded(monkeypatch)
    parts = premise_evaluation.premise_parts(profile, 1)
    pairs = list(zip(calls[::2], calls[1::2], strict=True))  # each sample in its noise context
    assert all(c[0] == "noise" and s[0] == "sample" for c, s in pairs)
    runs: list[list] = []  # one per sample_problems call: its draws, noise index 0, 1, ...
    for c, s in pairs:
        if c[5] == 0:
            runs.append([])
        runs[-1].append((c, s))
    full = [run for run in runs if len(run) > 1]  # the search's estimates: one draw each
    assert all(len(run) == 1 and run[0][1][2] == share for run in runs if len(run) == 1)
    assert len(full) == 4 and all(len(run) == D for run in full)  # noise, temperature x 2 sites
    noise = [run for run in full if run[0][0][2] > 0]
    assert [run[0][0][1] for run in noise] == [("mlp",), ("every_parameter",)]
    for run in full:  # draw d: noise index d, stream EVAL_SEED + d, an equal share
        T = run[0][1][4]
        for d, (c, s) in enumerate(run):
            assert c[3:] == (1, premise_module.NOISE_STEP, d)  # noise seed: the training seed
            assert s == ("sample", P, share, EVAL_SEED + d, T)
    assert all(run[0][1][4] == profile.eval_temperature for run in noise)
    for site in premise_module.SITES:
        for step in ("noise", "temperature"):
            table = parts[premise_module.SITE_PARTS[site][step]]["problems"]
            assert len(table) == P and (table["n"] == profile.eval_samples).all()


def test_the_released_site_perturbs_every_parameter_at_the_released_sigma(untrained, monkeypatch):
    cpu, smoke = get_profile("cpu"), get_profile("smoke")
    assert premise_module.site_sigmas(cpu) == {"mlp": 0.011, "every_parameter": RELEASED_SIGMA}
    assert premise(cpu).released_sigma == RELEASED_SIGMA == 0.00558
    assert premise_module.site_sigmas(smoke)["every_parameter"] == smoke.psn_sigma  # none stated
    released = 0.02
    fixed = ((arms.PSN_RELEASED_FIXED, (("sigma", released),)),)
    profile = SMALL.with_overrides(arm_settings=SMALL.arm_settings + fixed)
    model, _, _ = premise_evaluation.load_variant(profile, GRPO, 0)  # the fixture's, cached
    clean = {name: t.clone() for name, t in model.state_dict().items()}
    calls = _recorded(monkeypatch, moved_from=clean)
    premise_evaluation.premise_parts(profile, 0)
    noisy = [c for c in calls if c[0] == "noise" and c[2] > 0]
    assert {c[1:3] for c in noisy} == {
        (("mlp",), SMALL.psn_sigma),
        (("every_parameter",), released),
    }
    every = {name for name, p in model.named_parameters() if p.is_floating_point()}
    mlp = set(noise_module.site_parameters(model, "mlp"))
    assert mlp < every
    for call in noisy:  # inside each draw: exactly the site's parameters moved
        assert call[-1] == (every if call[1] == ("every_parameter",) else mlp), call[1]
    for name, t in model.state_dict().items():  # and every weight restored bit-exactly
        assert torch.equal(t, clean[name]), name


def test_the_premise_settings_name_the_draws_and_both_sites():
    cpu = get_profile("cpu")
    settings = premise_module.premise_settings(cpu)
    assert settings["noise"] == {
        "sites": {"mlp": cpu.psn_sigma, "every_parameter": RELEASED_SIGMA},
        "draws": cpu.num_generations,
        "step": premise_module.NOISE_STEP,
    }
    smoke = premise_module.premise_settings(get_profile("smoke"))["noise"]
    assert smoke["sites"] == {"mlp": 0.003, "every_parameter": 0.003} and smoke["draws"] == 4
    # what a record must match: either site's sigma or the draws changed is another premise
    other = ((arms.PSN_RELEASED_FIXED, (("sigma", 0.001),)),)
    assert premise_module.premise_settings(cpu.with_overrides(arm_settings=other)) != settings
    assert premise_expectation(cpu, 0).premise == settings
    assert premise_module.premise_config(cpu, "run", "weights")["noise"] == settings["noise"]


def _hand_made_parts(T: dict[str, float], correct: dict[str, tuple[list, list]]) -> dict:
    """Every stored part of one checkpoint, by hand: per site its noise and temperature
    problems (16 samples, ``correct`` of each), its matched T (matched only at the MLP)."""
    time = pd.DataFrame([{"seconds": 1.0, "cpu_seconds": 2.0}])
    parts = {}
    for site, names in premise_module.SITE_PARTS.items():
        noise, hot = (
            pd.DataFrame({"prompt": [f"p{i}" for i in range(4)], "n": 16, "correct": c})
            for c in correct[site]
        )
        result = pd.DataFrame([{"temperature": T[site], "matched": site == "mlp"}])
        search = pd.DataFrame({"temperature": [1.0, T[site]], "pass@1": [0.3, 0.2]})
        parts[names["noise"]] = {"problems": noise, "time": time}
        parts[names["match"]] = {"search": search, "result": result, "time": time}
        parts[names["temperature"]] = {"problems": hot, "result": result, "time": time}
    return parts


def test_the_seed_tables_carry_both_sites():
    """From hand-made parts (nothing sampled): one matched row per site, each site's policies
    in the problems with their site, the MLP's under the claim's labels."""
    plan = premise(
        SMALL.with_overrides(arm_settings=((arms.PSN_RELEASED_FIXED, (("sigma", 0.02),)),))
    )
    T = {"mlp": 1.25, "every_parameter": 0.75}
    correct = {
        "mlp": ([16, 0, 0, 0], [8, 8, 0, 0]),
        "every_parameter": ([4, 4, 4, 4], [2, 2, 2, 2]),
    }
    parts = _hand_made_parts(T, correct)
    assert set(parts) == set(premise_module.PARTS) and len(premise_module.PARTS) == 6
    tables = premise_tables.seed_tables(plan, 3, parts)
    matched = tables["matched"].set_index("site")
    assert list(matched.index) == ["mlp", "every_parameter"] and (matched["seed"] == 3).all()
    assert matched["sigma"].to_dict() == {"mlp": SMALL.psn_sigma, "every_parameter": 0.02}
    assert matched["temperature"].to_dict() == T and (matched["draws"] == plan.draws).all()
    assert matched["matched"].to_dict() == {"mlp": True, "every_parameter": False}
    assert matched["noise pass@1"].to_dict() == pytest.approx(
        {"mlp": 0.25, "every_parameter": 0.25}
    )
    assert matched["temperature pass@1"].to_dict() == pytest.approx(
        {"mlp": 0.25, "every_parameter": 0.125}
    )
    K = SMALL.ks[-1]  # 16: a problem with any correct sample is reached
    assert matched[f"noise pass@{K}"].to_dict() == pytest.approx(
        {"mlp": 0.25, "every_parameter": 1.0}
    )
    assert matched[f"temperature pass@{K}"].to_dict() == pytest.approx(
        {"mlp": 0.5, "every_parameter": 1.0}
    )
    assert (matched["cpu_seconds"] == 6.0).all()  # each site's own three parts
    assert matched.loc["mlp", "note"] == "" and matched.loc["every_parameter", "note"]
    problems = tables["problems"]
    labels = {
        site: problems[problems["site"] == site]["policy"].unique().tolist()
        for site in ("mlp", "every_parameter")
    }
    assert labels["mlp"] == [SAMPLING_NOISE.label, MATCHED_TEMPERATURE.label]
    assert labels["every_parameter"] == [
        premise_module.SAMPLING_RELEASED_NOISE.label,
        premise_module.RELEASED_MATCHED_TEMPERATURE.label,
    ]
    sigma = problems.groupby("policy", sort=False)["sigma"].unique().map(list).to_dict()
    assert sigma == {
        SAMPLING_NOISE.label: [SMALL.psn_sigma],
        MATCHED_TEMPERATURE.label: [0.0],
        premise_module.SAMPLING_RELEASED_NOISE.label: [0.02],
        premise_module.RELEASED_MATCHED_TEMPERATURE.label: [0.0],
    }
    search = tables["search"]
    assert list(search.columns) == ["seed", "site", "temperature", "pass@1"]
    assert search["site"].tolist() == ["mlp", "mlp", "every_parameter", "every_parameter"]
    # the plan names each site's two policies, and the claim's sides are the MLP's
    assert plan.variants == [
        v for site in ("mlp", "every_parameter") for v in premise_module.POLICIES[site]
    ]
    assert plan.arms()["site"].tolist() == ["mlp", "mlp", "every_parameter", "every_parameter"]


def test_the_tables_are_read_from_the_ledger_records_only(monkeypatch, tmp_path):
    """``premise_tables.read``: each seed's usable record of the GRPO run with its premise
    (``premise_expectation``), its parts made into the tables ``tables`` makes of the same parts;
    a seed without one is a MissingRecords naming it, and nothing is computed."""
    monkeypatch.setenv("PSNLIB_RESULTS", str(tmp_path))  # an empty ledger
    plan = premise(SMALL)
    with pytest.raises(MissingRecords, match=r"no usable record of \['GRPO seed 0'\]"):
        premise_tables.read(plan, seeds=(0,), progress=False)
    correct = {
        "mlp": ([16, 0, 0, 0], [8, 8, 0, 0]),
        "every_parameter": ([4, 4, 4, 4], [2, 2, 2, 2]),
    }
    by_seed = {
        seed: _hand_made_parts({"mlp": 1.25, "every_parameter": 0.75 + seed}, correct)
        for seed in (0, 1)
    }
    keys = {GRPO.run_key(SMALL, seed): seed for seed in by_seed}

    def usable(expected):  # the record of the premise at its seed, nothing else
        seed = keys[expected.key]
        assert expected == premise_expectation(SMALL, seed)
        return {"premise": {"parts": ledger.parts_json(by_seed[seed])}}

    monkeypatch.setattr(ledger, "usable", usable)
    read = premise_tables.read(plan, seeds=(0, 1), progress=False)
    made = premise_tables.tables(plan, by_seed)
    assert set(read) == set(made) == {"problems", "matched", "search", "curves", "summary", "logs"}
    for name in ("problems", "matched", "search", "curves", "summary"):
        pd.testing.assert_frame_equal(read[name], made[name], check_dtype=False)
    assert read["matched"]["seed"].tolist() == [0, 0, 1, 1] and read["logs"].empty


def test_the_paired_interval_is_per_site():
    K = SMALL.ks[-1]
    mlp = _three_checkpoints(K)
    every = mlp.assign(**{f"noise pass@{K}": [0.30, 0.30, 0.30]})
    both = pd.concat([mlp.assign(site="mlp"), every.assign(site="every_parameter")])
    table = paired_interval(both, SMALL)
    assert table["site"].tolist() == ["mlp"] * 4 + ["every_parameter"] * 4
    alone = paired_interval(mlp, SMALL)  # a table without sites: the MLP's
    assert (alone["site"] == "mlp").all()
    pd.testing.assert_frame_equal(table.iloc[:4], alone)
    released = table[table["site"] == "every_parameter"].set_index(["statistic", "seeds"])
    assert released.loc[(f"pass@{K}", "all"), "difference"] == pytest.approx(-140 / 3 + 30)


def test_the_ledger_holds_every_premise_part():
    """A ledger record's premise holds every stored part, both sites' (ledger.PREMISE_PARTS is
    wired to premise.PARTS in ledger.py)."""
    assert ledger.PREMISE_PARTS == premise_module.PARTS
