"""Regime gates: is the testbed where the papers operate? Measured before any claim is run.

A replication on a tiny testbed earns trust only where each method acts as it does in the
papers: the base policy solves a fair share of the main benchmark, RL lifts pass@1 and narrows
pass@256, the noise moves the policy by the papers' per-token KL, TIS weights differ from 1, and
the weak policy is a real (weaker) solver whose prefixes stay completable. ``GATES`` holds each
gate's meaning and threshold; ``gate_values`` computes the numbers from the experiments' tables;
``gate_table`` sets each beside its threshold, ``regime_summary`` says PASS or FAIL (naming
every failed gate, and which failure is a structural limit of the task; a gate not measured
fails) and ``write_regime`` writes ``figures/<profile>/regime.json``.

Every gate on pass@1 or pass@k reads one benchmark set, ``gate_benchmarks``: the in-distribution
levels, averaged. They are what the primary claims average (the pre-registered endpoint of
docs/protocol.md section 2.2), so the gates qualify the numbers the verdicts are computed from, and
the papers' own regime numbers (base pass@1, RL's lift, narrowing) are averages over their
benchmark suites, not one benchmark. The main benchmark alone (``main_benchmark``: the ablations'
and the premise's) would judge the primary claims on a set they do not read; the gates once read
it for pass@1 and the average for narrowing, which set two numbers of one lift side by side on
different problems. A reader should know what the choice does at the cpu profile: RL lifts pass@1
more on the average than on the main benchmark, so ``grpo_pass1_gain`` moves from below its
threshold to above it (issue 31 measured both); the set is chosen for the reason above, and the
main benchmark's values stay in the experiments' tables.

``premise_check`` is the cheap check that comes before training arms: on an RL-trained policy,
does sampling-time noise reach a higher pass@k than temperature at the same pass@1?
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.evaluate import evaluate_policy
from psnlib.io import atomic_write_json
from psnlib.metrics import bootstrap_ci
from psnlib.noise import NoiseConfig, perturbed
from psnlib.replication.analysis.claim_stats import PASS_AT_MAX
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.plan.experiments import BASE_POLICY, GRPO, benchmarks_of, main_benchmark
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.report.results import check_claim
from psnlib.tasks import load_benchmark


@dataclass(frozen=True)
class Threshold:
    """An interval ``lo .. hi`` (either end may be open-ended, None) that a gate's value must
    lie in; ``strict`` ends exclude the bound itself."""

    lo: float | None = None
    hi: float | None = None
    strict: bool = False

    def holds(self, value: float | None) -> bool:
        """Whether ``value`` lies in the interval; a missing or NaN value never does."""
        if value is None or not math.isfinite(value):
            return False
        above = self.lo is None or (value > self.lo if self.strict else value >= self.lo)
        below = self.hi is None or (value < self.hi if self.strict else value <= self.hi)
        return above and below

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"{self.lo:g}-{self.hi:g}"
        if self.lo is not None:
            return f"{'>' if self.strict else '>='} {self.lo:g}"
        return f"{'<' if self.strict else '<='} {self.hi:g}"


@dataclass(frozen=True)
class Gate:
    """One number the regime needs, what it means, and where it must lie; ``limit``, where the
    task itself bounds it, says so (a failure there is the testbed's structure, not a setting
    left untuned)."""

    meaning: str
    threshold: Threshold
    limit: str = ""


# The papers' regime (issue 16; docs/protocol.md section 2.1). The same at every profile: a
# profile whose policies are not in it (smoke: seconds of SFT) fails its gates, and says so.
GATES: dict[str, Gate] = {
    "base_pass1": Gate("base pass@1, in-distribution mean (a fraction)", Threshold(0.10, 0.40)),
    "grpo_pass1_gain": Gate(
        "GRPO pass@1 / base pass@1, in-distribution mean, mean over seeds", Threshold(lo=1.3)
    ),
    "narrowing_lo": Gate(
        "lower end of the 95% interval of base - GRPO pass@max (points, in-distribution mean)",
        Threshold(lo=0.0, strict=True),
    ),
    "psn_kl_per_token": Gate(
        "median per-token KL proxy of the PSN fixed runs", Threshold(0.002, 0.008)
    ),
    "tis_ess": Gate(
        "median TIS effective-sample-size fraction of the PSN fixed runs",
        Threshold(hi=0.995, strict=True),
    ),
    "weak_pass1_ratio": Gate(
        "weak pass@1 / base pass@1, in-distribution mean", Threshold(0.3, 0.8)
    ),
    "prefix_completable": Gate(
        "share of the weak policy's entropy-cut prefixes whose attempt can still be finished "
        "correctly (exact; a new attempt does not count)",
        Threshold(lo=0.4),
        limit="a structural limit of Countdown, not a tuning failure: a chain written without "
        "search is usually dead (its numbers can no longer make the target) after its first "
        "step or two, so few prefixes cut from it can be finished; measured in docs/regime.md "
        "(sections 1, 5 and 8: random valid steps, longer SFT of both policies, search traces), "
        "where nothing tried came near the threshold",
    ),
}


# RESULTS.md's "RL narrows pass@k at large k": base minus GRPO pass@max, in-distribution mean,
# t-interval over the seeds (paired bootstrap over problems with one seed)
(NARROWING,) = [
    c for c in CLAIMS if (c.ours, c.theirs, c.statistic) == (BASE_POLICY, GRPO, PASS_AT_MAX)
]


def gate_benchmarks(profile: Profile) -> tuple[str, ...]:
    """The benchmarks every pass@k gate averages: the profile's in-distribution levels, those of
    the primary claims (module doc says why)."""
    return benchmarks_of(profile, "id")


def _pass1(curves: pd.DataFrame, policy: str, benchmarks: tuple[str, ...]) -> float:
    """A policy's pass@1 from a curves table: the mean over ``benchmarks`` of its mean over
    seeds on each; every benchmark must be there."""
    rows = curves[(curves["policy"] == policy) & (curves["k"] == 1)]
    per_benchmark = rows.groupby("benchmark")["pass_at_k"].mean()
    missing = [b for b in benchmarks if b not in per_benchmark.index]
    if missing:
        have = sorted(set(zip(curves["policy"], curves["benchmark"], strict=True)))
        raise ValueError(
            f"no pass@1 of {policy!r} on {missing} (the gates read {list(benchmarks)}); have {have}"
        )
    return float(per_benchmark.loc[list(benchmarks)].mean())


def _ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is 0 (a base policy that never solves: the gate cannot hold)."""
    return a / b if b else float("nan")


