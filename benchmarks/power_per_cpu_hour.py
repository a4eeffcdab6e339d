"""Statistical power per CPU-hour of the primary comparison (PSN fixed - GRPO, pass@256 averaged
over the in-distribution benchmarks, paired training seeds), today's evaluation design against
the new one, in one run (issue 31, "Power per CPU-hour").

Designs (per main seed, both arms of the pair):

- today (what ``figures/cpu`` was made with): every main seed evaluated on all seven benchmarks
  (countdown-l1..l5 in distribution, countdown-div and countdown-5num out of it), 100 problems x
  512 samples each;
- new (the ``cpu`` profile now): 100 problems x ``eval_samples`` (256); the claim reads the five
  in-distribution benchmarks, and only the profile's ``ood_seeds`` (8 of the 16 main seeds) are
  also evaluated on the two out-of-distribution ones. The plan is read from
  ``psnlib.replication.plan.schedule.planned_work``: the benchmarks the GRPO and PSN runs of each
  main seed are evaluated on. Their cost is charged to the primary comparison (the evaluation its
  seeds pay; the ratio without it is printed too);
- ``n = 128`` (one more column): the new plan at 128 samples. pass@256 cannot be estimated from
  128 samples, so this column is pass@128's (its share uses pass@256's seed variance: the
  figures hold no seed spread of pass@128) and has no power of the primary statistic.

Variance of the paired difference per seed, in points^2 (``d_s = PSN_s - GRPO_s``)::

    Var(d_s) = sigma_seed^2 + sigma_eval^2(n)
    sigma_eval^2(n) = 2 * 100^2 * (1 / B^2) * sum_b mean_i v(n, k, p_bi) / P

``v(n, k, p)`` is the exact variance of the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` for
``c ~ Binomial(n, p)`` (``pass_at_k_variance``, a sum over c), ``p_bi = c_bi / 512`` the fitted
rate of problem i of benchmark b from this run's 512-sample evaluation of one policy, averaged over
the problems measured and scaled to ``P = 100`` per benchmark, ``B = 5`` benchmarks; the factor 2
takes both arms of the pair to have the measured policy's rates (``--from-cache``: each arm's own,
averaged over seeds). Both arms are sampled with the same evaluation seed; a positive
correlation of their evaluation noise would make the true eval part smaller than this sum.

``sigma_seed^2 = V_obs - sigma_eval^2(n_obs)``: ``V_obs`` is the observed variance over seeds of the
paired difference, from the "PSN raises pass@256" row of ``figures/cpu/15_results_claims.csv`` (a
paired t interval over 16 seeds: ``sd = (hi - lo) / 2 / t_{0.975, 15} * sqrt(16)``, ``n_obs = 512``)
or, with ``--from-cache``, from the cached per-problem evaluations of the 16 GRPO and PSN runs.

Cost per paired seed, CPU seconds at one thread (``time.process_time``)::

    C = T_grpo + T_psn + sum_b w_b * E_b(n)

``T``: one arm's training, ``--steps`` steps measured from the base policy and extrapolated
linearly to ``rl_steps``; ``E_b(n)``: evaluating one policy on benchmark b (``evaluate_policy`` at
the profile's settings: sampling, verification, scoring, informativeness, bootstrap) at n
samples, ``--problems`` problems measured and extrapolated linearly to 100; ``w_b``: evaluations of
b per paired seed (today 2 for every benchmark; new 2 for the in-distribution ones and 2 x 8/16
for the others). After an untimed warm-up (one training step per arm, one problem at each n),
each round measures training and every benchmark at each n (512, 256, 128 back to back per
benchmark, so that load from other jobs falls on all three alike; the order rotating), on its
own slice of the benchmark's 100 problems. Training is the same work every round: its median
over rounds. The evaluations are disjoint slices of problems, whose costs differ, so their cost
is pooled (the mean over rounds: every measured problem counts once); each round's own ratio is
printed beside it, and the median of those.

Power per CPU-hour of a design: ``1 / (Var(d_s) * C / 3600)``. With a budget of H CPU-hours a
design runs ``N = H / C`` paired seeds and estimates the mean difference with standard error
``sqrt(Var / N) = sqrt(Var * C / H)``; the minimum detectable effect at a fixed budget scales as
that, so ``1 / (Var * C)`` is the information (inverse squared standard error) per CPU-hour and
new / today the factor by which the new design's budget buys more of it (its MDE at equal budget
is ``sqrt`` of the ratio smaller). Acceptance (issue 31): new / today >= 1.3.

The evaluated policy (rates and evaluation cost): ``--policy``, else GRPO seed 0 of the run cache
if it is there, else the cached cpu base policy (untrained: its rates are not a trained arm's).
Nothing under the data directory is built, trained or written.

    python benchmarks/power_per_cpu_hour.py    # ~160 CPU s measured; 9 min wall on 2 busy cores
    python benchmarks/power_per_cpu_hour.py --policy DIR        # rates and cost of a trained policy
    python benchmarks/power_per_cpu_hour.py --train-policy /tmp/grpo-s0   # train GRPO seed 0 first
    python benchmarks/power_per_cpu_hour.py --from-cache        # V_obs and rates of the cached runs
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special, stats

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.3  # acceptance: power per CPU-hour, new / today
CLAIM = "PSN raises pass@256"  # the primary comparison's row of the claims table
CLAIMS_CSV = REPO / "figures" / "cpu" / "15_results_claims.csv"
COMPUTE_CSV = REPO / "figures" / "cpu" / "15_results_compute.csv"
OBSERVED_SAMPLES = 512  # samples per problem of the evaluations behind figures/cpu
TODAY_SAMPLES = 512
ARMS = ("grpo", "psn")
POINTS2 = 100.0**2  # fractions^2 -> points^2
SHARE_CURVE = (256, 384, 512, 768, 1024)  # samples per problem of the eval-share curve (pass@256)


# ----------------------------------------------------------------------------- pure functions


def pass_at_k_variance(n: int, k: int, p: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """Exact variance of the unbiased pass@k estimator ``1 - C(n-c, k) / C(n, k)`` when
    ``c ~ Binomial(n, p)``, for each rate in ``p``.

    With ``r(c) = C(n-c, k) / C(n, k)`` (0 for ``n - c < k``) the estimator is ``1 - r(c)`` and
    its mean is ``1 - (1-p)^k`` (unbiased), so::

        v(n, k, p) = sum_{c=0}^{n} Binom(c; n, p) * (r(c) - (1-p)^k)^2

    (summed about the exact mean: no cancellation near p = 0). At k = 1 it is ``p(1-p)/n``; at
    k = n, ``q(1-q)`` with ``q = (1-p)^n``."""
    if not (isinstance(n, int | np.integer) and isinstance(k, int | np.integer) and 1 <= k <= n):
        raise ValueError(f"need integers 1 <= k <= n, got n={n!r}, k={k!r}")
    rates = np.atleast_1d(np.asarray(p, dtype=float))
    if np.any((rates < 0) | (rates > 1)) or not np.all(np.isfinite(rates)):
        raise ValueError(f"rates must lie in [0, 1], got {p!r}")
    c = np.arange(n + 1)
    some_wrong = n - c >= k
    log_r = np.full(n + 1, -np.inf)
    m = c[some_wrong]
    log_r[some_wrong] = (
        special.gammaln(n - m + 1)
        - special.gammaln(n - m - k + 1)
        - special.gammaln(n + 1)
        + special.gammaln(n - k + 1)
    )
    r = np.exp(log_r)  # (n + 1,)
    pmf = stats.binom.pmf(c[None, :], n, rates[:, None])  # (P, n + 1)
    mean_r = (1.0 - rates) ** k
    return (pmf * (r[None, :] - mean_r[:, None]) ** 2).sum(axis=1)


def benchmark_average_variance(
    rates: Mapping[str, Sequence[float] | np.ndarray], n: int, k: int, problems: int
) -> float:
    """Variance (points^2) of one policy's pass@k averaged over benchmarks, ``problems`` per
    benchmark, from the evaluation's binomial sampling alone::

        (100^2 / B^2) * sum_b mean_i v(n, k, p_bi) / problems

    ``rates[b]``: fitted rates of the problems measured on benchmark b, whose mean per-problem
    variance stands for the benchmark's ``problems`` problems (independent samples)."""
    if not rates or problems < 1:
        raise ValueError(f"need >= 1 benchmark and problems >= 1, got {len(rates)}, {problems}")
    per_benchmark = [float(pass_at_k_variance(n, k, p).mean()) / problems for p in rates.values()]
    return POINTS2 * sum(per_benchmark) / len(per_benchmark) ** 2


