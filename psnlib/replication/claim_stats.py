"""The statistics a claim compares, per training seed, and the policies a claim names at a profile.

``STATISTICS`` (``psnlib.replication.claims``) maps to one ``Statistic`` each here. Most are
computed per problem from an experiment's ``problems`` table (``psnlib.evaluate.evaluate_policy``'s
columns; ``n`` samples, ``c`` of them correct), averaged over the problems of a benchmark, then
over benchmarks, per seed:

- ``pass@1``, ``pass@max``: the unbiased ``pass@k = 1 - C(n - c, k) / C(n, k)`` at the profile's
  smallest and largest k, in percent;
- ``pass@max-pass@1``: ``pass@K - pass@1`` per problem, in points, so that the paired difference
  ``ours - theirs`` is the gain at the largest k minus the gain at k = 1 ("the gain grows with
  k");
- ``solved_only``: per seed, the problems one policy solves (``c > 0``) and the other never does
  in its ``n`` samples, each way (a count, not a mean);
- ``step_validity``, ``diversity``: the per-problem shares of the same names (valid steps;
  ``1 - `` the mean similarity of random pairs of responses), in percent;
- ``entropy``: the mean token entropy of the trained policy's evaluation samples, in nats.

``throughput`` comes from the runs' training logs instead (the ``logs`` table of
``psnlib.replication.variants.compare``): ``60 * steps / sum(step_time)``, training steps per minute
of step wall time (generation included), per run. Every arm of a comparison trains the same batch,
so the ratio of two runs' values is the ratio of their rollouts per second.

A claim's ``ours`` and ``theirs`` may name policies that depend on the profile through format
fields (``policy_names``): ``{model1}``, ``{model2}``, ... (the profile's ``other_policies``, as
``psnlib.replication.experiments.across_models`` labels them), ``{sigma}`` (the PSN arm's sigma),
``{sigma_low}`` and ``{sigma_high}`` (the smallest and largest of the profile's sigma sweep).
``resolve`` fills them in; where the profile has no such policy it raises ``NotRun``, and the
claim's row says "not run at this profile" (a status, not a verdict).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from psnlib.metrics import pass_at_k
from psnlib.replication.claims import STATISTICS, Claim
from psnlib.replication.experiments import plan
from psnlib.replication.pretrain import policy_meta
from psnlib.replication.profiles import Profile
from psnlib.replication.variants import model_name

NOT_RUN = "not run at this profile"  # the status of a claim the profile has no runs for


class NotRun(Exception):
    """The profile has no run of a policy that a claim compares (the message says which)."""


def _pass(rows: pd.DataFrame, k: int) -> np.ndarray:
    return pass_at_k(rows["n"].to_numpy(), rows["correct"].to_numpy(), k)


def _column(name: str) -> Callable[[pd.DataFrame, Profile], np.ndarray]:
    return lambda rows, profile: rows[name].to_numpy(dtype=float)


@dataclass(frozen=True)
class Statistic:
    """How one statistic is computed: per problem (``per_problem``, from the problems table) or
    per run (``per_run``, from its training log), the factor to its unit, and the unit."""

    unit: str  # "points", "problems", "nats" or "steps/min"
    scale: float = 100.0  # the mean times scale is in unit (100: a share in percentage points)
    per_problem: Callable[[pd.DataFrame, Profile], np.ndarray] | None = None
    per_run: Callable[[pd.DataFrame], float] | None = None


def _steps_per_minute(log: pd.DataFrame) -> float:
    """``60 * steps / sum(step_time)`` over the log's steps with a step time."""
    times = log["step_time"].dropna().to_numpy(dtype=float)
    return 60.0 * len(times) / times.sum() if times.sum() > 0 else float("nan")


