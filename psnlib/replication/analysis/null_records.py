"""What the null checks (``psnlib.replication.analysis.nulls``) read of GRPO's records at the main
seeds.

``grpo_values(profile)`` reads, from the run ledger only (``ledger.usable`` of each GRPO task of
``schedule.tasks``, and ``frontier.training_paths`` (a reader); a missing record is a
``MissingRecords`` that names it, and nothing is trained or evaluated):

- ``per_seed``: per main seed (index, ascending), each per-seed statistic of
  ``claim_stats`` on GRPO's final policy as a claim computes it (``Statistic.per_problem``, the
  mean over problems within a benchmark, then over the in-distribution benchmarks, times
  ``scale``): pass@1, pass@max, pass@max-pass@1, step_validity, diversity, entropy; and
  ``throughput`` from its training log (``claim_stats.THROUGHPUT``, with the clock
  ``claim_stats.step_clock`` picks);
- ``solved_only``: ``[s, t]`` the problems (of those benchmarks) that seed ``s``'s policy solves
  and seed ``t``'s solves in none of its samples (``psnlib.metrics.solved_only``);
- ``paths``: GRPO's training paths (``frontier.points``: seed, step, pass1, passmax);
- ``premise``: per seed and noise site, the premise's pass@1 and pass@max (percent) under the
  site's noise and at its matched temperature (``premise_tables.seed_tables`` of the record's
  parts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from psnlib.metrics import solved_only
from psnlib.replication.analysis import frontier
from psnlib.replication.analysis.claim_stats import (
    DIVERSITY,
    ENTROPY,
    GAIN_GROWTH,
    PASS_AT_1,
    PASS_AT_MAX,
    STEP_VALIDITY,
    THROUGHPUT,
    step_clock,
)
from psnlib.replication.analysis.premise_tables import seed_tables
from psnlib.replication.plan import schedule
from psnlib.replication.plan.experiments import GRPO, benchmarks_of
from psnlib.replication.plan.premise import premise
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.records import ledger
from psnlib.replication.records.missing import MissingRecords
from psnlib.replication.records.tables import task_expectation

MIN_SEEDS = 4  # the split null pairs halves of at least 2 seeds each
PER_SEED = (PASS_AT_1, PASS_AT_MAX, GAIN_GROWTH, STEP_VALIDITY, DIVERSITY, ENTROPY)
PREMISE_COLUMNS = ("noise_pass1", "noise_passmax", "temperature_pass1", "temperature_passmax")


@dataclass(frozen=True)
class GRPOValues:
    """GRPO's values at its main seeds (module doc); ``paths``'s seeds are ``per_seed``'s, the
    premise's are its own plan's, some of them."""

    per_seed: pd.DataFrame  # index seed (ascending); a column per statistic name, throughput
    solved_only: np.ndarray  # (n, n)
    paths: pd.DataFrame  # seed, step, pass1, passmax
    premise: pd.DataFrame  # seed, site, PREMISE_COLUMNS

    def __post_init__(self) -> None:
        seeds = self.per_seed.index.tolist()
        if seeds != sorted(set(seeds)) or len(seeds) < MIN_SEEDS:
            raise ValueError(
                f"the nulls need at least {MIN_SEEDS} distinct seeds, ascending, got {seeds}"
            )
        n = len(seeds)
        if self.solved_only.shape != (n, n):
            raise ValueError(f"solved_only must be {n} x {n}, got {self.solved_only.shape}")
        if sorted(set(self.paths["seed"])) != seeds:
            raise ValueError(f"paths has the seeds {sorted(set(self.paths['seed']))}, not {seeds}")
        premise = sorted(set(self.premise["seed"]))  # the premise's own seeds, some of the main
        if len(premise) < MIN_SEEDS or not set(premise) <= set(seeds):
            raise ValueError(f"premise has the seeds {premise}: {MIN_SEEDS} or more of {seeds}")

    def site(self, site: str) -> pd.DataFrame:
        """The premise's values of one noise site, one row per premise seed, ascending."""
        mine = self.premise[self.premise["site"] == site].set_index("seed").sort_index()
        if mine.index.tolist() != sorted(set(self.premise["seed"])):
            raise ValueError(f"the premise's site {site!r} lacks seeds: has {sorted(mine.index)}")
        return mine