def sd_from_interval(lo: float, hi: float, seeds: int, level: float = 0.95) -> float:
    """Seed SD of a paired difference from its t interval ``[lo, hi]`` over ``seeds`` seeds:
    ``sd = (hi - lo) / 2 / t_{(1+level)/2, seeds-1} * sqrt(seeds)``."""
    if seeds < 2 or not hi >= lo:
        raise ValueError(f"need seeds >= 2 and hi >= lo, got {seeds}, [{lo}, {hi}]")
    return (hi - lo) / 2 / float(stats.t.ppf((1 + level) / 2, seeds - 1)) * math.sqrt(seeds)


def paired_seed_cost(
    train_seconds: Mapping[str, float],
    eval_seconds: Mapping[str, float],
    weights: Mapping[str, float],
) -> dict[str, float]:
    """CPU seconds of one paired seed: ``train = sum_arm T_arm``, ``eval = sum_b w_b * E_b``
    (``weights[b]``: evaluations of benchmark b per paired seed; ``eval_seconds[b]``: one),
    ``total = train + eval``."""
    train = float(sum(train_seconds.values()))
    evaluation = float(sum(w * eval_seconds[b] for b, w in weights.items()))
    return {"train": train, "eval": evaluation, "total": train + evaluation}


def power_per_cpu_hour(variance: float, cpu_seconds: float) -> float:
    """Information per CPU-hour, ``1 / (Var(d_s) * C_hours)``: the inverse squared standard
    error of the mean difference that one CPU-hour of paired seeds buys."""
    if not variance > 0 or not cpu_seconds > 0:
        raise ValueError(f"need variance > 0 and cost > 0, got {variance}, {cpu_seconds}")
    return 3600.0 / (variance * cpu_seconds)


