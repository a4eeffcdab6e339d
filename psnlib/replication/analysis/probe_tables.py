"""The probes' tables as the notebooks show them, read from the ledger: ``testbed``,
``prefix_quality_table``, ``side_by_side``, ``base_temperatures`` and ``calibration`` read the
record of the task that computed each probe (``psnlib.replication.plan.probes.PROBES``, computed
by ``psnlib.replication.compute.probing``) and compute nothing: what no usable record holds is a
``psnlib.replication.records.missing.MissingRecords`` that names the task."""

from __future__ import annotations

import pandas as pd

from psnlib.replication.plan.probes import PROBES, probe_seed
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import Variant
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords, require
from psnlib.replication.records.tables import expectation
from psnlib.tasks.countdown import Problem


def prefix_quality_table(profile: Profile, seed: int | None = None) -> pd.DataFrame:
    """``psnlib.replication.compute.probing._prefix_quality`` at ``seed`` (default:
    ``psnlib.replication.plan.probes.probe_seed``), read from the ledger."""
    return _read(profile, "prefix_quality", seed=seed)["quality"]


def side_by_side(
    profile: Profile, variants: list[Variant], problem: Problem, seed: int = 0
) -> pd.DataFrame:
    """``psnlib.replication.plan.probes.EXAMPLE_SAMPLES`` fresh samples of each variant (at
    training seed ``seed``) on one problem; keeps ``profile.example_responses`` per variant,
    correct ones first. Read from the ledger: the plan's ``examples`` probe of each variant holds
    every in-distribution problem the evaluations draw, at ``probe_seed``; another problem is a
    ``MissingRecords``.

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


def testbed(profile: Profile, benchmarks: tuple[str, ...] = ()) -> dict:
    """``psnlib.replication.compute.probing._testbed`` on ``benchmarks`` (default: the ablation
    benchmarks), read from the ledger: the plan's probe holds every benchmark of
    ``psnlib.replication.plan.probes.testbed_benchmarks``; another is a ``MissingRecords``."""
    benchmarks = benchmarks or profile.ablation_benchmarks
    recorded = _read(profile, "testbed")
    curves = recorded["curves"]
    if not set(benchmarks) <= set(curves["benchmark"]):
        raise MissingRecords(f"the testbed probe holds {sorted(set(curves['benchmark']))} only")
    return recorded | {
        "curves": curves[curves["benchmark"].isin(benchmarks)].reset_index(drop=True)
    }


def base_temperatures(profile: Profile) -> pd.DataFrame:
    """pass@1 of the base policy on the main benchmark at the profile's evaluation temperature
    and the papers' (``psnlib.replication.plan.probes.PAPER_TEMPERATURES``):
    ``psnlib.replication.compute.premise_sampling.pass1_at_temperatures``, read from the
    ledger."""
    return _read(profile, "temperatures")["pass1"]


def calibration(profile: Profile, seed: int | None = None) -> dict[str, pd.DataFrame]:
    """The sigma whose MLP noise induces ``psnlib.replication.plan.probes.CALIBRATION_KL`` per
    token on the GRPO run at ``seed`` (default: the first main seed), measured at
    ``CALIBRATION_RMS`` (of the same module) x its MLP weight RMS on up to 64 problems of the
    main benchmark (``psnlib.replication.compute.calibrate.calibrate_sigma``): ``points`` (per
    sigma) and ``fit`` (one row: weight_rms, c, b, sigma, sigma_over_rms of ``KL = c
    sigma^b``), read from the ledger."""
    return _read(profile, "calibration", seed=seed)


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
