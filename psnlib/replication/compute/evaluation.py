"""Evaluation at a profile's scale, stored: ``evaluate_benchmarks`` runs ``psnlib.evaluate`` on a
profile's benchmarks and keeps the tables in the result store
(``psnlib.replication.compute.store``), keyed by everything that determines them (``eval_config``),
so a finished evaluation is never recomputed.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.evaluate import evaluate_answers, evaluate_policy
from psnlib.replication.compute.store import ResultStore, weights_fingerprint
from psnlib.replication.plan.evaluation import eval_settings
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.records.schema import PART_TABLES
from psnlib.replication.records.tables import labelled
from psnlib.tasks import REAL_BENCHMARKS, load_benchmark, load_real_benchmark


def eval_config(
    model: PreTrainedModel, profile: Profile, run_key: str, seed: int, engine: Any = None
) -> dict[str, Any]:
    """Everything that determines an evaluation's results (the store key covers all of it): the
    run, a fingerprint of the weights and ``eval_settings``."""
    return {
        "run": run_key,
        "weights": weights_fingerprint(model),
        **eval_settings(profile, seed, engine),
    }


def benchmark_problems(benchmark: str, problems: int, seed: int = 0) -> Dataset:
    """The first ``problems`` problems of ``benchmark`` at ``seed``: a Countdown split, or a real
    benchmark (``REAL_BENCHMARKS``; 0 problems: all of it)."""
    load = load_real_benchmark if benchmark in REAL_BENCHMARKS else load_benchmark
    return load(benchmark, problems, seed=seed)


def evaluate_at_profile(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    profile: Profile,
    benchmark: str,
    seed: int = 0,
    progress: bool = True,
    engine: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``evaluate_policy`` on one Countdown benchmark, or ``evaluate_answers`` on a real one, at
    the profile's problems (0: all of a real benchmark), samples, k, temperature and completion
    length (no result store)."""
    evaluate = evaluate_answers if benchmark in REAL_BENCHMARKS else evaluate_policy
    dataset = benchmark_problems(benchmark, profile.eval_problems, seed)
    return evaluate(
        model,
        tokenizer,
        dataset,
        n=profile.eval_samples,
        ks=profile.ks,
        temperature=profile.eval_temperature,
        max_new_tokens=profile.max_completion_length,
        seed=seed,
        progress=progress,
        engine=engine,
    )


def evaluate_parts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    profile: Profile,
    benchmarks: tuple[str, ...] | None = None,
    *,
    run_key: str,
    seed: int = 0,
    progress: bool = True,
    engine: Any = None,
) -> dict[str, dict[str, pd.DataFrame]]:
    """``evaluate_benchmarks``'s tables as they are stored, one part per benchmark:
    ``{benchmark: {"problems": ..., "curves": ...}}`` (what a ledger record keeps)."""
    config = eval_config(model, profile, run_key, seed, engine)
    store = ResultStore.for_run(profile.name, run_key, config)

    def compute(benchmark: str) -> dict[str, pd.DataFrame]:
        start = time.perf_counter()
        problems, curve = evaluate_at_profile(
            model, tokenizer, profile, benchmark, seed, progress, engine
        )
        return {"problems": problems, "curves": curve.assign(seconds=time.perf_counter() - start)}

    return {
        benchmark: store.cached(benchmark, lambda b=benchmark: compute(b), required=PART_TABLES)
        for benchmark in benchmarks or profile.benchmarks
    }


def evaluate_benchmarks(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    profile: Profile,
    benchmarks: tuple[str, ...] | None = None,
    *,
    run_key: str,
    seed: int = 0,
    progress: bool = True,
    engine: Any = None,
) -> dict[str, pd.DataFrame]:
    """Evaluate a policy on benchmarks (default: the profile's) at the profile's scale.

    ``run_key`` names the policy (e.g. ``"base"`` or a run's directory name); results go to
    ``data/results/<profile>/<run_key>-<hash>/``, one part per benchmark (``evaluate_parts``),
    and finished parts are loaded, not recomputed. The hash covers ``eval_config`` (a fingerprint
    of the weights included), not the benchmark list, so adding a benchmark reuses the others.

    ``engine`` (a ``vllm.LLM`` of the same weights) samples instead of the psnlib decoder.

    Returns ``{"problems": run x benchmark x problem, "curves": run x benchmark x k}``, with
    columns run, seed, benchmark first, and ``seconds`` per benchmark in ``curves``.
    """
    parts = evaluate_parts(
        model,
        tokenizer,
        profile,
        benchmarks,
        run_key=run_key,
        seed=seed,
        progress=progress,
        engine=engine,
    )
    return labelled(parts, run_key, seed)