def power_ratio(
    new_variance: float, new_seconds: float, today_variance: float, today_seconds: float
) -> float:
    """Power per CPU-hour of the new design over today's: ``(V_t * C_t) / (V_n * C_n)``."""
    return power_per_cpu_hour(new_variance, new_seconds) / power_per_cpu_hour(
        today_variance, today_seconds
    )


@dataclass(frozen=True)
class Design:
    """An evaluation design of the primary comparison: ``samples`` per problem, the claim's
    statistic pass@``k`` over ``claim`` (benchmarks), and ``weights``: evaluations of each
    benchmark per paired seed (both arms)."""

    name: str
    samples: int
    k: int
    claim: tuple[str, ...]
    weights: dict[str, float]


def eval_share(seed_variance: float, eval_variance: float) -> float:
    """Share of the paired variance that is evaluation noise: ``e / (sigma_seed^2 + e)``."""
    return eval_variance / (seed_variance + eval_variance)


# ----------------------------------------------------------------------------- the designs


def designs(profile: Any) -> dict[str, Design]:
    """Today's design, the profile's (``planned_work``: what the GRPO and PSN runs of each main
    seed are evaluated on, averaged over seeds) and the profile's at 128 samples."""
    from psnlib.replication.plan.experiments import GRPO, PSN, benchmarks_of
    from psnlib.replication.plan.schedule import planned_work

    ids = benchmarks_of(profile, "id")
    k = max(profile.ks)
    today = Design("today", TODAY_SAMPLES, k, ids, dict.fromkeys(profile.benchmarks, 2.0))
    weights = dict.fromkeys(profile.benchmarks, 0.0)
    main = set(profile.seeds)
    for v, seed, benchmarks in planned_work(profile):
        if v in (GRPO, PSN) and seed in main:
            for b in benchmarks:
                weights[b] += 1.0 / len(main)
    new = Design("new", profile.eval_samples, k, ids, weights)
    low = Design("n=128", 128, 128, ids, weights)
    return {"today": today, "new": new, "n=128": low}


# ----------------------------------------------------------------------------- measurement


def load_eval_policy(args: argparse.Namespace, profile: Any) -> tuple[Any, Any, str]:
    """The policy whose evaluation cost and rates are measured: ``--policy``, else GRPO seed 0
    from the run cache if it is there, else the cached base policy (never built or trained
    here)."""
    import torch

    from psnlib.models import load_policy
    from psnlib.replication.plan.experiments import GRPO
    from psnlib.replication.plan.policies import policy_dir

    if args.policy is not None:
        path = Path(args.policy)
    elif GRPO.run_path(profile, 0).exists():
        path = GRPO.run_path(profile, 0)
    else:
        path = policy_dir(profile.base)
    if not path.exists():
        raise SystemExit(f"no policy at {path}: build the cpu base policy first, or pass --policy")
    model, tokenizer = load_policy(path, dtype=torch.float32)
    return model.eval(), tokenizer, str(path)


