"""The papers' claims that RESULTS.md tests, with the numbers the papers report.

A ``Claim`` holds the experiment (a plan function of ``psnlib.replication.experiments``, or
``psnlib.replication.premise.premise``) whose runs test it, the policy the paper finds ahead
(``ours``), the one it is compared with (``theirs``), the statistic
(``psnlib.replication.claim_stats``; its docstring has each formula) and the benchmarks it is
averaged over; ``psnlib.replication.results`` computes our side. The ``paper`` strings quote the
papers (arXiv 2602.02555 for PSN, 2608.27420 for weak-model guidance); ``effect`` is the difference
the paper reports, in its points, where it gives numbers; an "about equal" claim states its
equivalence margin, a "costs at most" claim its non-inferiority margin
(``psnlib.replication.verdicts`` says how each enters the verdict).

``ours`` and ``theirs`` are the experiment's ``Variant`` objects, or, where the policy depends on
the profile, an ``AtProfile`` that picks it at a profile (``on_other_model``: the profile's n-th
other base policy; ``swept_sigma_at``: a sigma of the profile's sigma sweep;
``RAISED_TEMPERATURE`` and ``entropy_bonus_at``: the exploration baselines' settings). Where the
profile has no such policy, ``Claim.sides`` raises ``NotRun`` and the claim's row says "not run at
this profile" (a status, not a verdict).

``CODE_DIFFERENCES`` lists how the authors' released code differs from the paper's text, each
with the claims whose rows test it (or why none does): RESULTS.md's table "the paper vs the
released code" (``psnlib.replication.results_text.code_differences``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psnlib.replication.claim_stats import (
    DIVERSITY,
    ENTROPY,
    GAIN_GROWTH,
    PASS_AT_1,
    PASS_AT_EQUAL_PASS_1,
    PASS_AT_MAX,
    SOLVED_ONLY,
    STEP_VALIDITY,
    THROUGHPUT,
    Statistic,
)
from psnlib.replication.experiments import (
    BASE_POLICY,
    GRPO,
    GRPO_PASSK,
    PREFIX_P05,
    PREFIX_P1,
    PREFIX_RANDOM_CUT,
    PREFIX_SAME_FAMILY,
    PSN,
    PSN_ALL_LAYERS,
    PSN_ATTENTION,
    PSN_DIV,
    PSN_KL,
    PSN_NO_TIS,
    PSN_PASSK,
    PSN_RELEASED,
    PSN_STEP,
    WEAK_PREFIX,
    Plan,
    across_models,
    adaptive_scheduler,
    coverage,
    entropy_bonus,
    exploration_baselines,
    main_results,
    noise_site,
    on_model,
    ood,
    passk_training,
    released_code,
    released_code_ablation,
    rl_narrows_coverage,
    rollout_temperature,
    sigma_sweep,
    swept_sigma,
    tis_ablation,
    weak_prefix,
    weak_prefix_ablation,
)
from psnlib.replication.premise import MATCHED_TEMPERATURE, SAMPLING_NOISE, premise
from psnlib.replication.profiles import Profile
from psnlib.replication.runs import rl_settings
from psnlib.replication.variants import Variant, model_name
from psnlib.replication.verdicts import DIRECTIONS, EQUIVALENT, NONINFERIOR, SUPERIOR
from psnlib.trainer import PSNGRPOConfig

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


PSN_BENCHMARKS = "avg. of AIME24/25, AMC23, OlympiadBench, Minerva"
PSN_AVG = f"{PSN_BENCHMARKS}, Qwen2.5-Math-7B"
WEAK_AVG = "avg. of six math benchmarks, Qwen2.5-7B"
FRONTIER = (
    "ours: the difference from GRPO's pass@1 -> pass@256 frontier across seeds "
    "(psnlib.replication.claim_stats: pass@256 moved along GRPO's least-squares line to its pass@1)"
)
RELEASED = (
    "reported for Variant II, which the released code does not implement: its runs draw the "
    "noise once per step on every parameter and steer it by Variant I (KL target 0.003)"
)
BASELINE = (
    "not compared in the paper, whose premise is that parameter noise explores where "
    "token-level randomness does not (the released run itself adds an entropy bonus of 0.001); "
    "each baseline's setting is chosen by the rule stated in psnlib.replication.profiles"
)
ABLATION = (
    "from the paper's text to its released code, one change at a time; the direction: the "
    "code's change helps (the paper's numbers come from the code); no number reported"
)
WEAK_PASS1 = (38.15, 38.29)  # GRPO + prefix, GRPO: pass@1 (WEAK_AVG)
BASELINES_NOTEBOOK = "16_exploration_baselines"
CLAIMS = (
    Claim(
        "RL narrows pass@k at large k",
        f"base 72.15 vs GRPO 67.76 pass@128 ({WEAK_AVG})",
        rl_narrows_coverage,
        BASE_POLICY,
        GRPO,
        notebook="02_rl_narrows_coverage",
        effect=72.15 - 67.76,
        paper_theirs=67.76,
    ),
    Claim(
        "RL raises pass@1",
        f"base 27.83 vs GRPO 38.29 pass@1 ({WEAK_AVG})",
        rl_narrows_coverage,
        GRPO,
        BASE_POLICY,
        PASS_AT_1,
        notebook="02_rl_narrows_coverage",
        effect=38.29 - 27.83,
    ),
    Claim(
        "PSN raises pass@256",
        f"PSN fixed 76.94 vs GRPO 74.7 pass@256 ({PSN_AVG})",
        main_results,
        PSN,
        GRPO,
        notebook="03_main_results",
        effect=76.94 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "PSN raises pass@256 at equal pass@1",
        f"PSN fixed 76.94 vs GRPO 74.7 pass@256 at pass@1 'about the same' ({PSN_AVG}); {FRONTIER}",
        main_results,
        PSN,
        GRPO,
        PASS_AT_EQUAL_PASS_1,
        notebook="03_main_results",
        effect=76.94 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "... at about equal pass@1",
        "pass@1 'about the same' (no number given); ours: within +/- 10% of GRPO's",
        main_results,
        PSN,
        GRPO,
        PASS_AT_1,
        direction=EQUIVALENT,
        notebook="03_main_results",
        margin=0.1,
    ),
    Claim(
        "Adaptive PSN raises pass@256",
        f"PSN adaptive II 79.5 vs GRPO 74.7 pass@256 ({PSN_AVG})",
        main_results,
        PSN_DIV,
        GRPO,
        notebook="03_main_results",
        effect=79.5 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "Adaptive PSN raises pass@256 at equal pass@1",
        f"PSN adaptive II 79.5 vs GRPO 74.7 pass@256 at pass@1 'about the same' ({PSN_AVG}); "
        f"{FRONTIER}",
        main_results,
        PSN_DIV,
        GRPO,
        PASS_AT_EQUAL_PASS_1,
        notebook="03_main_results",
        effect=79.5 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "The released code's PSN raises pass@256",
        f"PSN adaptive 79.5 vs GRPO 74.7 pass@256 ({PSN_AVG}), {RELEASED}",
        released_code,
        PSN_RELEASED,
        GRPO,
        notebook="03_main_results",
        effect=79.5 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "The released code's PSN raises pass@256 at equal pass@1",
        f"PSN adaptive 79.5 vs GRPO 74.7 pass@256 at pass@1 'about the same' ({PSN_AVG}), "
        f"{RELEASED}; {FRONTIER}",
        released_code,
        PSN_RELEASED,
        GRPO,
        PASS_AT_EQUAL_PASS_1,
        notebook="03_main_results",
        effect=79.5 - 74.7,
        paper_theirs=74.7,
    ),
    Claim(
        "PSN raises pass@256 on a second base model",
        f"Qwen3-4B-Base: GRPO 70.70 vs PSN fixed 74.56 pass@256 ({PSN_BENCHMARKS}); ours: the "
        "profile's first other base policy",
        across_models,
        on_other_model(PSN, 1),
        on_other_model(GRPO, 1),
        notebook="03_main_results",
        effect=74.56 - 70.70,
        paper_theirs=70.70,
    ),
    Claim(
        "PSN raises pass@256 on a third base model",
        f"Llama-3.1-8B: GRPO 39.56 vs PSN fixed 49.92 pass@256 ({PSN_BENCHMARKS}); ours: the "
        "profile's second other base policy",
        across_models,
        on_other_model(PSN, 2),
        on_other_model(GRPO, 2),
        notebook="03_main_results",
        effect=49.92 - 39.56,
        paper_theirs=39.56,
    ),
    Claim(
        "Variant II costs at most ~8% throughput",
        "Variant II's two clean samples per prompt cost ~8% throughput vs fixed sigma; ours: "
        "training steps per CPU minute at most 8% below PSN fixed's (one-sided: "
        "non-inferiority)",
        main_results,
        PSN_DIV,
        PSN,
        THROUGHPUT,
        direction=NONINFERIOR,
        notebook="03_main_results",
        margin=0.08,
    ),
    Claim(
        "Adaptive beats fixed sigma",
        f"79.5 vs 76.94 pass@256 ({PSN_AVG})",
        main_results,
        PSN_DIV,
        PSN,
        notebook="03_main_results",
        effect=79.5 - 76.94,
        paper_theirs=76.94,
    ),
    Claim(
        "TIS is needed",
        f"PSN with TIS 76.94 vs without 74.33 pass@256 ({PSN_AVG})",
        tis_ablation,
        PSN,
        PSN_NO_TIS,
        PASS_AT_MAX,
        "all",
        notebook="04_tis_ablation",
        effect=76.94 - 74.33,
        paper_theirs=74.33,
    ),
    Claim(
        "Without TIS, PSN falls below GRPO",
        f"GRPO 74.7 vs PSN without TIS 74.33 pass@256 ({PSN_AVG})",
        tis_ablation,
        GRPO,
        PSN_NO_TIS,
        PASS_AT_MAX,
        "all",
        notebook="04_tis_ablation",
        effect=74.7 - 74.33,
        paper_theirs=74.33,
    ),
    Claim(
        "Variant I (KL target) raises pass@256",
        "the released code's scheduler (KL target 0.003-0.005); no number in our sources",
        adaptive_scheduler,
        PSN_KL,
        GRPO,
        PASS_AT_MAX,
        "all",
        notebook="07_adaptive_scheduler",
    ),
    Claim(
        "Variant II beats Variant I",
        "Variant II (similarity and self-certainty) is the paper's proposal; Variant I (KL "
        "target) is what the released code runs; no comparison reported",
        adaptive_scheduler,
        PSN_DIV,
        PSN_KL,
        PASS_AT_MAX,
        "all",
        notebook="07_adaptive_scheduler",
    ),
    Claim(
        "The chosen sigma beats a smaller one",
        "sigma sweep: a moderate sigma (0.004 in the released run) is the paper's choice "
        "(numbers of the sweep not in our sources); ours: the profile's sigma vs the sweep's "
        "smallest",
        sigma_sweep,
        CHOSEN_SIGMA,
        SMALLEST_SIGMA,
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "The chosen sigma beats a larger one",
        "sigma sweep: a moderate sigma (0.004 in the released run) is the paper's choice "
        "(numbers of the sweep not in our sources); ours: the profile's sigma vs the sweep's "
        "largest",
        sigma_sweep,
        CHOSEN_SIGMA,
        LARGEST_SIGMA,
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "Per-step MLP noise raises pass@256",
        f"the released code draws one noise sample per training step, the text one per "
        f"trajectory; ours: per-step noise on the MLP (the scope alone) vs GRPO; {ABLATION}",
        released_code_ablation,
        PSN_STEP,
        GRPO,
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "Per-step noise beats per-rollout noise",
        f"one noise sample per training step in the released code, per trajectory in the "
        f"paper's text; ours: per-step vs per-rollout MLP noise at the same sigma; {ABLATION}",
        released_code_ablation,
        PSN_STEP,
        PSN,
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "Every parameter and Variant I add to per-step noise",
        f"the released code perturbs every parameter (not the MLP) and steers sigma by Variant "
        f"I; ours: the released code's PSN vs per-step MLP noise at fixed sigma (both changes "
        f"at once); {ABLATION}",
        released_code_ablation,
        PSN_RELEASED,
        PSN_STEP,
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "PSN fixed beats a raised rollout temperature",
        f"{BASELINE}; ours: GRPO at a raised rollout temperature",
        exploration_baselines,
        PSN,
        RAISED_TEMPERATURE,
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "PSN fixed beats the first entropy bonus",
        f"{BASELINE}; ours: GRPO with the profile's first entropy bonus",
        exploration_baselines,
        PSN,
        entropy_bonus_at(1),
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "PSN fixed beats the second entropy bonus",
        f"{BASELINE}; ours: GRPO with the profile's second entropy bonus",
        exploration_baselines,
        PSN,
        entropy_bonus_at(2),
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "The released code's PSN beats a raised rollout temperature",
        f"{BASELINE}; ours: GRPO at a raised rollout temperature",
        exploration_baselines,
        PSN_RELEASED,
        RAISED_TEMPERATURE,
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "The released code's PSN beats the first entropy bonus",
        f"{BASELINE}; ours: GRPO with the profile's first entropy bonus",
        exploration_baselines,
        PSN_RELEASED,
        entropy_bonus_at(1),
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "The released code's PSN beats the second entropy bonus",
        f"{BASELINE}; ours: GRPO with the profile's second entropy bonus",
        exploration_baselines,
        PSN_RELEASED,
        entropy_bonus_at(2),
        notebook=BASELINES_NOTEBOOK,
    ),
    Claim(
        "Noise beats temperature at equal pass@1",
        "the premise of PSN: noise in parameter space reaches what token-level sampling "
        "randomness does not (no comparison at equal pass@1 reported); ours: sampling-time noise "
        "on each GRPO checkpoint vs clean sampling at the temperature matched to its pass@1, "
        "main benchmark, paired over the checkpoints",
        premise,
        SAMPLING_NOISE,
        MATCHED_TEMPERATURE,
        PASS_AT_MAX,
        "all",
        notebook="01b_regime",
    ),
    Claim(
        "MLP noise beats attention noise",
        "MLP the best site in the ablation (numbers not in our sources)",
        noise_site,
        PSN,
        PSN_ATTENTION,
        PASS_AT_MAX,
        "all",
        notebook="05_noise_site",
    ),
    Claim(
        "MLP noise beats noise on all weights",
        "MLP the best site in the ablation (numbers not in our sources)",
        noise_site,
        PSN,
        PSN_ALL_LAYERS,
        PASS_AT_MAX,
        "all",
        notebook="05_noise_site",
    ),
    Claim(
        "PSN adds to Pass@k training",
        f"Pass@k training 76.37 -> + PSN 79.12 pass@256 ({PSN_AVG})",
        passk_training,
        PSN_PASSK,
        GRPO_PASSK,
        PASS_AT_MAX,
        "all",
        notebook="08_passk_training",
        effect=79.12 - 76.37,
        paper_theirs=76.37,
    ),
    Claim(
        "Weak prefixes raise pass@k at large k",
        f"GRPO + prefix 69.06 vs GRPO 67.76 pass@128 ({WEAK_AVG}, Llama-3.2-1B prefixes)",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        notebook="09_weak_prefix",
        effect=69.06 - 67.76,
        paper_theirs=67.76,
    ),
    Claim(
        "Weak prefixes keep pass@1 about equal",
        f"GRPO + prefix {WEAK_PASS1[0]} vs GRPO {WEAK_PASS1[1]} pass@1 ({WEAK_AVG}, Llama-3.2-1B "
        f"prefixes): {WEAK_PASS1[0] - WEAK_PASS1[1]:+.2f} points, "
        f"{(WEAK_PASS1[0] - WEAK_PASS1[1]) / WEAK_PASS1[1]:+.2%} relative, called about equal "
        "with no interval or margin; ours: equal within the paper's own change, "
        f"+/- {abs(WEAK_PASS1[0] - WEAK_PASS1[1]) / WEAK_PASS1[1]:.2%} of GRPO's pass@1 (the one "
        "size of 'equal' the paper gives; a wider margin would be ours, not the paper's)",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        PASS_AT_1,
        direction=EQUIVALENT,
        notebook="09_weak_prefix",
        margin=abs(WEAK_PASS1[0] - WEAK_PASS1[1]) / WEAK_PASS1[1],
    ),
    Claim(
        "The weak-prefix gain grows with k",
        "GRPO + prefix vs GRPO: -0.14 at pass@1, +1.30 at pass@128 "
        f"({WEAK_AVG}, Llama-3.2-1B prefixes); 'gains growing as k increases'; ours: the gain "
        "at the largest k minus the gain at k = 1",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        GAIN_GROWTH,
        notebook="09_weak_prefix",
        effect=(69.06 - 67.76) - (38.15 - 38.29),
    ),
    Claim(
        "Weak prefixes mitigate entropy collapse",
        "weak prefixes mitigate entropy collapse (no number in our sources); ours: mean token "
        "entropy of the trained policy's evaluation samples",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        ENTROPY,
        notebook="09_weak_prefix",
    ),
    Claim(
        "Entropy truncation beats random",
        "random truncation is worse (ablation)",
        weak_prefix_ablation,
        WEAK_PREFIX,
        PREFIX_RANDOM_CUT,
        PASS_AT_MAX,
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "p = 0.2 beats p = 0.5",
        "p = 0.2 beats 0.5 and 1.0 (ablation)",
        weak_prefix_ablation,
        WEAK_PREFIX,
        PREFIX_P05,
        PASS_AT_MAX,
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "p = 0.2 beats p = 1.0",
        "p = 0.2 beats 0.5 and 1.0 (ablation)",
        weak_prefix_ablation,
        WEAK_PREFIX,
        PREFIX_P1,
        PASS_AT_MAX,
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "Same-family prefixes help less",
        "same-family prefixes give no gain (ablation)",
        weak_prefix_ablation,
        WEAK_PREFIX,
        PREFIX_SAME_FAMILY,
        PASS_AT_MAX,
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "PSN transfers out of distribution",
        "PSN better on GPQA-Diamond and LiveCodeBench (trained on math only)",
        ood,
        PSN_DIV,
        GRPO,
        PASS_AT_MAX,
        "ood",
        notebook="13_ood",
    ),
    Claim(
        "PSN fixed transfers out of distribution",
        "PSN better on GPQA-Diamond and LiveCodeBench (trained on math only)",
        ood,
        PSN,
        GRPO,
        PASS_AT_MAX,
        "ood",
        notebook="13_ood",
    ),
    Claim(
        "More problems solved only by PSN",
        "problems of AIME24 solved by PSN, never by GRPO in 300 samples",
        coverage,
        PSN_DIV,
        GRPO,
        SOLVED_ONLY,
        notebook="11_coverage_diversity",
    ),
    Claim(
        "PSN responses are more diverse",
        "PSN-GRPO restores some semantic diversity of responses vs GRPO (no number in our "
        "sources); ours: 1 - mean lexical similarity of random pairs of a problem's samples",
        coverage,
        PSN_DIV,
        GRPO,
        DIVERSITY,
        notebook="11_coverage_diversity",
    ),
    Claim(
        "PSN responses are more self-consistent",
        "higher ReCEval-style step consistency",
        coverage,
        PSN_DIV,
        GRPO,
        STEP_VALIDITY,
        notebook="12_self_consistency",
    ),
)


def _setting(profile: Profile, arm: str, name: str) -> Any:
    """The ``PSNGRPOConfig`` setting ``name`` of the profile's runs of ``arm``: its run settings
    (``psnlib.replication.runs.rl_settings``), else the config's default."""
    settings = rl_settings(profile, arm, 0)
    if name in settings:
        return settings[name]
    (field,) = [f for f in dataclasses.fields(PSNGRPOConfig) if f.name == name]
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def _targets(profile: Profile, arm: str) -> str:
    return "+".join(_setting(profile, arm, "noise_targets"))