def _records(profile: Profile) -> dict[int, dict]:
    """GRPO's records at the main seeds, by seed; ``MissingRecords`` naming any missing."""
    wanted = [
        t
        for t in schedule.tasks(profile)
        if t.variant.label == GRPO.label and t.seed in profile.seeds
    ]
    records = {t.seed: (t, ledger.usable(task_expectation(profile, t))) for t in wanted}
    missing = [t.name() for t, record in records.values() if record is None]
    if missing or not records:
        raise MissingRecords(
            f"the null checks read GRPO's records at the main seeds {list(profile.seeds)}; no "
            f"usable record of {missing} in {ledger.profile_dir(profile.name)}: run `make "
            f"reproduce PROFILE={profile.name}` first"
        )
    return {seed: record for seed, (_, record) in sorted(records.items())}


def per_seed_values(problems: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """``PER_SEED``'s statistics per seed of one policy's per-problem table (seed, benchmark and
    the problems table's columns): each statistic's mean over a benchmark's problems, then over
    benchmarks, times its scale."""
    columns = {}
    for stat in PER_SEED:
        rows = problems.assign(value=stat.per_problem(problems, profile))
        means = rows.groupby(["seed", "benchmark"])["value"].mean().groupby("seed").mean()
        columns[stat.name] = means * stat.scale
    return pd.DataFrame(columns).sort_index()


def solved_only_matrix(problems: pd.DataFrame) -> np.ndarray:
    """``[s, t]``: how many problems seed ``s`` solves and seed ``t`` never does (module doc),
    seeds ascending; every seed must have the same problems."""
    correct = problems.pivot_table(
        index="seed", columns=["benchmark", "prompt"], values="correct", aggfunc="first"
    ).sort_index()
    if correct.isna().any().any():
        raise ValueError("the seeds' evaluations do not share their problems")
    c = correct.to_numpy()  # (n, P)
    return solved_only(c[:, None, :], c[None, :, :]).sum(axis=2)


def premise_values(profile: Profile, records: dict[int, dict]) -> pd.DataFrame:
    """Per seed of the premise's plan and site: pass@1 and pass@max (percent) under the site's
    noise and at its matched temperature, from the records' premise parts (``records``: GRPO's,
    by seed, the premise's seeds among them; the other main seeds carry no premise)."""
    plan, k = premise(profile), profile.ks[-1]
    rows = []
    for seed in plan.seeds:
        matched = seed_tables(plan, seed, ledger.premise_parts(records[seed]))["matched"]
        for row in matched.to_dict("records"):
            rows.append(
                {"seed": seed, "site": row["site"]}
                | {f"{who}_pass1": 100 * row[f"{who} pass@1"] for who in ("noise", "temperature")}
                | {
                    f"{who}_passmax": 100 * row[f"{who} pass@{k}"]
                    for who in ("noise", "temperature")
                }
            )
    return pd.DataFrame(rows)


def grpo_values(profile: Profile) -> GRPOValues:
    """GRPO's values at ``profile``'s main seeds from the run ledger (module doc)."""
    benchmarks = benchmarks_of(profile, "id")
    paths = frontier.training_paths(profile, benchmarks, profile.seeds)
    records = _records(profile)
    problems = frontier.final_problems(records.values(), benchmarks)
    values = per_seed_values(problems, profile)
    logs = pd.concat(
        [ledger.log_table(r).assign(policy=GRPO.label, seed=s) for s, r in records.items()]
    )
    clock, _ = step_clock(logs)
    values["throughput"] = pd.Series(
        {s: THROUGHPUT.per_run(log.assign(seconds=log[clock])) for s, log in logs.groupby("seed")}
    )
    return GRPOValues(values, solved_only_matrix(problems), paths, premise_values(profile, records))