def _median(logs: pd.DataFrame, column: str) -> float:
    """Median of a training-log column over steps and seeds (NaN when never logged)."""
    values = logs[column].dropna() if column in logs else pd.Series(dtype=float)
    return float(values.median()) if len(values) else float("nan")


def gate_values(
    profile: Profile,
    testbed: pd.DataFrame,
    narrowing: dict[str, pd.DataFrame],
    psn_logs: pd.DataFrame,
    prefix_quality: pd.DataFrame,
) -> dict[str, float]:
    """Every gate's value (a key of ``GATES``) from the experiments' tables.

    Every pass@k gate reads ``gate_benchmarks(profile)``. ``testbed``:
    ``psnlib.replication.analysis.probe_tables.testbed``'s curves of policies ``base`` and
    ``weak`` on (at least) those benchmarks; ``narrowing``: ``rl_narrows_coverage``'s tables
    (``curves`` and ``problems`` of the base policy and GRPO at the main seeds); ``psn_logs``:
    the PSN fixed runs' training logs (``psn/kl_proxy``, ``tis/ess``); ``prefix_quality``:
    ``prefix_quality_table`` (the row of entropy cuts of the weak policy's chains).
    """
    names = gate_benchmarks(profile)
    base = _pass1(testbed, "base", names)
    problems = narrowing["problems"]
    problems = problems[problems["benchmark"].isin(names)]
    narrows = check_claim(NARROWING, problems, profile)  # base - GRPO, pass@max
    weak_rows = prefix_quality[
        (prefix_quality["truncation"] == "entropy") & (prefix_quality["source"] == "weak")
    ]
    if len(weak_rows) != 1:
        raise ValueError("prefix_quality needs one row with truncation 'entropy', source 'weak'")
    grpo, grpo_base = (_pass1(narrowing["curves"], p, names) for p in ("GRPO", "base"))
    return {
        "base_pass1": base,
        "grpo_pass1_gain": _ratio(grpo, grpo_base),
        "narrowing_lo": float(narrows["lo"]),
        "psn_kl_per_token": _median(psn_logs, "psn/kl_proxy"),
        "tis_ess": _median(psn_logs, "tis/ess"),
        "weak_pass1_ratio": _ratio(_pass1(testbed, "weak", names), base),
        # "alive", not "completable": with attempts every prefix can be completed by starting
        # again, which would pass the gate by construction
        # (psnlib.tasks.prefix_quality.prefix_quality)
        "prefix_completable": float(weak_rows["alive"].iloc[0]),
    }


def gate_table(values: dict[str, float | None]) -> pd.DataFrame:
    """One row per gate, in ``GATES`` order: gate, value, threshold, pass, meaning, limit (the
    task's structural limit, where the gate has one). A gate missing from ``values`` (or None /
    NaN) is "not measured" and does not pass."""
    unknown = sorted(set(values) - set(GATES))
    if unknown:
        raise ValueError(f"unknown regime gate(s) {unknown}; allowed: {list(GATES)}")
    rows = []
    for key, gate in GATES.items():
        value = values.get(key)
        value = None if value is None or not math.isfinite(value) else float(value)
        rows.append(
            {
                "gate": key,
                "value": value,
                "threshold": str(gate.threshold),
                "pass": gate.threshold.holds(value),
                "meaning": gate.meaning,
                "limit": gate.limit,
            }
        )
    return pd.DataFrame(rows)