def _released_sigma_source(profile: Profile) -> str:
    arm = dict(dict(profile.arm_settings).get("psn_released", ()))
    return "the profile's setting for this arm" if "sigma" in arm else "the profile's psn_sigma"


PSN_ARMS = ("grpo", "psn", "psn_kl", "psn_div", "psn_released")  # the arms the differences name


def _recipe(profile: Profile, names: tuple[str, ...]) -> str:
    """``names``' settings in the runs of GRPO and every PSN arm: once if all arms share them,
    else arm by arm."""
    values = {
        arm: ", ".join(f"{n}={_setting(profile, arm, n):g}" for n in names) for arm in PSN_ARMS
    }
    if len(set(values.values())) == 1:
        return f"GRPO and every PSN arm: {values['grpo']}"
    return "; ".join(f"{arm}: {v}" for arm, v in values.items())


@dataclass(frozen=True)
class CodeDifference:
    """One way the authors' released code (``baibizhe/psn_rlvr``, commit 6a27058; DESIGN.md
    section 1.1) differs from the paper's text, and which claims' rows test it here."""

    what: str  # the difference, in a few words
    paper: str  # what the paper's text describes
    code: str  # what the released code does
    here: Callable[[Profile], str]  # what the profile's arms do, read from their run settings
    claims: tuple[str, ...] = ()  # names of the claims whose rows test it
    untested: str = ""  # why no row tests it, where none does


