"""The tuning rule of docs/protocol.md 2.13 (``psnlib.replication.analysis.tuning.choose``) on
hand-made tuning tables: out when a value solves nothing, the highest mean gap, a tie to the value
nearest the current one; and the cpu profile's tuned arms: the rule's choice on the committed
tuning records, run at the tuned seeds."""

import math

import pandas as pd

from psnlib.paths import ROOT
from psnlib.replication.analysis.tuning import choose, current_values, curves
from psnlib.replication.plan.experiments import exploration_baselines, tuned, tuning
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger

CURRENT = {"sigma": 0.011, "temperature": 1.22, "entropy_coef": 0.03}


def table(knob: str, values: dict[float, list[tuple[float, float]]]) -> pd.DataFrame:
    """``{value: [(passmax, gap) per seed]}`` as ``curves``' rows of one knob."""
    rows = [
        {"knob": knob, "value": v, "seed": s, "pass1": 10.0, "passmax": y, "gap": g}
        for v, seeds in values.items()
        for s, (y, g) in enumerate(seeds)
    ]
    return pd.DataFrame(rows)


def chosen(rows: pd.DataFrame) -> float:
    return choose(rows, CURRENT).set_index("knob")["chosen"].item()


def test_the_highest_mean_gap_wins_not_the_highest_pass_at_k():
    rows = table(
        "sigma",
        {
            0.0055: [(99, 1.0), (99, -3.0)],  # mean -1.0, the highest pass@K
            0.011: [(90, 0.0), (90, 0.4)],  # mean +0.2
            0.022: [(80, 2.0), (80, -1.0)],  # mean +0.5
        },
    )
    assert chosen(rows) == 0.022


def test_a_tie_at_the_reported_precision_goes_to_the_value_nearest_the_current_one():
    rows = table(
        "temperature",
        {1.11: [(90, 0.52), (90, 0.52)], 1.22: [(90, 0.46), (90, 0.46)], 1.44: [(90, 0.54)] * 2},
    )
    assert chosen(rows) == 1.22  # all read +0.5: the current value
    rows.loc[rows["value"] == 1.22, "gap"] = 0.3  # now 1.11 and 1.44 tie, 1.22 loses
    rows.loc[rows["value"] == 1.44, "gap"] = 0.46
    assert chosen(rows) == 1.11  # excess 0.11 vs 0.44 over 1: equally near 0.22; the smaller
    rows.loc[rows["value"] == 1.11, "gap"] = 0.44  # +0.4 vs +0.5: no longer a tie
    assert chosen(rows) == 1.44


def test_a_value_that_solves_nothing_is_out_whatever_its_gap():
    rows = table(
        "entropy_coef",
        {0.015: [(90, 0.1), (90, 0.1)], 0.03: [(90, -0.5)] * 2, 0.06: [(0, 9.0), (0, 9.0)]},
    )
    result = choose(rows, CURRENT).set_index("knob").loc["entropy_coef"]
    assert result["chosen"] == 0.015 and "out (solved nothing): [0.06]" in result["why"]
    dead = table("entropy_coef", {0.015: [(0, 1.0)], 0.03: [(0, 2.0)], 0.06: [(0, 3.0)]})
    assert math.isnan(chosen(dead))


def test_each_knob_is_chosen_on_its_own_rows():
    rows = pd.concat(
        [
            table("sigma", {0.011: [(90, 0.0)], 0.022: [(90, 1.0)]}),
            table("temperature", {1.22: [(90, 1.0)], 1.44: [(90, 0.0)]}),
        ]
    )
    assert choose(rows, CURRENT).set_index("knob")["chosen"].to_dict() == {
        "sigma": 0.022,
        "temperature": 1.22,
    }


def test_the_cpu_grids_are_each_knobs_current_value_halved_and_doubled():
    cpu = get_profile("cpu")
    now = current_values(cpu)
    assert now == CURRENT
    assert cpu.tuning_sigmas == (now["sigma"] / 2, now["sigma"], now["sigma"] * 2)
    assert cpu.tuning_entropy_coefs == tuple(now["entropy_coef"] * f for f in (0.5, 1, 2))
    excess = [round(T - 1, 6) for T in cpu.tuning_temperatures]
    assert excess == [round((now["temperature"] - 1) * f, 6) for f in (0.5, 1, 2)]
    plan = tuning(cpu)
    knobs = [v.tags.get("knob") for v in plan.variants]
    assert knobs.count("sigma") == knobs.count("temperature") == knobs.count("entropy_coef") == 3
    assert not set(plan.seeds) & {*cpu.seeds, *cpu.ablation_seeds, *cpu.chain_seeds}
    assert all(b.endswith("-tune") for b in plan.benchmarks) and len(plan.benchmarks) == 5


def test_the_cpu_profiles_tuned_values_are_the_rules_choice_on_the_committed_records(monkeypatch):
    """``tuned_values`` is a reviewed profile change; the rule re-derives it from the 40 tuning
    records, so a profile that types in another value (or records that choose another) fails."""
    monkeypatch.setenv(ledger.RESULTS_ENV, str(ROOT / "results"))  # the committed records
    cpu = get_profile("cpu")
    picks = choose(curves(cpu), current_values(cpu)).set_index("knob")["chosen"]
    assert dict(cpu.tuned_values) == picks.to_dict()


def test_each_tuned_explorer_runs_at_the_tuned_seeds_as_the_tuning_trained_it():
    """The tuned arms are the tuning's runs of the chosen values (same arm and settings) at the
    fresh tuned seeds, beside the exploration baselines."""
    cpu = get_profile("cpu")
    plan = exploration_baselines(cpu)
    grid = {(v.tags["knob"], v.tags["value"]): v for v in tuning(cpu).variants if v.tags}
    for knob, value in cpu.tuned_values:
        mine = tuned(cpu)[knob]
        assert mine in plan.variants
        assert mine.seeds(plan.seeds) == cpu.tuned_seeds == tuple(range(16, 32))
        seed = cpu.tuning_seeds[0]
        assert mine.run_key(cpu, seed) == grid[(knob, value)].run_key(cpu, seed)
    assert tuned(get_profile("smoke")) == {}
