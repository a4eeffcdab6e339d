"""What a claim of the papers is, and how it picks its two policies at a profile.

A ``Claim`` holds the experiment (a plan function of ``psnlib.replication.plan.experiments``, or
``psnlib.replication.plan.premise.premise``) whose runs test it, the policy the paper finds ahead
(``ours``), the one it is compared with (``theirs``), the statistic
(``psnlib.replication.analysis.claim_stats``; its docstring has each formula) and the benchmarks it
is averaged over; ``psnlib.replication.report.results`` computes our side. ``effect`` is the
difference the paper reports for the configuration compared, in its points, where it gives numbers
(a claim on a configuration the paper gives no number for has none: no size word, only the direction
words); ``interest`` is the size a claim without such a number must be able to see (honest power);
an "about equal" claim states its equivalence margin by the one rule ``EQUIVALENCE_SHARE``, a "costs
at most" claim its non-inferiority margin (``psnlib.replication.analysis.verdicts`` says how each
enters the verdict). ``exclude_seeds`` leaves out, at a profile, the seeds whose results framed a
claim (its direction was chosen after seeing them, or the claim itself was added after seeing them:
``framed`` says when and why): the claim is tested on the others, and where the profile has no other
seeds it is *exploratory* on the seeds that framed it, whatever its interval, until fresh seeds
confirm it (``post_hoc``). ``family`` is the claim family its Holm correction runs within
(``FAMILIES``; docs/protocol.md section 2.10 says which claims are confirmatory).

``ours`` and ``theirs`` are the experiment's ``Variant`` objects, or, where the policy depends on
the profile, an ``AtProfile`` that picks it at a profile (``on_other_model``: the profile's n-th
other base policy; ``swept_sigma_at``: a sigma of the profile's sigma sweep;
``RAISED_TEMPERATURE`` and ``ENTROPY_BONUS``: the exploration baselines' settings;
``RELEASED_REPLICAS``: the released fixed configuration with its launcher's rollout replicas;
``tuned_at``: an explorer at the value equal tuning chose).
Where the profile has no such policy, ``Claim.sides`` raises ``NotRun`` and the claim's row says
"not run at this profile" (a status, not a verdict). The claims themselves are
``psnlib.replication.analysis.claims``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from psnlib.replication.analysis.claim_stats import PASS_AT_MAX, NotRun, Statistic
from psnlib.replication.analysis.verdicts import DIRECTIONS, EQUIVALENT, SUPERIOR
from psnlib.replication.plan.experiments import (
    Plan,
    entropy_bonus,
    on_model,
    released_replicas,
    rollout_temperature,
    swept_sigma,
    tuned,
)
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.variants import Variant, model_name

NOT_RUN = "not run at this profile"  # the status of a claim the profile has no runs for
# the status of a claim whose reference solves no problem at any seed: nothing to compare with
NOT_COMPARABLE = "not comparable: the reference collapsed"
# the status of a claim whose statistic fails its null check (psnlib.replication.analysis.nulls)
NULL_FAILED = "no verdict: its statistic fails its null check"
STATUSES = (NOT_RUN, NOT_COMPARABLE, NULL_FAILED)  # rows that carry no verdict word

# The families within which verdicts are Holm-corrected (docs/protocol.md section 2.10): each
# paper's claims against GRPO on the primary endpoint at the main seeds are confirmatory (the
# premise, RL against the base policy, with the weak-prefix paper, whose numbers it quotes); every
# other claim is secondary, per paper.
PSN_CONFIRMATORY, WEAK_CONFIRMATORY = "PSN: confirmatory", "weak prefixes: confirmatory"
PSN_SECONDARY, WEAK_SECONDARY = "PSN: secondary", "weak prefixes: secondary"
FAMILIES = (PSN_CONFIRMATORY, WEAK_CONFIRMATORY, PSN_SECONDARY, WEAK_SECONDARY)

# One margin rule for every "about equal" claim (docs/protocol.md section 2.6): equal within this
# share of theirs' value. Half the smallest gain either paper reports for its own method, as a
# share of its reference: weak prefixes' +1.30 on GRPO's 67.76 pass@128 (1.9%; the PSN paper's
# smallest, fixed sigma's +2.24 on 74.7, is 3.0%). A difference half the size of the smallest
# one the papers count as a gain is "about equal"; it needs no number the paper does not give
# (the PSN paper gives none for its "about the same" pass@1), it is one share for both papers,
# and it keeps the weak-prefix paper's own "about equal" (-0.14 of 38.29, 0.37%) equal.
EQUIVALENCE_SHARE = (69.06 - 67.76) / 67.76 / 2


@dataclass(frozen=True)
class AtProfile:
    """A policy a claim names that depends on the profile: ``pick(profile)`` is its variant there
    (``NotRun`` where the profile has none); ``label`` describes it in words."""

    label: str
    pick: Callable[[Profile], Variant]


def on_other_model(method: Variant, index: int) -> AtProfile:
    """``method`` trained from the profile's ``index``-th other base policy (1: the first), as
    ``psnlib.replication.plan.experiments.across_models`` compares it."""

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
    (``psnlib.replication.plan.experiments.sigma_sweep``); ``words`` say which."""

    def pick(profile: Profile) -> Variant:
        if not profile.sigma_sweep:
            raise NotRun(f"the {profile.name} profile has no sigma sweep")
        return swept_sigma(sigma(profile))

    return AtProfile(f"sigma={words}", pick)