def base_path(profile: Any) -> Path:
    """The cached base policy's directory; exits if it is not built (it is not built here)."""
    from psnlib.replication.plan.policies import policy_dir

    path = policy_dir(profile.base)
    if not path.exists():
        raise SystemExit(f"the cpu base policy is not built ({path}); wait for it")
    return path


def train_seconds(profile: Any, arm: str, steps: int, seed: int = 0) -> float:
    """CPU seconds of ``steps`` training steps of ``arm`` from the base policy (the trainer's
    ``train()`` only, as ``benchmarks/paired_seed.py`` times it)."""
    import tempfile

    import torch
    from transformers.trainer_callback import PrinterCallback

    from psnlib.models import load_policy
    from psnlib.replication.compute.runs import train_set
    from psnlib.replication.plan.runs import rl_config
    from psnlib.tasks.datasets import task_reward
    from psnlib.trainer import PSNGRPOTrainer

    model, tokenizer = load_policy(base_path(profile), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        config = rl_config(profile, arm, seed, tmp, max_steps=steps, save_strategy="no")
        config.disable_tqdm = True
        trainer = PSNGRPOTrainer(
            model=model,
            reward_funcs=task_reward(profile.rl_dataset),
            args=config,
            train_dataset=train_set(profile, arm, seed),
            processing_class=tokenizer,
        )
        trainer.remove_callback(PrinterCallback)
        start = time.process_time()
        trainer.train()
        return time.process_time() - start


def train_policy_to(profile: Any, out: Path, seed: int = 0) -> float | None:
    """Train GRPO ``seed`` for the profile's ``rl_steps`` from the base policy and save it to
    ``out`` (skipped if ``out`` holds a policy: None); its training CPU seconds."""
    import tempfile

    import torch
    from transformers.trainer_callback import PrinterCallback

    from psnlib.models import load_policy, save_policy
    from psnlib.replication.compute.runs import train_set
    from psnlib.replication.plan.runs import rl_config
    from psnlib.tasks.datasets import task_reward
    from psnlib.trainer import PSNGRPOTrainer

    if (out / "config.json").exists():
        return None
    model, tokenizer = load_policy(base_path(profile), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        config = rl_config(profile, "grpo", seed, tmp, save_strategy="no")
        config.disable_tqdm = True
        trainer = PSNGRPOTrainer(
            model=model,
            reward_funcs=task_reward(profile.rl_dataset),
            args=config,
            train_dataset=train_set(profile, "grpo", seed),
            processing_class=tokenizer,
        )
        trainer.remove_callback(PrinterCallback)
        start = time.process_time()
        trainer.train()
        seconds = time.process_time() - start
    save_policy(trainer.model, tokenizer, out, {"arm": "grpo", "seed": seed, "cpu_s": seconds})
    return seconds


def warm_up(model: Any, tokenizer: Any, profile: Any, samples: Sequence[int]) -> None:
    """Untimed: one training step per arm and one problem at each n, so that no round pays
    the process's first-call costs."""
    for arm in ARMS:
        train_seconds(profile, arm, 1)
    for n in samples:
        eval_round(model, tokenizer, profile, 1, 0, [n], profile.benchmarks[:1])


def eval_round(
    model: Any,
    tokenizer: Any,
    profile: Any,
    problems: int,
    round_: int,
    samples: Sequence[int],
    benchmarks: Sequence[str] | None = None,
) -> tuple[dict[int, dict[str, float]], dict[str, dict[int, int]]]:
    """One round: CPU seconds of evaluating ``model`` on problems ``[round * problems, (round +
    1) * problems)`` (mod 100) of each benchmark at each n in ``samples`` (per benchmark every n
    in turn, the order rotating with the round and the benchmark), and per benchmark the
    512-sample correct count of each problem (by its index among the benchmark's 100).
    ``benchmarks``: default the profile's."""
    from psnlib.evaluate import evaluate_policy
    from psnlib.tasks import load_benchmark

    total = profile.eval_problems
    rows = [(round_ * problems + i) % total for i in range(problems)]
    benchmarks = profile.benchmarks if benchmarks is None else benchmarks
    data = {b: load_benchmark(b, total, seed=0).select(rows) for b in benchmarks}
    seconds: dict[int, dict[str, float]] = {n: {} for n in samples}
    correct: dict[str, dict[int, int]] = {}
    for j, b in enumerate(benchmarks):  # the designs back to back: load on the machine hits each
        turn = (round_ + j) % len(samples)
        for n in [*samples[turn:], *samples[:turn]]:
            ks = tuple(k for k in profile.ks if k <= n)
            start = time.process_time()
            table, _ = evaluate_policy(
                model,
                tokenizer,
                data[b],
                n=n,
                ks=ks,
                temperature=profile.eval_temperature,
                max_new_tokens=profile.max_completion_length,
                seed=0,
                progress=False,
            )
            seconds[n][b] = time.process_time() - start
            if n == OBSERVED_SAMPLES:
                correct[b] = dict(zip(rows, map(int, table["correct"]), strict=True))
    return seconds, correct


def observed_from_claims(path: Path = CLAIMS_CSV) -> tuple[float, int, float, float]:
    """``V_obs`` (points^2) of the primary comparison from the claims table's paired t interval
    (``sd_from_interval``): variance, seeds, lo, hi."""
    import pandas as pd

    table = pd.read_csv(path)
    row = table[table["claim"] == CLAIM].iloc[0]
    seeds, lo, hi = int(row["seeds"]), float(row["lo"]), float(row["hi"])
    return sd_from_interval(lo, hi, seeds) ** 2, seeds, lo, hi


def compute_table_medians(path: Path = COMPUTE_CSV) -> dict[str, dict[str, float]]:
    """Medians over the 16 main seeds of the measured train and eval seconds of the GRPO and
    PSN fixed runs behind ``figures/cpu`` (today's design: seven benchmarks at 512 samples;
    wall time of two workers sharing the 2 cores, so not this run's CPU time): a cross-check."""
    import pandas as pd

    table = pd.read_csv(path)
    out = {}
    for arm, label in (("grpo", "GRPO"), ("psn", "PSN fixed")):
        rows = table[table["policy"] == label]
        out[arm] = {c: float(rows[c].median()) for c in ("train_seconds", "eval_seconds")}
    return out


def cached_evaluations(profile: Any) -> dict[str, dict[int, dict[str, tuple[int, list[int]]]]]:
    """Per arm, per main seed, per in-distribution benchmark: ``(n, correct counts)`` of the cached
    evaluation of the GRPO or PSN fixed run (read only; the store with the most samples per
    problem whose every in-distribution part is finished). Exits if some run has none."""
    from psnlib.cache import read_json
    from psnlib.paths import data_dir
    from psnlib.replication.compute.store import ResultStore
    from psnlib.replication.plan.experiments import GRPO, PSN, benchmarks_of

    ids = benchmarks_of(profile, "id")
    root = data_dir() / "results" / profile.name
    out: dict[str, dict[int, dict[str, tuple[int, list[int]]]]] = {}
    for variant in (GRPO, PSN):
        out[variant.arm.name] = {}
        for seed in profile.seeds:
            key = variant.run_key(profile, seed)
            best: tuple[int, ResultStore] | None = None
            for path in sorted(root.glob(f"{key}-*")):
                config = read_json(path / "config.json", "result config") or {}
                store = ResultStore(path)
                n = config.get("samples", 0)
                finished = set(ids) <= set(store.parts())
                if finished and max(profile.ks) <= n and (best is None or n > best[0]):
                    best = (n, store)
            if best is None:
                raise SystemExit(f"--from-cache: no finished evaluation of {key} under {root}")
            tables = {b: best[1].load(b)["problems"] for b in ids}
            out[variant.arm.name][seed] = {
                b: (best[0], [int(c) for c in t["correct"]]) for b, t in tables.items()
            }
    return out


def from_cache(profile: Any, k: int) -> dict[str, Any]:
    """``V_obs`` (points^2) of the paired pass@k difference over the cached runs' seeds, the
    samples per problem it was observed at, and each arm's fitted rates per seed."""
    from psnlib.metrics import pass_at_k

    runs = cached_evaluations(profile)
    diffs = []
    for seed in profile.seeds:
        value = {}
        for arm in ARMS:
            per_b = [np.mean(pass_at_k(n, np.array(c), k)) for n, c in runs[arm][seed].values()]
            value[arm] = 100.0 * float(np.mean(per_b))
        diffs.append(value["psn"] - value["grpo"])
    samples = {n for arm in ARMS for s in runs[arm].values() for n, _ in s.values()}
    if len(samples) != 1:
        raise SystemExit(f"--from-cache: the runs were evaluated at different n: {samples}")
    rates = {
        arm: [{b: np.array(c) / n for b, (n, c) in s.items()} for s in runs[arm].values()]
        for arm in ARMS
    }
    return {
        "variance": float(np.var(diffs, ddof=1)),
        "seeds": len(diffs),
        "samples": samples.pop(),
        "rates": rates,
        "mean_diff": float(np.mean(diffs)),
    }


# ----------------------------------------------------------------------------- report


def analyse(
    designs_: Mapping[str, Design],
    train: Mapping[str, float],
    evaluation: Mapping[int, Mapping[str, float]],
    rates_per_arm: Mapping[str, Sequence[Mapping[str, np.ndarray]]],
    observed_variance: float,
    observed_samples: int,
    problems: int,
) -> dict[str, Any]:
    """Every design's variance components, cost split and power per CPU-hour (module doc)."""

    def eval_variance(n: int, k: int) -> float:  # both arms, each its seeds' mean
        return sum(
            statistics.fmean(benchmark_average_variance(r, n, k, problems) for r in rates)
            for rates in rates_per_arm.values()
        )

    k_primary = designs_["today"].k
    seed_var = observed_variance - eval_variance(observed_samples, k_primary)
    out: dict[str, Any] = {}
    for name, d in designs_.items():
        e = eval_variance(d.samples, d.k)
        cost = paired_seed_cost(train, evaluation[d.samples], d.weights)
        claim_w = {b: w for b, w in d.weights.items() if b in d.claim}
        claim_cost = paired_seed_cost(train, evaluation[d.samples], claim_w)
        row = {
            "samples": d.samples,
            "statistic": f"pass@{d.k}",
            "sigma_seed2": seed_var,
            "sigma_eval2": e,
            "variance": seed_var + e,
            "eval_share": eval_share(seed_var, e),
            "train_s": cost["train"],
            "eval_claim_s": claim_cost["eval"],
            "eval_other_s": cost["eval"] - claim_cost["eval"],
            "total_s": cost["total"],
            "cpu_hours": cost["total"] / 3600,
            "weights": d.weights,
        }
        if d.k == k_primary:
            row["power_per_cpu_hour"] = power_per_cpu_hour(seed_var + e, cost["total"])
            row["power_claim_only"] = power_per_cpu_hour(seed_var + e, claim_cost["total"])
        out[name] = row
    today = out["today"]
    for row in out.values():
        if "power_per_cpu_hour" in row:
            row["ratio"] = row["power_per_cpu_hour"] / today["power_per_cpu_hour"]
            row["ratio_claim_only"] = row["power_claim_only"] / today["power_claim_only"]
    out["share_curve"] = {n: eval_share(seed_var, eval_variance(n, k_primary)) for n in SHARE_CURVE}
    return out


def ratio_by_round(
    designs_: Mapping[str, Design],
    rounds: Sequence[Mapping[str, Any]],
    result: Mapping[str, Any],
    train_factor: float,
    eval_factor: float,
) -> list[float]:
    """new / today per round: each round's own costs (scaled to a paired seed as the pooled
    ones are) with the variances of ``result``."""
    out = []
    for r in rounds:
        train = {arm: t * train_factor for arm, t in r["train"].items()}
        cost = {
            name: paired_seed_cost(
                train,
                {b: t * eval_factor for b, t in r["eval"][designs_[name].samples].items()},
                designs_[name].weights,
            )["total"]
            for name in ("today", "new")
        }
        out.append(
            power_ratio(
                result["new"]["variance"], cost["new"], result["today"]["variance"], cost["today"]
            )
        )
    return out


def ratio_bootstrap(
    designs_: Mapping[str, Design],
    rates: Mapping[str, np.ndarray],
    result: Mapping[str, Any],
    observed_variance: float,
    observed_samples: int,
    problems: int,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% percentile interval of new / today when the measured problems (rates, both arms
    the same policy's) are resampled with replacement within each benchmark; costs held at
    their estimates. It shows how much the ratio rests on which problems were measured."""
    k = designs_["today"].k
    ns = {observed_samples, designs_["today"].samples, designs_["new"].samples}
    per = {n: {b: pass_at_k_variance(n, k, p) for b, p in rates.items()} for n in ns}
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(resamples):
        pick = {b: rng.integers(0, len(p), len(p)) for b, p in rates.items()}

        def e(n: int, pick: dict[str, np.ndarray] = pick) -> float:
            means = [per[n][b][i].mean() / problems for b, i in pick.items()]
            return 2 * POINTS2 * sum(means) / len(means) ** 2

        seed_var = observed_variance - e(observed_samples)
        v_today = seed_var + e(designs_["today"].samples)
        v_new = seed_var + e(designs_["new"].samples)
        ratios.append(
            power_ratio(v_new, result["new"]["total_s"], v_today, result["today"]["total_s"])
        )
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def print_table(result: Mapping[str, Any], names: Sequence[str]) -> None:
    """The designs side by side."""
    lines = [
        ("samples per problem", "samples", "{:.0f}"),
        ("statistic", "statistic", "{}"),
        ("sigma_seed^2 (points^2)", "sigma_seed2", "{:.3f}"),
        ("sigma_eval^2, both arms (points^2)", "sigma_eval2", "{:.3f}"),
        ("Var per paired seed (points^2)", "variance", "{:.3f}"),
        ("eval share of the paired variance", "eval_share", "{:.1%}"),
        ("train, both arms (CPU s)", "train_s", "{:.0f}"),
        ("eval, claim benchmarks (CPU s)", "eval_claim_s", "{:.0f}"),
        ("eval, other benchmarks (CPU s)", "eval_other_s", "{:.0f}"),
        ("CPU hours per paired seed", "cpu_hours", "{:.4f}"),
        ("power per CPU-hour (1/points^2/h)", "power_per_cpu_hour", "{:.3f}"),
        ("power / today's", "ratio", "{:.3f}"),
        ("  same, OOD evaluation not charged", "ratio_claim_only", "{:.3f}"),
    ]
    print(f"{'':<38}" + "".join(f"{n:>12}" for n in names))
    for label, key, fmt in lines:
        cells = [fmt.format(result[n][key]) if key in result[n] else "-" for n in names]
        print(f"{label:<38}" + "".join(f"{c:>12}" for c in cells))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=10, help="problems per benchmark a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="training steps per arm a round")
    parser.add_argument("--policy", type=Path, default=None, help="the evaluated policy's dir")
    parser.add_argument(
        "--train-policy",
        type=Path,
        default=None,
        help="train GRPO seed 0 (rl_steps) into this dir if absent and evaluate it",
    )
    parser.add_argument("--from-cache", action="store_true", help="V_obs and rates: cached runs")
    parser.add_argument("--out", type=Path, default=Path("/tmp/power_per_cpu_hour.json"))
    args = parser.parse_args(argv)
    if args.problems < 1 or args.rounds < 1 or args.steps < 1:
        raise SystemExit(f"--problems, --rounds, --steps must be >= 1, got {vars(args)}")

    import torch

    from psnlib.replication.plan.profiles import get_profile

    torch.set_num_threads(1)
    profile = get_profile("cpu")
    plan = designs(profile)
    k = plan["today"].k
    full_train = None
    if args.train_policy is not None:
        full_train = train_policy_to(profile, args.train_policy)
        args.policy = args.train_policy
    cached = from_cache(profile, k) if args.from_cache else None  # before any measurement
    model, tokenizer, policy = load_eval_policy(args, profile)
    samples = sorted({d.samples for d in plan.values()}, reverse=True)
    rounds = []
    correct: dict[str, dict[int, int]] = {b: {} for b in plan["today"].claim}
    warm_up(model, tokenizer, profile, samples)
    for r in range(args.rounds):
        trained = {arm: train_seconds(profile, arm, args.steps) for arm in ARMS}
        seconds, counts = eval_round(model, tokenizer, profile, args.problems, r, samples)
        for b in correct:
            correct[b].update(counts[b])
        rounds.append({"train": trained, "eval": seconds})
        spent = sum(trained.values()) + sum(sum(s.values()) for s in seconds.values())
        print(f"round {r + 1}: {spent:.0f} CPU s measured", flush=True)

    train_factor = profile.rl_steps / args.steps
    eval_factor = profile.eval_problems / args.problems
    train = {arm: statistics.median(x["train"][arm] for x in rounds) * train_factor for arm in ARMS}
    evaluation = {  # disjoint slices of problems: pooled
        n: {
            b: statistics.fmean(x["eval"][n][b] for x in rounds) * eval_factor
            for b in profile.benchmarks
        }
        for n in samples
    }
    if cached is not None:
        observed, seeds, observed_n = cached["variance"], cached["seeds"], cached["samples"]
        rates_per_arm = cached["rates"]
        source = f"cached evaluations of the {seeds} GRPO and PSN fixed runs (n = {observed_n})"
    else:
        observed, seeds, lo, hi = observed_from_claims()
        observed_n = OBSERVED_SAMPLES
        fitted = {
            b: np.array([c / OBSERVED_SAMPLES for c in v.values()]) for b, v in correct.items()
        }
        rates_per_arm = {arm: [fitted] for arm in ARMS}  # both arms: the measured policy's
        source = (
            f"{CLAIMS_CSV.relative_to(REPO)} '{CLAIM}': [{lo:.3f}, {hi:.3f}] over {seeds} seeds "
            f"(n = {observed_n}); rates: the measured policy's, for both arms"
        )
    result = analyse(
        plan, train, evaluation, rates_per_arm, observed, observed_n, profile.eval_problems
    )
    names = ["today", "new", "n=128"]
    print(
        f"\npower per CPU-hour of '{CLAIM}' (PSN fixed - GRPO, pass@{k}, average of "
        f"{', '.join(plan['today'].claim)}), per paired seed; policy {policy}; {args.rounds} "
        f"rounds of {args.problems} problems per benchmark (x{eval_factor:g}) and {args.steps} "
        f"steps per arm (x{train_factor:g}; median over rounds), the problems' costs pooled over "
        "rounds; 1 thread, CPU time"
    )
    print(f"V_obs = {observed:.3f} points^2 from {source}")
    print_table(result, names)
    curve = ", ".join(f"{n}: {s:.1%}" for n, s in result["share_curve"].items())
    print(f"eval share of the paired variance of pass@{k} by samples per problem: {curve}")
    ratio = result["new"]["ratio"]
    per_round = ratio_by_round(plan, rounds, result, train_factor, eval_factor)
    result["ratio_by_round"] = per_round
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(
        f"new / today: {ratio:.3f} (target >= {TARGET}: {verdict}); per round (its own costs): "
        + ", ".join(f"{x:.3f}" for x in per_round)
        + f", median {statistics.median(per_round):.3f}"
    )
    if not args.from_cache:
        lo, hi = ratio_bootstrap(plan, fitted, result, observed, observed_n, profile.eval_problems)
        result["ratio_bootstrap_problems"] = [lo, hi]
        print(
            f"new / today with the measured problems resampled (95%, costs fixed): "
            f"[{lo:.3f}, {hi:.3f}]"
        )
    table = compute_table_medians()
    print(
        "cross-check, figures/cpu/15_results_compute.csv (wall s, two runs at a time on 2 cores; "
        "medians over 16 seeds): "
        + "; ".join(
            f"{arm} train {t['train_seconds']:.0f}, eval of 7 benchmarks at 512 "
            f"{t['eval_seconds']:.0f}"
            for arm, t in table.items()
        )
        + f"; this run, CPU s: train {train['grpo']:.0f} / {train['psn']:.0f}, eval of 7 at 512 "
        f"{sum(evaluation[TODAY_SAMPLES].values()):.0f}"
    )
    if full_train is not None:
        print(
            f"GRPO seed 0, {profile.rl_steps} steps trained whole: {full_train:.0f} CPU s "
            f"(extrapolated from {args.steps} steps: {train['grpo']:.0f})"
        )
    record = {
        "command": " ".join(
            ["python", "benchmarks/power_per_cpu_hour.py", *(argv or sys.argv[1:])]
        ),
        "policy": policy,
        "observed": {"variance": observed, "seeds": seeds, "samples": observed_n, "source": source},
        "designs": {n: asdict(d) for n, d in plan.items()},
        "result": result,
        "train_seconds": train,
        "eval_seconds": {str(n): e for n, e in evaluation.items()},
        "rounds": rounds,
        "rates": {b: sorted(v.items()) for b, v in correct.items()},
        "full_train_seconds": full_train,
        "compute_table_medians": table,
        "settings": vars(args) | {"policy": policy, "train_policy": str(args.train_policy)},
    }
    args.out.write_text(json.dumps(record, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
