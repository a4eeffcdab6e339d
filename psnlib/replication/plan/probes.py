"""The probes as the plan's values: experiments on one policy at a time, outside the comparisons
of ``psnlib.replication.plan.experiments``, that a notebook shows at the profile's defaults.

``PROBES`` names each with the variants whose task computes it (``psnlib.replication.compute
.jobs``: the base policy's, or GRPO's at the first main seed, ``probe_seed``, whose checkpoint
then never has to travel); the task keeps its tables in its ledger record. Here too are the
settings the probes run at (``testbed_benchmarks``, ``PAPER_TEMPERATURES``, ``CALIBRATION_KL``,
...). Their computations are ``psnlib.replication.compute.probing``'s, their readers
``psnlib.replication.analysis.probe_tables``'."""

from __future__ import annotations

from dataclasses import dataclass

from psnlib.replication.plan.experiments import BASE_POLICY, GRPO, PSN, benchmarks_of
from psnlib.replication.plan.profiles import PROFILES, Profile
from psnlib.replication.plan.variants import Variant

EXAMPLE_SAMPLES = 16  # fresh samples per problem that probe_tables.side_by_side shows from


def testbed_benchmarks(profile: Profile) -> tuple[str, ...]:
    """What notebooks 01 and 01b evaluate the base and weak policies on: the ablation benchmarks
    and the in-distribution levels."""
    return tuple(dict.fromkeys((*profile.ablation_benchmarks, *benchmarks_of(profile, "id"))))


# The temperatures at which notebook 01b shows the base policy's pass@1: the profile's, PSN's
# (the paper profile's) and weak-model guidance's (0.6, arXiv 2608.27420); samples per problem.
PAPER_TEMPERATURES = (PROFILES["paper"].eval_temperature, 0.6)
TEMPERATURE_SAMPLES = 64
CALIBRATION_KL = 0.004  # the per-token KL the calibration solves for (the papers' target)
CALIBRATION_RMS = (0.12, 0.24, 0.36)  # the sigmas it measures, as fractions of the weight RMS


@dataclass(frozen=True)
class Probe:
    """What a notebook shows of policies beyond their evaluations, computed by the task of each
    of ``variants`` at the first main seed (its computation:
    ``psnlib.replication.compute.probing.COMPUTE``)."""

    variants: tuple[Variant, ...]


PROBES: dict[str, Probe] = {
    "testbed": Probe((BASE_POLICY,)),
    "prefix_quality": Probe((BASE_POLICY,)),
    "temperatures": Probe((BASE_POLICY,)),
    "calibration": Probe((GRPO,)),
    "examples": Probe((GRPO, PSN)),
}


def probe_seed(profile: Profile) -> int:
    """The seed of the task that computes the probes: the first main seed."""
    return profile.seeds[0]