CHOSEN_SIGMA = swept_sigma_at("the profile's sigma", lambda p: p.psn_sigma)
SMALLEST_SIGMA = swept_sigma_at("the sweep's smallest", lambda p: min(p.sigma_sweep))
LARGEST_SIGMA = swept_sigma_at("the sweep's largest", lambda p: max(p.sigma_sweep))
# GRPO at the profile's raised rollout temperature (psnlib.replication.plan.experiments)
RAISED_TEMPERATURE = AtProfile(
    "GRPO, rollouts at the profile's raised temperature", rollout_temperature
)
# the released fixed configuration with one draw per rollout replica (R of them per step, at most
# one per prompt of a step: psnlib.replication.plan.experiments.released_replicas)
RELEASED_REPLICAS = AtProfile(
    "PSN released code, fixed, with the launcher's rollout replicas", released_replicas
)


def _entropy_coefs(profile: Profile) -> tuple[float, ...]:
    if not profile.entropy_coefs:
        raise NotRun(f"the {profile.name} profile has no entropy bonus (entropy_coefs is empty)")
    return profile.entropy_coefs


def _bonus(profile: Profile, coef: float) -> Variant:
    """The bonus as the profile's exploration baselines train it (at its seeds alone, if any)."""
    return entropy_bonus(coef, dict(profile.entropy_coef_seeds).get(coef))


def _strongest_entropy_bonus(profile: Profile) -> Variant:
    return _bonus(profile, max(_entropy_coefs(profile)))


def _weakest_entropy_bonus(profile: Profile) -> Variant:
    coefs = _entropy_coefs(profile)
    if len(set(coefs)) < 2:
        raise NotRun(
            f"the {profile.name} profile has one entropy bonus ({coefs[0]:g}): its rows are the "
            "strongest bonus's"
        )
    return _bonus(profile, min(coefs))


# GRPO with the profile's strongest and weakest entropy bonus (the largest and smallest of
# entropy_coefs), as psnlib.replication.plan.experiments.exploration_baselines trains them: at cpu
# 0.1, the smallest that raised the rollouts' entropy by 20% in its pilot, and 0.03, the grid's
# next weaker, added when 0.1 diverged over 80 steps (profiles.py); "not run" where a profile has
# none (the weakest also where it has one)
ENTROPY_BONUS = AtProfile("GRPO + the profile's strongest entropy bonus", _strongest_entropy_bonus)
WEAK_ENTROPY_BONUS = AtProfile("GRPO + the profile's weakest entropy bonus", _weakest_entropy_bonus)


def tuned_at(knob: str, words: str) -> AtProfile:
    """The explorer of ``knob`` at the value the equal-tuning rule chose
    (``psnlib.replication.plan.experiments.tuned``), at the tuned seeds; ``words`` say which."""

    def pick(profile: Profile) -> Variant:
        chosen = tuned(profile)
        if knob not in chosen:
            raise NotRun(f"the {profile.name} profile has no tuned {knob} (tuned_values)")
        return chosen[knob]

    return AtProfile(f"{words} at the value equal tuning chose", pick)


# PSN fixed, a raised rollout temperature and an entropy bonus each at its tuned value (docs/
# protocol.md 2.13: one rule, one grid size, tuning seeds and problems no reported row uses)
TUNED_PSN = tuned_at("sigma", "PSN fixed")
TUNED_TEMPERATURE = tuned_at("temperature", "GRPO, rollouts at a raised temperature")
TUNED_ENTROPY_BONUS = tuned_at("entropy_coef", "GRPO + an entropy bonus")


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
    # margin below theirs (psnlib.replication.analysis.verdicts)
    direction: int = SUPERIOR
    notebook: str = ""  # the notebook that shows it
    effect: float | None = None  # the paper's ours - theirs, in points, where it gives numbers
    # the paper's value of theirs (a pass@k in percent), for the effect scaled to the headroom
    paper_theirs: float | None = None
    # EQUIVALENT: equal within this share of theirs' value (EQUIVALENCE_SHARE, the one rule);
    # NONINFERIOR: at most this share below it (the paper's stated cost)
    margin: float | None = None
    # where the paper reports no effect for this comparison: the size (paper's points, scaled by
    # paper_theirs like an effect) its seeds must be able to see for a verdict word (honest power,
    # psnlib.replication.analysis.verdicts); no size word is judged against it
    interest: float | None = None
    # (profile name, seeds) whose results framed the claim (its direction was chosen after
    # seeing them): left out of its statistic at that profile, so that it is tested on seeds that
    # did not frame it (a seed of another profile is another run, and stays)
    exclude_seeds: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # when and why the claim was framed after seeing those seeds' results (required with them)
    framed: str = ""
    family: str = PSN_SECONDARY  # the Holm family (FAMILIES)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if bool(self.exclude_seeds) != bool(self.framed):
            raise ValueError(
                "a claim with seeds that framed it (exclude_seeds) says when and why (framed), "
                f"and only such a claim: got exclude_seeds={self.exclude_seeds}, "
                f"framed={self.framed!r}"
            )
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
        if self.effect is not None and self.interest is not None:
            raise ValueError("a claim with the paper's effect takes no other size of interest")
        if self.interest is not None and self.direction != SUPERIOR:
            raise ValueError("the size of interest of a claim with a margin is its margin")

    @property
    def described(self) -> str:
        """``paper``, and where the claim was framed after seeing results, when and why."""
        return f"{self.paper}; framed post hoc: {self.framed}" if self.framed else self.paper

    def excluded(self, profile: Profile) -> tuple[int, ...]:
        """The seeds left out of the claim's statistic at ``profile`` (``exclude_seeds``)."""
        return tuple(s for name, seeds in self.exclude_seeds if name == profile.name for s in seeds)

    def post_hoc(self, profile: Profile) -> bool:
        """Whether every seed of the claim's experiment at ``profile`` framed it (``excluded``):
        then it is measured on those seeds and stays *exploratory* until fresh seeds confirm
        it."""
        framed = self.excluded(profile)
        return bool(framed) and not set(self.experiment(profile).seeds) - set(framed)

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