STATS: dict[str, Statistic] = {
    "pass@1": Statistic("points", per_problem=lambda rows, p: _pass(rows, p.ks[0])),
    "pass@max": Statistic("points", per_problem=lambda rows, p: _pass(rows, p.ks[-1])),
    "pass@max-pass@1": Statistic(
        "points", per_problem=lambda rows, p: _pass(rows, p.ks[-1]) - _pass(rows, p.ks[0])
    ),
    "solved_only": Statistic(
        "problems", 1.0, per_problem=lambda rows, p: (rows["correct"] > 0).to_numpy(dtype=float)
    ),
    "step_validity": Statistic("points", per_problem=_column("step_validity")),
    "diversity": Statistic("points", per_problem=_column("diversity")),
    "entropy": Statistic("nats", 1.0, per_problem=_column("entropy")),
    "throughput": Statistic("steps/min", 1.0, per_run=_steps_per_minute),
}
if set(STATS) != set(STATISTICS):
    raise ImportError(
        f"psnlib.replication.claims.STATISTICS {STATISTICS} and claim_stats.STATS differ"
    )
DIGITS = {"problems": 0, "nats": 3}  # decimals shown per unit; 1 for the others


def unit_of(statistic: str) -> str:
    """The unit of a statistic, by its name or as a row shows it (``pass@256``: points)."""
    return STATS[statistic].unit if statistic in STATS else "points"


def number(x: float, statistic: str, signed: bool = False) -> str:
    """``x`` with the decimals of the statistic's unit (``DIGITS``), with its sign if asked."""
    return f"{x:{'+' if signed else ''}.{DIGITS.get(unit_of(statistic), 1)}f}"


def label(statistic: str, profile: Profile) -> str:
    """The statistic as a row shows it: ``max`` replaced by the profile's largest k."""
    return statistic.replace("max", str(profile.ks[-1])) if "pass@" in statistic else statistic


def policy_names(profile: Profile) -> dict[str, str]:
    """The format fields of claims' policy labels at ``profile`` (module doc)."""
    names = {f"model{i}": model_name(s) for i, s in enumerate(profile.other_policies, start=1)}
    names["sigma"] = f"{profile.psn_sigma:g}"
    if profile.sigma_sweep:
        names["sigma_low"] = f"{min(profile.sigma_sweep):g}"
        names["sigma_high"] = f"{max(profile.sigma_sweep):g}"
    return names


FIELD_NAMES = {  # a format field in words ({} takes its number)
    "model": "other base model {}",
    "sigma_low": "sigma sweep",
    "sigma_high": "sigma sweep",
}


def readable(label: str) -> str:
    """A policy label or format field in words: ``"PSN fixed ({model2})"`` becomes
    ``"PSN fixed (other base model 2)"``, ``"model2"`` becomes ``"other base model 2"``."""

    def words(field: str) -> str:
        kind, number = field.rstrip("0123456789"), field[len(field.rstrip("0123456789")) :]
        return FIELD_NAMES.get(kind, kind).format(number)

    if "{" not in label:
        return words(label)
    return re.sub(r"\{(\w+)\}", lambda m: words(m.group(1)), label)


def resolve(claim: Claim, profile: Profile) -> Claim:
    """``claim`` with its policy labels' format fields filled in for ``profile``; ``NotRun``
    where the profile lacks a field (no second model, no sigma sweep) or the filled-in labels
    name the same policy (the PSN arm's sigma is the sweep's smallest)."""
    names = policy_names(profile)
    try:
        ours, theirs = claim.ours.format(**names), claim.theirs.format(**names)
    except KeyError as missing:
        field = missing.args[0]
        kin = [v for k, v in names.items() if k.rstrip("0123456789") == field.rstrip("0123456789")]
        have = f"it has {', '.join(kin)}" if kin else "it has none"
        raise NotRun(f"the {profile.name} profile has no {readable(field)} ({have})") from None
    if ours == theirs and (ours, theirs) != (claim.ours, claim.theirs):
        raise NotRun(f"at the {profile.name} profile both sides are {ours!r}")
    return dataclasses.replace(claim, ours=ours, theirs=theirs)


def per_problem(problems: pd.DataFrame, policy: str, statistic: str, profile: Profile):
    """One policy's per-problem values of ``statistic``: seed, benchmark, prompt, value."""
    mine = problems[problems["policy"] == policy]
    if mine.empty:
        raise ValueError(f"no evaluation of policy {policy!r}; have {sorted(set(problems.policy))}")
    value = STATS[statistic].per_problem(mine, profile)
    return mine[["seed", "benchmark", "prompt"]].assign(value=value)


