"""What a claim of the papers is, and how it picks its two policies at a profile.

A ``Claim`` holds the experiment (a plan function of ``psnlib.replication.experiments``, or
``psnlib.replication.premise.premise``) whose runs test it, the policy the paper finds ahead
(``ours``), the one it is compared with (``theirs``), the statistic
(``psnlib.replication.claim_stats``; its docstring has each formula) and the benchmarks it is
averaged over; ``psnlib.replication.results`` computes our side. ``effect`` is the difference the
paper reports, in its points, where it gives numbers; an "about equal" claim states its
equivalence margin, a "costs at most" claim its non-inferiority margin
(``psnlib.replication.verdicts`` says how each enters the verdict).

``ours`` and ``theirs`` are the experiment's ``Variant`` objects, or, where the policy depends on
the profile, an ``AtProfile`` that picks it at a profile (``on_other_model``: the profile's n-th
other base policy; ``swept_sigma_at``: a sigma of the profile's sigma sweep;
``RAISED_TEMPERATURE`` and ``entropy_bonus_at``: the exploration baselines' settings). Where the
profile has no such policy, ``Claim.sides`` raises ``NotRun`` and the claim's row says "not run at
this profile" (a status, not a verdict). The claims themselves are ``psnlib.replication.claims``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from psnlib.replication.claim_stats import PASS_AT_MAX, Statistic
from psnlib.replication.experiments import (
    Plan,
    entropy_bonus,
    on_model,
    rollout_temperature,
    swept_sigma,
)
from psnlib.replication.profiles import Profile
from psnlib.replication.variants import Variant, model_name
from psnlib.replication.verdicts import DIRECTIONS, EQUIVALENT, SUPERIOR

NOT_RUN = "not run at this profile"  # the status of a claim the profile has no runs for


class NotRun(Exception):
    """The profile has no run of a policy that a claim compares (the message says which)."""


@dataclass(frozen=True)
class AtProfile:
    """A policy a claim names that depends on the profile: ``pick(profile)`` is its variant there
    (``NotRun`` where the profile has none); ``label`` describes it in words."""

    label: str
    pick: Callable[[Profile], Variant]


def on_other_model(method: Variant, index: int) -> AtProfile:
    """``method`` trained from the profile's ``index``-th other base policy (1: the first), as
    ``psnlib.replication.experiments.across_models`` compares it."""

    def pick(profile: Profile) -> Variant:
        others = profile.other_policies
        if index > len(others):
            have = ", ".join(map(model_name, others)) or "none"
            raise NotRun(
                f"the {profile.name} profile has no other base model {index} (it has {have})"
            )
        return on_model(method, profile, others[index - 1])

    return AtProfile(f"{method.label} (other base model {index})", pick)


def swept_sigma_at(words: str, sigma: Callable[[Profile], float]) -> AtProfile:
    """PSN at ``sigma(profile)``, a sigma of the profile's sweep
    (``psnlib.replication.experiments.sigma_sweep``); ``words`` say which."""

    def pick(profile: Profile) -> Variant:
        if not profile.sigma_sweep:
            raise NotRun(f"the {profile.name} profile has no sigma sweep")
        return swept_sigma(sigma(profile))

    return AtProfile(f"sigma={words}", pick)


CHOSEN_SIGMA = swept_sigma_at("the profile's sigma", lambda p: p.psn_sigma)
SMALLEST_SIGMA = swept_sigma_at("the sweep's smallest", lambda p: min(p.sigma_sweep))
LARGEST_SIGMA = swept_sigma_at("the sweep's largest", lambda p: max(p.sigma_sweep))
# GRPO at the profile's raised rollout temperature (psnlib.replication.experiments)
RAISED_TEMPERATURE = AtProfile(
    "GRPO, rollouts at the profile's raised temperature", rollout_temperature
)


def entropy_bonus_at(index: int) -> AtProfile:
    """GRPO with the profile's ``index``-th entropy bonus (1: the first of ``entropy_coefs``), as
    ``psnlib.replication.experiments.exploration_baselines`` trains it."""

    def pick(profile: Profile) -> Variant:
        coefs = profile.entropy_coefs
        if index > len(coefs):
            raise NotRun(
                f"the {profile.name} profile has no entropy bonus {index} (it has {list(coefs)})"
            )
        return entropy_bonus(coefs[index - 1])

    return AtProfile(f"GRPO + the profile's entropy bonus {index}", pick)


@dataclass(frozen=True)
class Claim:
    """One claim of the papers, and how we test it."""

    name: str  # the claim, in a few words
    paper: str  # what the paper reports (its own numbers, quoted)
    experiment: Callable[[Profile], Plan]  # the plan function whose runs test it
    ours: Variant | AtProfile  # the policy the paper finds ahead (or equal, direction 0)
    theirs: Variant | AtProfile  # the policy it is compared with
    statistic: Statistic = PASS_AT_MAX
    kind: str = "id"  # benchmarks averaged over: "id", "ood" or "all" of the plan's
    # SUPERIOR (1): ours higher; EQUIVALENT (0): about equal; NONINFERIOR (-1): ours at most the
    # margin below theirs (psnlib.replication.verdicts)
    direction: int = SUPERIOR
    notebook: str = ""  # the notebook that shows it
    effect: float | None = None  # the paper's ours - theirs, in points, where it gives numbers
    # the paper's value of theirs (a pass@k in percent), for the effect scaled to the headroom
    paper_theirs: float | None = None
    # EQUIVALENT: equal within this share of theirs' value (0.1: +/- 10%); NONINFERIOR: at most
    # this share below it
    margin: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("id", "ood", "all"):
            raise ValueError(f"kind must be 'id', 'ood' or 'all', got {self.kind!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(
                f"direction must be 1 (ours ahead), 0 (equal) or -1 (at most a margin below), "
                f"got {self.direction}"
            )
        if self.direction == SUPERIOR and self.margin is not None:
            raise ValueError(f"a claim that ours is ahead takes no margin, got {self.margin}")
        if self.direction != SUPERIOR and not (self.margin or 0) > 0:
            kind = "an 'about equal'" if self.direction == EQUIVALENT else "a non-inferiority"
            raise ValueError(f"{kind} claim needs a margin > 0, got {self.margin}")

    def sides(self, profile: Profile) -> tuple[Variant, Variant]:
        """The variants of ``ours`` and ``theirs`` in the claim's experiment at ``profile``;
        ``NotRun`` where the profile has no such policy, its experiment does not train it, or
        both sides are one policy (the profile's sigma is the sweep's smallest)."""
        ours, theirs = (
            s.pick(profile) if isinstance(s, AtProfile) else s for s in (self.ours, self.theirs)
        )
        if ours == theirs:
            raise NotRun(f"at the {profile.name} profile both sides are {ours.label!r}")
        plan = self.experiment(profile)
        trained = {v.label for v in plan.variants}  # the tables' policy column
        absent = [v.label for v in (ours, theirs) if v.label not in trained]
        if absent:
            raise NotRun(f"the {plan.name} experiment at this profile has no {absent}")
        return ours, theirs
