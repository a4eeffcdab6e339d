"""Sampling for the premise (``psnlib.replication.plan.premise``, computed by
``psnlib.replication.compute.premise_evaluation``): a checkpoint's problems sampled under noise
draws of a site (one draw per rollout slot, as training draws them:
``psnlib.replication.plan.premise.draws_for``) or at a temperature on common random numbers,
judged exactly, the temperature whose clean pass@1 matches a target (``match_temperature``; the
rule is in its docstring and in the premise's module doc, steps 1-3) and one site's stored steps
of a checkpoint (``site_parts``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.metrics import bootstrap_ci
from psnlib.noise import NoiseConfig, perturbed
from psnlib.replication.compute.evaluation import benchmark_problems
from psnlib.replication.compute.store import ResultStore
from psnlib.replication.plan.premise import ITERATIONS, MLP, NOISE_STEP, STEP, T_HI, T_LO, TIME
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import EVAL_SEED
from psnlib.response_metrics import mean_token_entropy
from psnlib.sampling import decode, sample_prompts
from psnlib.tasks import REAL_BENCHMARKS, math_reward
from psnlib.tasks.countdown import Problem, verify

# What each step's stored part must hold (``ResultStore.load``'s ``required``): one that parses
# but lacks a table, a column or rows is named and computed again.
PART_TABLES = {
    "noise": {"problems": ("n", "correct"), "time": TIME},
    "match": {
        "search": ("temperature", "pass@1"),
        "result": ("temperature", "matched"),
        "time": TIME,
    },
    "temperature": {
        "problems": ("n", "correct"),
        "result": ("temperature", "matched"),
        "time": TIME,
    },
}


@dataclass(frozen=True)
class Match:
    """The matched temperature of ``match_temperature``: ``temperature``, whether its pass@1
    equals the target (``matched``; False: the visited T nearest it), and every cheap
    estimate made, in order (``trace``: (T, pass@1))."""

    temperature: float
    matched: bool
    trace: tuple[tuple[float, float], ...]


def match_temperature(
    pass1: Callable[[float], float],
    target: float,
    start: float = 1.0,
    bounds: tuple[float, float] = (T_LO, T_HI),
    step: float = STEP,
    iterations: int = ITERATIONS,
) -> Match:
    """The temperature T in ``bounds`` with ``pass1(T) = target`` (the module's rule, step 2).

    ``pass1(T)``: the clean pass@1 at T, assumed continuous (not necessarily monotone). From
    ``start`` the search walks towards ``hi`` if ``pass1(start) > target`` (raising T lowers
    pass@1), else towards ``lo``, to ``start +/- step``, ``+/- 2 step``, ``+/- 4 step``, ...
    (the last clipped to the bound) until ``pass1 - target`` changes sign; ``iterations``
    bisection steps halve that bracket, keeping its ends on either side of ``target``, and T is
    where the chord between its ends crosses ``target`` (exact for a linear ``pass1``). Where the
    sign never changes up to the bound, no temperature in ``bounds`` matches: ``matched`` is
    False and T is the visited temperature whose pass@1 is nearest ``target``.
    """
    if not (isinstance(target, int | float) and 0 <= target <= 1):
        raise ValueError(f"target must be a pass@1 in [0, 1], got {target!r}")
    lo, hi = bounds
    if not 0 < lo < hi < math.inf or not lo <= start <= hi:
        raise ValueError(
            f"bounds must be 0 < lo < hi (finite) with lo <= start <= hi; got bounds {bounds}, "
            f"start {start}"
        )
    if not 0 < step < math.inf:
        raise ValueError(f"step must be a finite number > 0, got {step!r}")
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 0:
        raise ValueError(f"iterations must be an integer >= 0, got {iterations!r}")
    trace: list[tuple[float, float]] = []

    def gap(t: float) -> float:  # pass1(t) - target, recorded
        trace.append((t, float(pass1(t))))
        return trace[-1][1] - target

    a, g_a = start, gap(start)
    if g_a == 0:
        return Match(start, True, tuple(trace))
    end, width = (hi if g_a > 0 else lo), step
    b, g_b = a, g_a
    while g_a * g_b > 0 and b != end:  # walk until the sign changes
        a, g_a = b, g_b
        b = min(start + width, hi) if end == hi else max(start - width, lo)
        g_b, width = gap(b), 2 * width
    if g_a * g_b > 0:
        nearest = min(trace, key=lambda point: abs(point[1] - target))[0]
        return Match(nearest, False, tuple(trace))
    for _ in range(iterations):
        if g_a == 0 or g_b == 0:
            break
        mid = (a + b) / 2
        g_mid = gap(mid)
        if g_a * g_mid <= 0:
            b, g_b = mid, g_mid
        else:
            a, g_a = mid, g_mid
    t = a if g_a == g_b else a + (b - a) * g_a / (g_a - g_b)  # where the chord crosses 0
    return Match(float(t), True, tuple(trace))


def pool_draws(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """One per-problem table from the tables of several draws (the same problems in the same
    order): ``n`` and ``correct`` summed, a column equal in every draw kept (``prompt``), another
    numeric column the mean of the draws' values (``entropy``, ``length``: means of equal-sized
    draws' means), any other dropped."""
    if not tables:
        raise ValueError("pool_draws needs the table of at least one draw")
    first = tables[0]
    if any(len(t) != len(first) or list(t.columns) != list(first.columns) for t in tables):
        raise ValueError("every draw's table must hold the same problems and columns")
    pooled = {}
    for column in first.columns:
        values = [t[column] for t in tables]
        if column in ("n", "correct"):
            pooled[column] = sum(v.to_numpy() for v in values)  # (P,)
        elif all(v.equals(first[column]) for v in values):
            pooled[column] = first[column].to_numpy()
        elif pd.api.types.is_numeric_dtype(first[column]):
            pooled[column] = pd.concat(values, axis=1).mean(axis=1).to_numpy()  # (P,)
    return pd.DataFrame(pooled)


def problems_of(benchmark: str, problems: int) -> Dataset:
    """The problems every evaluation samples: the first ``problems`` of ``benchmark`` at
    ``EVAL_SEED`` (a Countdown split or a real benchmark; 0: all of a real one)."""
    return benchmark_problems(benchmark, problems, EVAL_SEED)


def judge(benchmark: str, dataset: Dataset, texts: list[list[str]]) -> list[int]:
    """Correct completions per problem: ``texts[i]`` are problem i's, judged by Countdown's exact
    verifier or, on a real benchmark, by ``math_reward`` against the problem's answer."""
    counts = []
    for row, ts in zip(dataset, texts, strict=True):
        if benchmark in REAL_BENCHMARKS:
            kinds = [row["answer_type"]] * len(ts)
            rewards = math_reward(ts, [row["answer"]] * len(ts), answer_type=kinds)
        else:
            problem = Problem(tuple(row["numbers"]), row["target"])
            rewards = [verify(problem, t).correct for t in ts]
        counts.append(int(sum(rewards)))
    return counts


def sample_problems(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    benchmark: str,
    *,
    samples: int,
    draws: int,
    temperature: float,
    sigma: float,
    noise_seed: int,
    max_new_tokens: int,
    seed: int = EVAL_SEED,
    site: str = MLP,
) -> pd.DataFrame:
    """``samples`` completions of every problem of ``dataset``, judged (``judge``), in ``draws``
    groups: group d holds ``samples / draws`` samples drawn at ``temperature`` with the stream
    ``seed + d`` under noise draw d of ``sigma`` on ``site`` (a ``psnlib.noise.SITES`` key: noise
    index d, ``NOISE_STEP``, ``noise_seed``; applied in place by ``perturbed``, which restores the
    weights bit-exactly; sigma 0: the clean weights, the same streams). Returns ``pool_draws`` of
    the groups' tables: per problem prompt, n, correct, entropy (mean token entropy) and length
    (mean completion tokens)."""
    if draws < 1 or samples % draws:
        raise ValueError(f"draws must be >= 1 and divide samples ({samples}), got {draws}")
    prompts, n = list(dataset["prompt"]), samples // draws
    noise = NoiseConfig(sigma=sigma, targets=site, seed=noise_seed)
    tables = []
    for d in range(draws):
        with perturbed(model, noise, step=NOISE_STEP, index=d):
            drawn = sample_prompts(
                model,
                tokenizer,
                prompts,
                n,
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                seed=seed + d,
                with_stats=True,
                progress=False,
            )  # (P, n, L)
        table = {
            "prompt": prompts,
            "n": n,
            "correct": judge(benchmark, dataset, decode(tokenizer, drawn)),
        }
        table["entropy"] = mean_token_entropy(drawn.entropies, drawn.lengths)  # (P,)
        table["length"] = drawn.lengths.double().mean(-1).numpy()  # (P,)
        tables.append(pd.DataFrame(table))
    return pool_draws(tables)


def pass1(problems: pd.DataFrame) -> float:
    """Mean over problems of ``correct / n``: the unbiased pass@1."""
    return float((problems["correct"] / problems["n"]).mean())


def pass1_at_temperatures(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    profile: Profile,
    benchmark: str,
    temperatures: tuple[float, ...],
    samples: int = 64,
) -> pd.DataFrame:
    """pass@1 of ``model`` (clean weights) on ``benchmark`` (the profile's ``eval_problems``
    problems) at each temperature, from ``samples`` samples per problem drawn with one stream
    (``EVAL_SEED``, the same at every T): temperature, samples, pass@1 and its 95% bootstrap
    interval over problems (lo, hi)."""
    if not temperatures or any(not 0 < t < math.inf for t in temperatures):
        raise ValueError(f"temperatures must be finite numbers > 0, got {temperatures!r}")
    dataset = problems_of(benchmark, profile.eval_problems)
    rows = []
    for t in temperatures:
        table = sample_problems(
            model,
            tokenizer,
            dataset,
            benchmark,
            samples=samples,
            draws=1,
            temperature=t,
            sigma=0.0,
            noise_seed=0,
            max_new_tokens=profile.max_completion_length,
        )
        curve = bootstrap_ci(samples, table["correct"].to_numpy(), [1], seed=EVAL_SEED)
        rows.append({"temperature": t, "samples": samples, **curve.iloc[0].drop("k").to_dict()})
    return pd.DataFrame(rows).rename(columns={"pass_at_k": "pass@1"})


def timed(compute: Callable[[], dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """``compute()``'s tables plus ``time``: its wall and CPU seconds (this process)."""
    start, cpu = time.perf_counter(), time.process_time()
    tables = compute()
    seconds = {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}
    return tables | {"time": pd.DataFrame([seconds])}


def site_parts(
    store: ResultStore,
    names: dict[str, str],
    full: Callable[[float, float], pd.DataFrame],
    cheap: Callable[[float], float],
    sigma: float,
    p: Profile,
) -> dict[str, dict[str, pd.DataFrame]]:
    """One site's parts of a checkpoint's premise (``psnlib.replication.plan.premise``, steps
    1-3, computed by ``psnlib.replication.compute.premise_evaluation.premise_parts``; ``names``:
    its part name of each step), loaded from ``store`` where stored (and whole:
    ``PART_TABLES``): ``full(T, sigma)`` is a full evaluation under the site's noise at ``sigma``
    (0: clean), ``cheap(T)`` the search's estimate of the clean pass@1 at T, ``p`` the profile."""
    noise = store.cached(
        names["noise"],
        lambda: timed(lambda: {"problems": full(p.eval_temperature, sigma)}),
        required=PART_TABLES["noise"],
    )
    target = pass1(noise["problems"])

    def search() -> dict[str, pd.DataFrame]:
        found = match_temperature(cheap, target, start=p.eval_temperature)
        trace = pd.DataFrame(found.trace, columns=["temperature", "pass@1"])
        result = pd.DataFrame([{"temperature": found.temperature, "matched": found.matched}])
        return {"search": trace, "result": result}

    match = store.cached(names["match"], lambda: timed(search), required=PART_TABLES["match"])
    T = float(match["result"]["temperature"].iloc[0])
    if not math.isfinite(T) or T <= 0:  # a damaged part that still parses: searched again
        match = timed(search)
        store.save(names["match"], match)
        T = float(match["result"]["temperature"].iloc[0])
    hot = store.load(names["temperature"], required=PART_TABLES["temperature"])
    if hot is None or hot["result"]["temperature"].iloc[0] != T:  # stored at another T: again
        hot = timed(lambda: {"problems": full(T, 0.0), "result": match["result"]})
        store.save(names["temperature"], hot)
    return {names["noise"]: noise, names["match"]: match, names["temperature"]: hot}
