"""Experiments on one policy at a time, outside the comparisons of
``psnlib.replication.experiments``: the testbed's base and weak policies (notebooks 01, 01b), the
base policy sampled under noise (00) and at the papers' temperatures (01b), the noise calibrated
on a GRPO checkpoint (01b), fresh samples of several policies on one problem (11), and the
quality of the weak prefixes (09, 01b).

Those a notebook shows at the profile's defaults are ``PROBES``: each is computed by one task of
the plan (``psnlib.replication.jobs``: the base policy's, or GRPO's at the first main seed, whose
checkpoint then never has to travel) and kept in its ledger record. ``testbed``,
``prefix_quality_table``, ``side_by_side``, ``base_temperatures`` and ``calibration`` read it
from there and compute nothing: what no usable record holds is a
``psnlib.replication.records.MissingRecords`` that names the task. ``PROBES``' ``compute``
functions are the compute layer's (``psnlib.replication.jobs.run_task`` calls them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.io import ROOT
from psnlib.models import count_parameters
from psnlib.replication import budget, calibrate, ledger
from psnlib.replication.evaluation import evaluate_benchmarks
from psnlib.replication.experiments import BASE_POLICY, GRPO, PSN, benchmarks_of, main_benchmark
from psnlib.replication.prefixes import prefix_train_set
from psnlib.replication.premise_sampling import pass1_at_temperatures
from psnlib.replication.pretrain import base_policy, policy_meta, spec_hash, weak_policy
from psnlib.replication.profiles import PROFILES, Profile
from psnlib.replication.records import MissingRecords, require
from psnlib.replication.variants import EVAL_SEED, Variant, expectation
from psnlib.sampling import generate_samples
from psnlib.tasks import load_benchmark
from psnlib.tasks.countdown import Problem, verify
from psnlib.tasks.prefix_quality import prefix_quality


def prefix_quality_table(profile: Profile, seed: int | None = None) -> pd.DataFrame:
    """``_prefix_quality`` at ``seed`` (default: ``probe_seed``), read from the ledger."""
    return _read(profile, "prefix_quality", seed=seed)["quality"]


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


EXAMPLE_SAMPLES = 16  # fresh samples per problem that side_by_side shows from


def side_by_side(
    profile: Profile, variants: list[Variant], problem: Problem, seed: int = 0
) -> pd.DataFrame:
    """``EXAMPLE_SAMPLES`` fresh samples of each variant (at training seed ``seed``) on one
    problem; keeps ``profile.example_responses`` per variant, correct ones first. Read from the
    ledger: the plan's ``examples`` probe of each variant holds every in-distribution problem the
    evaluations draw, at ``probe_seed``; another problem is a ``MissingRecords``.

    Returns columns policy, response, correct, correct_in_draw (how many of the draw were)."""
    shown = []
    for v in variants:
        table = _read(profile, "examples", v, seed)["examples"]
        if problem.prompt not in set(table["prompt"]):
            raise MissingRecords(f"the examples probe of {v.label} does not hold {problem.prompt}")
        rows = table[table["prompt"] == problem.prompt]
        shown.append(rows.drop(columns="prompt").assign(policy=v.label))
    columns = ["policy", "response", "correct", "correct_in_draw"]
    return pd.concat(shown, ignore_index=True)[columns]


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


def testbed(profile: Profile, benchmarks: tuple[str, ...] = ()) -> dict:
    """``_testbed`` on ``benchmarks`` (default: the ablation benchmarks), read from the ledger:
    the plan's probe holds every benchmark of ``testbed_benchmarks``; another is a
    ``MissingRecords``."""
    benchmarks = benchmarks or profile.ablation_benchmarks
    recorded = _read(profile, "testbed")
    curves = recorded["curves"]
    if not set(benchmarks) <= set(curves["benchmark"]):
        raise MissingRecords(f"the testbed probe holds {sorted(set(curves['benchmark']))} only")
    return recorded | {
        "curves": curves[curves["benchmark"].isin(benchmarks)].reset_index(drop=True)
    }


def testbed_benchmarks(profile: Profile) -> tuple[str, ...]:
    """What notebooks 01 and 01b evaluate the base and weak policies on: the ablation benchmarks
    and the in-distribution levels."""
    return tuple(dict.fromkeys((*profile.ablation_benchmarks, *benchmarks_of(profile, "id"))))


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


# The temperatures at which notebook 01b shows the base policy's pass@1: the profile's, PSN's
# (the paper profile's) and weak-model guidance's (0.6, arXiv 2608.27420); samples per problem.
PAPER_TEMPERATURES = (PROFILES["paper"].eval_temperature, 0.6)
TEMPERATURE_SAMPLES = 64
CALIBRATION_KL = 0.004  # the per-token KL the calibration solves for (the papers' target)
CALIBRATION_RMS = (0.12, 0.24, 0.36)  # the sigmas it measures, as fractions of the weight RMS


def base_temperatures(profile: Profile) -> pd.DataFrame:
    """pass@1 of the base policy on the main benchmark at the profile's evaluation temperature
    and the papers' (``PAPER_TEMPERATURES``): ``premise_sampling.pass1_at_temperatures``, read
    from the ledger."""
    return _read(profile, "temperatures")["pass1"]


def _temperatures(profile: Profile, model: PreTrainedModel, tokenizer) -> dict:
    temperatures = (profile.eval_temperature, *PAPER_TEMPERATURES)
    table = pass1_at_temperatures(
        model, tokenizer, profile, main_benchmark(profile), temperatures, TEMPERATURE_SAMPLES
    )
    return {"pass1": table}


def calibration(profile: Profile, seed: int | None = None) -> dict[str, pd.DataFrame]:
    """The sigma whose MLP noise induces ``CALIBRATION_KL`` per token on the GRPO run at ``seed``
    (default: the first main seed), measured at ``CALIBRATION_RMS`` x its MLP weight RMS on up to
    64 problems of the main benchmark (``calibrate.calibrate_sigma``): ``points`` (per sigma) and
    ``fit`` (one row: weight_rms, c, b, sigma, sigma_over_rms of ``KL = c sigma^b``), read from
    the ledger."""
    return _read(profile, "calibration", seed=seed)


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


@dataclass(frozen=True)
class Probe:
    """What a notebook shows of policies beyond their evaluations, computed by the task of each
    of ``variants`` at the first main seed: ``compute(profile, model, tokenizer)`` -> tables."""

    variants: tuple[Variant, ...]
    compute: Callable[[Profile, PreTrainedModel, PreTrainedTokenizerBase], dict[str, pd.DataFrame]]


PROBES: dict[str, Probe] = {
    "testbed": Probe((BASE_POLICY,), lambda p, m, t: _testbed(p, testbed_benchmarks(p))),
    "prefix_quality": Probe(
        (BASE_POLICY,), lambda p, m, t: {"quality": _prefix_quality(p, probe_seed(p))}
    ),
    "temperatures": Probe((BASE_POLICY,), _temperatures),
    "calibration": Probe((GRPO,), _calibration),
    "examples": Probe((GRPO, PSN), _examples),
}


def probe_seed(profile: Profile) -> int:
    """The seed of the task that computes the probes: the first main seed."""
    return profile.seeds[0]


def _read(
    profile: Profile, name: str, variant: Variant | None = None, seed: int | None = None
) -> dict[str, pd.DataFrame]:
    """Probe ``name``'s tables from the ledger record of ``variant``'s task (default: the
    probe's first) at ``seed`` (default: ``probe_seed``, the only seed the plan computes probes
    at); ``MissingRecords`` naming the task where no usable record holds them."""
    variant = variant or PROBES[name].variants[0]
    at = probe_seed(profile)
    if seed is not None and seed != at:
        raise MissingRecords(f"the plan computes the {name} probe at seed {at} only, not {seed}")
    expected = expectation(profile, variant, at, (), probes=(name,))
    task = f"{variant.label} seed {at} ({name} probe)"
    record = require(profile.name, {task: expected}, f"the {name} probe")[task]
    return ledger.probe_tables(record, name)