CODE_DIFFERENCES = (
    CodeDifference(
        "when the noise is drawn",
        "once per trajectory ('a temporary parameter brain')",
        "once per training step, while the weights are synced into vLLM: every rollout of a "
        "step shares one draw",
        lambda p: (
            f"PSN fixed: noise_scope={_setting(p, 'psn', 'noise_scope')}; per-step MLP "
            f"noise and the released code's PSN: {_setting(p, 'psn_released', 'noise_scope')}"
        ),
        ("Per-step noise beats per-rollout noise", "Per-step MLP noise raises pass@256"),
    ),
    CodeDifference(
        "which weights",
        "the MLP blocks, the ablation's best site",
        "every tensor (the MLP filter only feeds a log counter): embeddings, attention, norms "
        "and lm_head too",
        lambda p: (
            f"PSN fixed: {_targets(p, 'psn')}; the released code's PSN: "
            f"{_targets(p, 'psn_released')}"
        ),
        (
            "Every parameter and Variant I add to per-step noise",
            "MLP noise beats noise on all weights",
        ),
    ),
    CodeDifference(
        "the sigma scheduler",
        "Variant II (similarity and self-certainty of clean pairs); the adaptive numbers are "
        "reported for it",
        "Variant I only (KL proxy of noisy vs clean log-probs, sigma x or / 1.01); Variant II "
        "is a README to-do",
        lambda p: (
            f"PSN adaptive II: {_setting(p, 'psn_div', 'sigma_scheduler')}; PSN adaptive "
            f"I and the released code's PSN: {_setting(p, 'psn_released', 'sigma_scheduler')}"
        ),
        (
            "Variant II beats Variant I",
            "Adaptive PSN raises pass@256",
            "The released code's PSN raises pass@256",
        ),
    ),
    CodeDifference(
        "Variant I's KL target",
        "0.003-0.005",
        "0.003 in the launcher and README, 0.005 the config default",
        lambda p: (
            f"the released code's PSN: {_setting(p, 'psn_released', 'kl_target'):g}; PSN "
            f"adaptive I: {_setting(p, 'psn_kl', 'kl_target'):g}"
        ),
        untested="no arm changes the target alone: it moves with the released code's other "
        "changes (its row tests them together)",
    ),
    CodeDifference(
        "the starting sigma",
        "sigma0 0.001",
        "sigma0 0.001 (the README's fixed-noise example: 0.004)",
        lambda p: (
            f"the released code's PSN starts at {_setting(p, 'psn_released', 'sigma'):g} "
            f"({_released_sigma_source(p)}); a 1.01 step rule moves sigma at most "
            f"{1.01**p.rl_steps:.3g}x in the profile's {p.rl_steps} steps"
        ),
        untested="no arm varies the released code's starting sigma",
    ),
    CodeDifference(
        "entropy bonus and KL loss",
        "not stated",
        "entropy coefficient 0.001, KL loss 0.001 (low_var_kl)",
        lambda p: _recipe(p, ("entropy_coef", "beta")),
        untested="no arm changes them between GRPO and PSN, so that the released code's PSN "
        "differs from GRPO by its noise alone; an entropy bonus on GRPO alone is an exploration "
        "baseline (its rows compare PSN with it)",
    ),
    CodeDifference(
        "validation weights",
        "evaluation on the clean weights",
        "in-training validation (greedy) on the noisy weights in async mode",
        lambda p: "every evaluation on the clean weights (sigma 0)",
        untested="no number here comes from in-training validation; every evaluation is clean",
    ),
)
