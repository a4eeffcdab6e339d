"""benchmarks/power_per_cpu_hour.py's pure functions: the exact variance of the unbiased pass@k
estimator (against Monte Carlo and its closed forms), the benchmark average's variance, the cost
of a paired seed, the seed SD from a t interval, power per CPU-hour and the designs' plans."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from psnlib.metrics import pass_at_k

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "power_per_cpu_hour.py"


@pytest.fixture(scope="module")
def power():
    spec = importlib.util.spec_from_file_location("power_per_cpu_hour", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.mark.parametrize(
    ("n", "k", "rates"),
    [
        (64, 16, [0.0, 0.002, 0.01, 0.05, 0.3, 0.9, 1.0]),
        (512, 256, [0.001, 0.003, 0.01]),  # the primary statistic where its variance is largest
    ],
)
def test_exact_variance_matches_monte_carlo(power, n, k, rates):
    draws = 200_000
    rng = np.random.default_rng(0)
    estimate = pass_at_k(n, np.arange(n + 1), k)  # the estimator at every c
    exact = power.pass_at_k_variance(n, k, rates)
    for p, v in zip(rates, exact, strict=True):
        x = estimate[rng.binomial(n, p, size=draws)]
        centred = x - x.mean()
        mc = centred.var(ddof=1)
        se = math.sqrt(max(np.mean(centred**4) - mc**2, 0.0) / draws)  # SE of a sample variance
        assert abs(v - mc) <= 5 * se + 1e-12, (p, v, mc, se)


@pytest.mark.parametrize("n", [1, 7, 256, 512])
def test_variance_at_k1_is_binomial(power, n):
    rates = np.array([0.0, 1e-4, 0.07, 0.5, 0.93, 1.0])
    np.testing.assert_allclose(
        power.pass_at_k_variance(n, 1, rates), rates * (1 - rates) / n, rtol=1e-10, atol=1e-15
    )


def test_variance_at_k_n_is_that_of_an_indicator(power):
    n, rates = 256, np.array([0.0, 0.001, 0.004, 0.02, 1.0])
    q = (1 - rates) ** n  # P(no correct sample); the estimator is 1[c > 0]
    np.testing.assert_allclose(power.pass_at_k_variance(n, n, rates), q * (1 - q), atol=1e-14)


def test_variance_falls_with_samples_at_fixed_k(power):
    rates = [0.001, 0.003, 0.01, 0.05]
    v256, v512, v1024 = (power.pass_at_k_variance(n, 256, rates) for n in (256, 512, 1024))
    assert np.all(v1024 < v512) and np.all(v512 < v256)


@pytest.mark.parametrize(
    ("n", "k", "p"), [(4, 5, 0.1), (4, 0, 0.1), (4, 2, -0.1), (4, 2, 1.5), (4, 2, np.nan)]
)
def test_variance_refuses_bad_input(power, n, k, p):
    with pytest.raises(ValueError):
        power.pass_at_k_variance(n, k, p)


def test_benchmark_average_variance_by_hand(power):
    # two benchmarks, 10 problems each, all at the same rate: k = 1 gives p(1-p)/n per problem
    n, problems = 100, 10
    rates = {"a": np.full(3, 0.2), "b": np.full(5, 0.5)}
    per = {"a": 0.2 * 0.8 / n, "b": 0.5 * 0.5 / n}
    by_hand = 100**2 * (per["a"] / problems + per["b"] / problems) / 2**2
    assert power.benchmark_average_variance(rates, n, 1, problems) == pytest.approx(by_hand)


def test_sd_from_interval(power):
    seeds, sd, mean = 16, 4.0, -0.5
    half = stats.t.ppf(0.975, seeds - 1) * sd / math.sqrt(seeds)
    assert power.sd_from_interval(mean - half, mean + half, seeds) == pytest.approx(sd)
    # the primary claim's row of figures/cpu/15_results_claims.csv
    assert power.sd_from_interval(-2.841307709880587, 1.5079990315023668, 16) == pytest.approx(
        4.0812, abs=1e-3
    )


def test_paired_seed_cost_and_power_ratio_by_hand(power):
    train = {"grpo": 100.0, "psn": 120.0}
    today = power.paired_seed_cost(train, {"id": 50.0, "ood": 40.0}, {"id": 2.0, "ood": 2.0})
    new = power.paired_seed_cost(train, {"id": 30.0, "ood": 25.0}, {"id": 2.0, "ood": 1.0})
    assert today == {"train": 220.0, "eval": 180.0, "total": 400.0}
    assert new == {"train": 220.0, "eval": 85.0, "total": 305.0}
    assert power.power_per_cpu_hour(10.0, 3600.0) == pytest.approx(0.1)
    ratio = power.power_ratio(10.5, new["total"], 10.0, today["total"])
    assert ratio == pytest.approx((10.0 * 400.0) / (10.5 * 305.0))
    assert power.eval_share(9.0, 1.0) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        power.power_per_cpu_hour(0.0, 1.0)


def test_designs_charge_what_the_cpu_plan_evaluates(power):
    from psnlib.replication.plan.profiles import get_profile

    profile = get_profile("cpu")
    plan = power.designs(profile)
    ids = ("countdown-l1", "countdown-l2", "countdown-l3", "countdown-l4", "countdown-l5")
    assert plan["today"].samples == 512 and plan["new"].samples == profile.eval_samples == 256
    assert plan["today"].claim == plan["new"].claim == ids
    assert plan["today"].weights == dict.fromkeys(profile.benchmarks, 2.0)
    ood_share = len(profile.ood_seeds) / len(profile.seeds)  # 8 of 16
    for b, w in plan["new"].weights.items():
        assert w == pytest.approx(2.0 if b in ids else 2.0 * ood_share), b


def test_from_cache_reads_the_paired_runs_evaluations(power, tmp_path, monkeypatch):
    import pandas as pd

    from psnlib.io import atomic_write_json
    from psnlib.replication.compute.store import ResultStore
    from psnlib.replication.plan.experiments import GRPO, PSN, benchmarks_of
    from psnlib.replication.plan.profiles import get_profile

    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path))
    profile = get_profile("cpu").with_overrides(seeds=(0, 1, 2), ood_seeds=None, premise_seeds=None)
    ids, n, k = benchmarks_of(profile, "id"), 256, 256
    counts = {"grpo": [[0, 3], [1, 1], [2, 0]], "psn": [[1, 3], [0, 2], [2, 2]]}  # per seed
    for v in (GRPO, PSN):
        for seed, correct in enumerate(counts[v.arm.name]):
            store = ResultStore(tmp_path / "results" / "cpu" / f"{v.run_key(profile, seed)}-x")
            atomic_write_json(store.path / "config.json", {"samples": n})
            for b in ids:
                store.save(b, {"problems": pd.DataFrame({"n": n, "correct": correct})})
    got = power.from_cache(profile, k)
    value = {a: [100 * np.mean(pass_at_k(n, np.array(c), k)) for c in counts[a]] for a in counts}
    diffs = np.subtract(value["psn"], value["grpo"])
    assert got["variance"] == pytest.approx(np.var(diffs, ddof=1))
    assert (got["seeds"], got["samples"]) == (3, n)
    np.testing.assert_allclose(got["rates"]["psn"][2][ids[0]], [2 / n, 2 / n])
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match="no finished evaluation"):
        power.from_cache(profile, k)