def regime_summary(table: pd.DataFrame, profile: str) -> str:
    """One line: ``REGIME PASS`` if every gate holds, else ``REGIME FAIL`` with each failed gate,
    its value (or "not measured"), what it needs and, where the task bounds it, that it is a
    structural limit of the task (the gate's ``limit``)."""
    failed = table[~table["pass"].astype(bool)]
    if failed.empty:
        return f"REGIME PASS at profile {profile}: all {len(table)} gates hold"
    limits = [GATES[g].limit if g in GATES else "" for g in failed["gate"]]
    parts = [
        f"{r.gate} = {'not measured' if r.value is None or pd.isna(r.value) else f'{r.value:.4g}'}"
        f" (needs {r.threshold}{f'; {limit}' if limit else ''})"
        for r, limit in zip(failed.itertuples(), limits, strict=True)
    ]
    structural = sum(map(bool, limits))
    of_them = f" ({structural} of them a structural limit of the task)" if structural else ""
    return (
        f"REGIME FAIL at profile {profile}: {len(failed)} of {len(table)} gates fail{of_them}: "
        + "; ".join(parts)
    )


def write_regime(table: pd.DataFrame, path: str | Path) -> Path:
    """Write the gates as JSON, exactly one key per gate: ``{"value", "threshold", "pass"}``."""
    if list(table["gate"]) != list(GATES):
        raise ValueError(f"the table must hold the gates {list(GATES)}, got {list(table['gate'])}")
    data = {
        r["gate"]: {
            "value": None if r["value"] is None or pd.isna(r["value"]) else float(r["value"]),
            "threshold": r["threshold"],
            "pass": bool(r["pass"]),
        }
        for r in table.to_dict("records")
    }
    return atomic_write_json(path, data)


def premise_check(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    profile: Profile,
    sigmas: tuple[float, ...],
    temperatures: tuple[float, ...],
    draws: int = 4,
    seed: int = 0,
) -> pd.DataFrame:
    """pass@1 and pass@max on the main benchmark of ``model`` (an RL-trained policy) sampled
    under MLP noise of each sigma (``draws`` independent draws, ``eval_samples / draws`` samples
    each, pooled) and at each temperature (clean weights).

    Returns curves: knob ("noise" | "temperature"), value, benchmark, k (1 and the profile's
    largest), pass_at_k and its bootstrap interval over problems (lo, hi). ``at_equal_pass1``
    compares the two knobs at the same pass@1.
    """
    if draws < 1 or profile.eval_samples % draws:
        raise ValueError(f"draws must divide eval_samples ({profile.eval_samples}), got {draws}")
    benchmark = main_benchmark(profile)
    dataset = load_benchmark(benchmark, profile.eval_problems, seed=0)
    ks = (1, profile.ks[-1])
    curves = []
    for knob, values in (("noise", sigmas), ("temperature", temperatures)):
        for value in values:
            sigma, repeats = (value, draws) if knob == "noise" else (0.0, 1)
            temperature = value if knob == "temperature" else profile.eval_temperature
            correct = np.zeros(len(dataset), dtype=int)  # (P,) pooled over the draws
            for index in range(repeats):
                with perturbed(model, NoiseConfig(sigma=sigma, seed=seed), index=index):
                    problems, _ = evaluate_policy(
                        model,
                        tokenizer,
                        dataset,
                        n=profile.eval_samples // repeats,
                        ks=(1,),
                        temperature=temperature,
                        max_new_tokens=profile.max_completion_length,
                        seed=seed + index,
                        informativeness_samples=0,
                        progress=False,
                    )
                correct += problems["correct"].to_numpy()
            curve = bootstrap_ci(profile.eval_samples, correct, ks, seed=seed)
            curves.append(curve.assign(knob=knob, value=value, benchmark=benchmark))
    return pd.concat(curves, ignore_index=True)[
        ["knob", "value", "benchmark", "k", "pass_at_k", "lo", "hi"]
    ]


def at_equal_pass1(premise: pd.DataFrame) -> pd.DataFrame:
    """Each noise setting of ``premise_check`` beside temperature's pass@max at the same pass@1
    (linear interpolation along the temperature settings; NaN outside their pass@1 range):
    columns sigma, pass@1, noise pass@max, temperature pass@max, gain (noise - temperature)."""
    wide = premise.pivot_table(index=["knob", "value"], columns="k", values="pass_at_k")
    k = wide.columns.max()
    temps = wide.loc["temperature"].sort_values(1)
    noise = wide.loc["noise"]
    at_t = np.interp(noise[1], temps[1], temps[k], left=np.nan, right=np.nan)
    return pd.DataFrame(
        {
            "sigma": noise.index.to_numpy(),
            "pass@1": noise[1].to_numpy(),
            f"noise pass@{k}": noise[k].to_numpy(),
            f"temperature pass@{k}": at_t,
            "gain": noise[k].to_numpy() - at_t,
        }
    )
