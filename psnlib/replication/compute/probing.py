"""The probes' computations: experiments on one policy at a time, outside the comparisons of
``psnlib.replication.plan.experiments``: the testbed's base and weak policies (notebooks 01, 01b),
the base policy sampled under noise (00) and at the papers' temperatures (01b), the noise
calibrated on a GRPO checkpoint (01b), fresh samples of several policies on one problem (11), and
the quality of the weak prefixes (09, 01b).

``COMPUTE`` maps each probe of ``psnlib.replication.plan.probes.PROBES`` to its computation,
``(profile, model, tokenizer)`` -> tables, which ``psnlib.replication.compute.jobs.run_task``
calls in the task of each of the probe's variants and keeps in its ledger record
(``psnlib.replication.analysis.probe_tables`` reads them from there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.models import count_parameters
from psnlib.paths import ROOT
from psnlib.replication.compute import budget, calibrate
from psnlib.replication.compute.evaluation import evaluate_benchmarks
from psnlib.replication.compute.prefixes import prefix_train_set
from psnlib.replication.compute.premise_sampling import pass1_at_temperatures
from psnlib.replication.compute.pretrain import base_policy, policy_meta, weak_policy
from psnlib.replication.plan.experiments import benchmarks_of, main_benchmark
from psnlib.replication.plan.policies import spec_hash
from psnlib.replication.plan.probes import (
    CALIBRATION_KL,
    CALIBRATION_RMS,
    EXAMPLE_SAMPLES,
    PAPER_TEMPERATURES,
    TEMPERATURE_SAMPLES,
    probe_seed,
    testbed_benchmarks,
)
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import EVAL_SEED
from psnlib.sampling import generate_samples
from psnlib.tasks import load_benchmark
from psnlib.tasks.countdown import Problem, verify
from psnlib.tasks.prefix_quality import prefix_quality


def _prefix_quality(profile: Profile, seed: int = 0) -> pd.DataFrame:
    """How many training prefixes can still be completed to a correct chain, exactly (the weak
    paper's Figure 4 asked an LLM judge): one row per (truncation, source) the ablations use,
    with ``psnlib.tasks.prefix_quality.prefix_quality``'s shares and the mean prefix length in
    steps."""
    rows = []
    for truncation, source in (("entropy", "weak"), ("random", "weak"), ("entropy", "same_family")):
        data = prefix_train_set(profile, seed, truncation=truncation, source=source)
        steps = sum(data["prefix_steps"]) / max(len(data), 1)
        rows.append(
            {"truncation": truncation, "source": source, "mean_steps": steps} | prefix_quality(data)
        )
    return pd.DataFrame(rows)


def _examples_of(
    profile: Profile, model: PreTrainedModel, tokenizer, problems: list[Problem]
) -> pd.DataFrame:
    """Per problem, ``profile.example_responses`` of ``EXAMPLE_SAMPLES`` samples (correct ones
    first) and how many of them were correct: prompt, response, correct, correct_in_draw."""
    texts = generate_samples(
        model,
        tokenizer,
        [problem.prompt for problem in problems],
        EXAMPLE_SAMPLES,
        temperature=profile.eval_temperature,
        max_new_tokens=profile.max_completion_length,
        seed=EVAL_SEED,
        progress=False,
    )
    rows = []
    for problem, drawn in zip(problems, texts, strict=True):
        graded = sorted(((verify(problem, t).correct, t) for t in drawn), key=lambda x: not x[0])
        hits = sum(ok for ok, _ in graded)
        for ok, text in graded[: profile.example_responses]:
            rows.append(
                {"prompt": problem.prompt, "response": text, "correct": ok, "correct_in_draw": hits}
            )
    return pd.DataFrame(rows, columns=["prompt", "response", "correct", "correct_in_draw"])


def _examples(profile: Profile, model: PreTrainedModel, tokenizer) -> dict[str, pd.DataFrame]:
    """``_examples_of`` every in-distribution problem the evaluations draw (notebook 11 shows
    one that PSN solves and GRPO never does)."""
    problems = [
        Problem(tuple(row["numbers"]), int(row["target"]))
        for benchmark in benchmarks_of(profile, "id")
        for row in load_benchmark(benchmark, profile.eval_problems, seed=EVAL_SEED)
    ]
    return {"examples": _examples_of(profile, model, tokenizer, problems)}


def _testbed(profile: Profile, benchmarks: tuple[str, ...] = ()) -> dict:
    """The testbed's base and weak policies and their pass@k (notebook 01), on ``benchmarks``
    (default: the ablation benchmarks).

    Returns ``{"curves": policy x benchmark x k, "policies": one row per policy}``.
    """
    if note := budget.sft_announcement(profile, {"base": profile.base, "weak": profile.weak}):
        print(note, flush=True)
    curves, policies = [], []
    for name, spec, build in (
        ("base", profile.base, base_policy),
        ("weak", profile.weak, weak_policy),
    ):
        start = time.perf_counter()
        model, tokenizer, path = build(profile)
        meta = policy_meta(path)
        tables = evaluate_benchmarks(
            model,
            tokenizer,
            profile,
            benchmarks or profile.ablation_benchmarks,
            run_key=f"{name}-{spec_hash(spec)}",
            seed=EVAL_SEED,
        )
        curves.append(tables["curves"].drop(columns=["run", "seed"]).assign(policy=name))
        policies.append(
            {
                "policy": name,
                "path": _shown(path),
                "parameters": count_parameters(model),
                "build_seconds": meta["train_seconds"],
                "final_sft_loss": meta["final_loss"],
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    return {"curves": pd.concat(curves, ignore_index=True), "policies": pd.DataFrame(policies)}


def _shown(path: Path) -> str:
    """A policy's directory as a record keeps it: relative to the checkout where it lies in it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _temperatures(profile: Profile, model: PreTrainedModel, tokenizer) -> dict:
    temperatures = (profile.eval_temperature, *PAPER_TEMPERATURES)
    table = pass1_at_temperatures(
        model, tokenizer, profile, main_benchmark(profile), temperatures, TEMPERATURE_SAMPLES
    )
    return {"pass1": table}


def _calibration(profile: Profile, model: PreTrainedModel, tokenizer) -> dict:
    benchmark = main_benchmark(profile)
    prompts = list(load_benchmark(benchmark, min(profile.eval_problems, 64))["prompt"])
    rms = calibrate.weight_rms(model)
    sigmas = tuple(r * rms for r in CALIBRATION_RMS)
    cal = calibrate.calibrate_sigma(
        model, tokenizer, prompts, CALIBRATION_KL, sigmas, n=16, draws=4
    )
    fit = {"weight_rms": rms, "c": cal.c, "b": cal.b, "sigma": cal.sigma}
    return {
        "points": cal.points,
        "fit": pd.DataFrame([fit | {"sigma_over_rms": cal.sigma_over_rms}]),
    }


COMPUTE: dict[
    str, Callable[[Profile, PreTrainedModel, PreTrainedTokenizerBase], dict[str, pd.DataFrame]]
] = {
    "testbed": lambda p, m, t: _testbed(p, testbed_benchmarks(p)),
    "prefix_quality": lambda p, m, t: {"quality": _prefix_quality(p, probe_seed(p))},
    "temperatures": _temperatures,
    "calibration": _calibration,
    "examples": _examples,
}
