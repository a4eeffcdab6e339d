"""The papers' claims that RESULTS.md tests, with the numbers the papers report.

A ``Claim`` holds the experiment (a plan function of ``psnlib.replication.experiments``) whose runs
test it, the policy the paper finds ahead (``ours``), the one it is compared with (``theirs``), the
statistic (``psnlib.replication.claim_stats``; its docstring has each formula) and the benchmarks
it is averaged over; ``psnlib.replication.results`` computes our side. The ``paper`` strings quote
the papers (arXiv 2602.02555 for PSN, 2608.27420 for weak-model guidance); ``effect`` is the
difference the paper reports, in its points, where it gives numbers; an "about equal" claim states
its equivalence margin (``psnlib.replication.verdicts`` says how both enter the verdict).

``ours`` and ``theirs`` are the experiment's ``Variant`` objects, or, where the policy depends on
the profile, an ``AtProfile`` that picks it at a profile (``on_other_model``: the profile's n-th
other base policy; ``swept_sigma_at``: a sigma of the profile's sigma sweep). Where the profile
has no such policy, ``Claim.sides`` raises ``NotRun`` and the claim's row says "not run at this
profile" (a status, not a verdict).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from psnlib.replication.claim_stats import (
    DIVERSITY,
    ENTROPY,
    GAIN_GROWTH,
    PASS_AT_1,
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
    WEAK_PREFIX,
    Plan,
    across_models,
    adaptive_scheduler,
    coverage,
    main_results,
    noise_scope,
    noise_site,
    on_model,
    ood,
    passk_training,
    rl_narrows_coverage,
    sigma_sweep,
    swept_sigma,
    tis_ablation,
    weak_prefix,
    weak_prefix_ablation,
)
from psnlib.replication.profiles import Profile
from psnlib.replication.variants import Variant, model_name

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
    direction: int = 1  # 1: ours higher; 0: about equal
    notebook: str = ""  # the notebook that shows it
    effect: float | None = None  # the paper's ours - theirs, in points, where it gives numbers
    # the paper's value of theirs (a pass@k in percent), for the effect scaled to the headroom
    paper_theirs: float | None = None
    # "about equal" (direction 0): equal within this share of theirs' value (0.1: +/- 10%)
    margin: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("id", "ood", "all"):
            raise ValueError(f"kind must be 'id', 'ood' or 'all', got {self.kind!r}")
        if self.direction not in (0, 1):
            raise ValueError(f"direction must be 1 (ours ahead) or 0 (equal), got {self.direction}")
        if self.direction == 0 and not (self.margin or 0) > 0:
            raise ValueError(f"an 'about equal' claim needs a margin > 0, got {self.margin}")

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
        "... at about equal pass@1",
        "pass@1 'about the same' (no number given); ours: within +/- 10% of GRPO's",
        main_results,
        PSN,
        GRPO,
        PASS_AT_1,
        direction=0,
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
        "training steps per minute within +/- 8% of PSN fixed's",
        main_results,
        PSN_DIV,
        PSN,
        THROUGHPUT,
        direction=0,
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
        "Per-rollout noise beats per-step noise",
        "noise held fixed per trajectory in the paper's text; one noise sample per training "
        "step in the released code (no comparison reported)",
        sigma_sweep,
        noise_scope("rollout"),
        noise_scope("step"),
        PASS_AT_MAX,
        "all",
        notebook="06_sigma_sweep",
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
        f"GRPO + prefix 38.15 vs GRPO 38.29 pass@1 ({WEAK_AVG}, Llama-3.2-1B prefixes); ours: "
        "within +/- 10% of GRPO's",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        PASS_AT_1,
        direction=0,
        notebook="09_weak_prefix",
        margin=0.1,
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