def paired(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per-problem values of two policies side by side, seed by seed; a policy evaluated at one
    seed only (the base policy) is paired with every seed of the other."""
    keys = ["benchmark", "prompt"]
    if a["seed"].nunique() > 1 and b["seed"].nunique() > 1:
        keys = ["seed", *keys]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if "seed" not in keys:
        many = "seed_a" if a["seed"].nunique() > 1 else "seed_b"
        both = both.rename(columns={many: "seed"})
    if both.empty:
        raise ValueError("the two policies share no evaluated problem and seed")
    return both


def seed_means(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: each policy's mean over problems within a benchmark, then over benchmarks."""
    per_benchmark = both.groupby(["seed", "benchmark"])[["value_a", "value_b"]].mean()
    return per_benchmark.groupby("seed").mean()


def solved_only(both: pd.DataFrame) -> pd.DataFrame:
    """Per seed: problems solved by one policy (value > 0) and by the other in none of its
    samples, each way."""
    solved_a, solved_b = both["value_a"] > 0, both["value_b"] > 0
    counts = both.assign(value_a=solved_a & ~solved_b, value_b=solved_b & ~solved_a)
    return counts.groupby("seed")[["value_a", "value_b"]].sum().astype(float)


def run_values(logs: pd.DataFrame, claim: Claim) -> pd.DataFrame:
    """Per seed: the per-run statistic of ``ours`` (value_a) and ``theirs`` (value_b), from
    their training logs, at the seeds both were trained at."""
    per_run = STATS[claim.statistic].per_run
    columns = []
    for policy in (claim.ours, claim.theirs):
        mine = logs[logs["policy"] == policy]
        if mine.empty:
            raise ValueError(f"no training log of policy {policy!r}")
        columns.append(pd.Series({seed: per_run(log) for seed, log in mine.groupby("seed")}))
    values = pd.concat(columns, axis=1, keys=["value_a", "value_b"], join="inner")
    if values.empty:
        raise ValueError(f"{claim.ours!r} and {claim.theirs!r} share no training seed")
    return values


def cached_logs(claim: Claim, profile: Profile, seeds: tuple[int, ...]) -> pd.DataFrame:
    """The training logs of the claim's two policies at ``seeds`` from their cached runs (read,
    never trained; e.g. for a notebook that passes only its problems table); ``NotRun`` where a
    run is not cached."""
    variants = {v.label: v for v in plan(claim.experiment, profile).variants}
    logs = []
    for policy in (claim.ours, claim.theirs):
        for seed in seeds:
            v = variants.get(policy)
            path = v.run_path(profile, seed) if v is not None else None
            if path is None or not path.exists():
                raise NotRun(f"no cached training run of {policy!r} at seed {seed}")
            logs.append(pd.DataFrame(policy_meta(path)["log"]).assign(policy=policy, seed=seed))
    return pd.concat(logs, ignore_index=True)


def seed_values(
    claim: Claim, problems: pd.DataFrame | None, logs: pd.DataFrame | None, profile: Profile
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The claim's statistic per seed in its unit (index seed; columns value_a for ``ours``,
    value_b for ``theirs``), and the paired per-problem table behind it (None for a per-run
    statistic), for the one-seed bootstrap. ``problems`` holds the claim's benchmarks only."""
    stat = STATS[claim.statistic]
    if stat.per_run is not None:
        if logs is None:
            raise ValueError(f"the {claim.statistic} statistic needs the runs' training logs")
        return run_values(logs, claim) * stat.scale, None
    if problems is None:
        raise ValueError(f"the {claim.statistic} statistic needs the problems table")
    a, b = (per_problem(problems, p, claim.statistic, profile) for p in (claim.ours, claim.theirs))
    both = paired(a, b)
    values = solved_only(both) if claim.statistic == "solved_only" else seed_means(both)
    return values * stat.scale, both
