"""The papers' claims that RESULTS.md tests, with the numbers the papers report.

A ``Claim`` names the experiment (``psnlib.replication.experiments.PLANS``) whose runs test it, the
policy the paper finds ahead (``ours``), the one it is compared with (``theirs``), the statistic and
the benchmarks it is averaged over; ``psnlib.replication.results`` computes our side. The ``paper``
strings quote the papers (arXiv 2602.02555 for PSN, 2608.27420 for weak-model guidance); ``effect``
is the difference the paper reports, in its points, where it gives numbers; an "about equal" claim
states its equivalence margin (``psnlib.replication.verdicts`` says how both enter the verdict).

``ours`` and ``theirs`` are the labels of the experiment's policies; where those depend on the
profile they are templates with format fields (``{model1}``: the profile's first other base
policy; ``{sigma}``, ``{sigma_low}``, ``{sigma_high}``: the PSN arm's sigma and the ends of the
sigma sweep), which ``psnlib.replication.claim_stats.resolve`` fills in. ``STATISTICS`` are computed
by ``psnlib.replication.claim_stats`` (its docstring has each formula).
"""

from __future__ import annotations

from dataclasses import dataclass

STATISTICS = (
    "pass@1",
    "pass@max",
    "pass@max-pass@1",  # the gain at the largest k minus the gain at k = 1
    "solved_only",
    "step_validity",
    "diversity",
    "entropy",
    "throughput",
)


@dataclass(frozen=True)
class Claim:
    """One claim of the papers, and how we test it."""

    name: str  # the claim, in a few words
    paper: str  # what the paper reports (its own numbers, quoted)
    experiment: str  # the key of psnlib.replication.experiments.PLANS whose runs test it
    ours: str  # the policy label the paper finds ahead (or equal, direction 0); may be a template
    theirs: str  # the policy label it is compared with
    statistic: str = "pass@max"  # one of STATISTICS
    kind: str = "id"  # benchmarks averaged over: "id", "ood" or "all" of the plan's
    direction: int = 1  # 1: ours higher; 0: about equal
    notebook: str = ""  # the notebook that shows it
    effect: float | None = None  # the paper's ours - theirs, in points, where it gives numbers
    # "about equal" (direction 0): equal within this share of theirs' value (0.1: +/- 10%)
    margin: float | None = None

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {self.statistic!r}; allowed: {STATISTICS}")
        if self.kind not in ("id", "ood", "all"):
            raise ValueError(f"kind must be 'id', 'ood' or 'all', got {self.kind!r}")
        if self.direction not in (0, 1):
            raise ValueError(f"direction must be 1 (ours ahead) or 0 (equal), got {self.direction}")
        if self.direction == 0 and not (self.margin or 0) > 0:
            raise ValueError(f"an 'about equal' claim needs a margin > 0, got {self.margin}")


PSN_BENCHMARKS = "avg. of AIME24/25, AMC23, OlympiadBench, Minerva"
PSN_AVG = f"{PSN_BENCHMARKS}, Qwen2.5-Math-7B"
WEAK_AVG = "avg. of six math benchmarks, Qwen2.5-7B"
CLAIMS = (
    Claim(
        "RL narrows pass@k at large k",
        f"base 72.15 vs GRPO 67.76 pass@128 ({WEAK_AVG})",
        "rl_narrows_coverage",
        "base",
        "GRPO",
        notebook="02_rl_narrows_coverage",
        effect=72.15 - 67.76,
    ),
    Claim(
        "RL raises pass@1",
        f"base 27.83 vs GRPO 38.29 pass@1 ({WEAK_AVG})",
        "rl_narrows_coverage",
        "GRPO",
        "base",
        "pass@1",
        notebook="02_rl_narrows_coverage",
        effect=38.29 - 27.83,
    ),
    Claim(
        "PSN raises pass@256",
        f"PSN fixed 76.94 vs GRPO 74.7 pass@256 ({PSN_AVG})",
        "main_results",
        "PSN fixed",
        "GRPO",
        notebook="03_main_results",
        effect=76.94 - 74.7,
    ),
    Claim(
        "... at about equal pass@1",
        "pass@1 'about the same' (no number given); ours: within +/- 10% of GRPO's",
        "main_results",
        "PSN fixed",
        "GRPO",
        "pass@1",
        direction=0,
        notebook="03_main_results",
        margin=0.1,
    ),
    Claim(
        "Adaptive PSN raises pass@256",
        f"PSN adaptive II 79.5 vs GRPO 74.7 pass@256 ({PSN_AVG})",
        "main_results",
        "PSN adaptive II",
        "GRPO",
        notebook="03_main_results",
        effect=79.5 - 74.7,
    ),
    Claim(
        "PSN raises pass@256 on a second base model",
        f"Qwen3-4B-Base: GRPO 70.70 vs PSN fixed 74.56 pass@256 ({PSN_BENCHMARKS}); ours: the "
        "profile's first other base policy",
        "across_models",
        "PSN fixed ({model1})",
        "GRPO ({model1})",
        notebook="03_main_results",
        effect=74.56 - 70.70,
    ),
    Claim(
        "PSN raises pass@256 on a third base model",
        f"Llama-3.1-8B: GRPO 39.56 vs PSN fixed 49.92 pass@256 ({PSN_BENCHMARKS}); ours: the "
        "profile's second other base policy",
        "across_models",
        "PSN fixed ({model2})",
        "GRPO ({model2})",
        notebook="03_main_results",
        effect=49.92 - 39.56,
    ),
    Claim(
        "Variant II costs at most ~8% throughput",
        "Variant II's two clean samples per prompt cost ~8% throughput vs fixed sigma; ours: "
        "training steps per minute within +/- 8% of PSN fixed's",
        "main_results",
        "PSN adaptive II",
        "PSN fixed",
        "throughput",
        direction=0,
        notebook="03_main_results",
        margin=0.08,
    ),
    Claim(
        "Adaptive beats fixed sigma",
        f"79.5 vs 76.94 pass@256 ({PSN_AVG})",
        "main_results",
        "PSN adaptive II",
        "PSN fixed",
        notebook="03_main_results",
        effect=79.5 - 76.94,
    ),
    Claim(
        "TIS is needed",
        f"PSN with TIS 76.94 vs without 74.33 pass@256 ({PSN_AVG})",
        "tis_ablation",
        "PSN fixed",
        "PSN, no TIS",
        "pass@max",
        "all",
        notebook="04_tis_ablation",
        effect=76.94 - 74.33,
    ),
    Claim(
        "Without TIS, PSN falls below GRPO",
        f"GRPO 74.7 vs PSN without TIS 74.33 pass@256 ({PSN_AVG})",
        "tis_ablation",
        "GRPO",
        "PSN, no TIS",
        "pass@max",
        "all",
        notebook="04_tis_ablation",
        effect=74.7 - 74.33,
    ),
    Claim(
        "Variant I (KL target) raises pass@256",
        "the released code's scheduler (KL target 0.003-0.005); no number in our sources",
        "adaptive_scheduler",
        "PSN adaptive I (KL)",
        "GRPO",
        "pass@max",
        "all",
        notebook="07_adaptive_scheduler",
    ),
    Claim(
        "The chosen sigma beats a smaller one",
        "sigma sweep: a moderate sigma (0.004 in the released run) is the paper's choice "
        "(numbers of the sweep not in our sources); ours: the profile's sigma vs the sweep's "
        "smallest",
        "sigma_sweep",
        "sigma={sigma}",
        "sigma={sigma_low}",
        "pass@max",
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "The chosen sigma beats a larger one",
        "sigma sweep: a moderate sigma (0.004 in the released run) is the paper's choice "
        "(numbers of the sweep not in our sources); ours: the profile's sigma vs the sweep's "
        "largest",
        "sigma_sweep",
        "sigma={sigma}",
        "sigma={sigma_high}",
        "pass@max",
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "Per-rollout noise beats per-step noise",
        "noise held fixed per trajectory in the paper's text; one noise sample per training "
        "step in the released code (no comparison reported)",
        "sigma_sweep",
        "scope=rollout",
        "scope=step",
        "pass@max",
        "all",
        notebook="06_sigma_sweep",
    ),
    Claim(
        "MLP noise beats attention noise",
        "MLP the best site in the ablation (numbers not in our sources)",
        "noise_site",
        "PSN fixed",
        "PSN attention",
        "pass@max",
        "all",
        notebook="05_noise_site",
    ),
    Claim(
        "MLP noise beats noise on all weights",
        "MLP the best site in the ablation (numbers not in our sources)",
        "noise_site",
        "PSN fixed",
        "PSN all layers",
        "pass@max",
        "all",
        notebook="05_noise_site",
    ),
    Claim(
        "PSN adds to Pass@k training",
        f"Pass@k training 76.37 -> + PSN 79.12 pass@256 ({PSN_AVG})",
        "passk_training",
        "PSN + Pass@k training",
        "GRPO + Pass@k training",
        "pass@max",
        "all",
        notebook="08_passk_training",
        effect=79.12 - 76.37,
    ),
    Claim(
        "Weak prefixes raise pass@k at large k",
        f"GRPO + prefix 69.06 vs GRPO 67.76 pass@128 ({WEAK_AVG}, Llama-3.2-1B prefixes)",
        "weak_prefix",
        "GRPO + weak prefix",
        "GRPO",
        notebook="09_weak_prefix",
        effect=69.06 - 67.76,
    ),
    Claim(
        "Weak prefixes keep pass@1 about equal",
        f"GRPO + prefix 38.15 vs GRPO 38.29 pass@1 ({WEAK_AVG}, Llama-3.2-1B prefixes); ours: "
        "within +/- 10% of GRPO's",
        "weak_prefix",
        "GRPO + weak prefix",
        "GRPO",
        "pass@1",
        direction=0,
        notebook="09_weak_prefix",
        margin=0.1,
    ),
    Claim(
        "The weak-prefix gain grows with k",
        "GRPO + prefix vs GRPO: -0.14 at pass@1, +1.30 at pass@128 "
        f"({WEAK_AVG}, Llama-3.2-1B prefixes); 'gains growing as k increases'; ours: the gain "
        "at the largest k minus the gain at k = 1",
        "weak_prefix",
        "GRPO + weak prefix",
        "GRPO",
        "pass@max-pass@1",
        notebook="09_weak_prefix",
        effect=(69.06 - 67.76) - (38.15 - 38.29),
    ),
    Claim(
        "Weak prefixes mitigate entropy collapse",
        "weak prefixes mitigate entropy collapse (no number in our sources); ours: mean token "
        "entropy of the trained policy's evaluation samples",
        "weak_prefix",
        "GRPO + weak prefix",
        "GRPO",
        "entropy",
        notebook="09_weak_prefix",
    ),
    Claim(
        "Entropy truncation beats random",
        "random truncation is worse (ablation)",
        "weak_prefix_ablation",
        "GRPO + weak prefix",
        "weak prefix, truncation=random",
        "pass@max",
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "p = 0.2 beats p = 0.5",
        "p = 0.2 beats 0.5 and 1.0 (ablation)",
        "weak_prefix_ablation",
        "GRPO + weak prefix",
        "weak prefix, p=0.5",
        "pass@max",
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "p = 0.2 beats p = 1.0",
        "p = 0.2 beats 0.5 and 1.0 (ablation)",
        "weak_prefix_ablation",
        "GRPO + weak prefix",
        "weak prefix, p=1.0",
        "pass@max",
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "Same-family prefixes help less",
        "same-family prefixes give no gain (ablation)",
        "weak_prefix_ablation",
        "GRPO + weak prefix",
        "weak prefix, source=same family",
        "pass@max",
        "all",
        notebook="09_weak_prefix",
    ),
    Claim(
        "PSN transfers out of distribution",
        "PSN better on GPQA-Diamond and LiveCodeBench (trained on math only)",
        "ood",
        "PSN adaptive II",
        "GRPO",
        "pass@max",
        "ood",
        notebook="13_ood",
    ),
    Claim(
        "PSN fixed transfers out of distribution",
        "PSN better on GPQA-Diamond and LiveCodeBench (trained on math only)",
        "ood",
        "PSN fixed",
        "GRPO",
        "pass@max",
        "ood",
        notebook="13_ood",
    ),
    Claim(
        "More problems solved only by PSN",
        "problems of AIME24 solved by PSN, never by GRPO in 300 samples",
        "coverage",
        "PSN adaptive II",
        "GRPO",
        "solved_only",
        notebook="11_coverage_diversity",
    ),
    Claim(
        "PSN responses are more diverse",
        "PSN-GRPO restores some semantic diversity of responses vs GRPO (no number in our "
        "sources); ours: 1 - mean lexical similarity of random pairs of a problem's samples",
        "coverage",
        "PSN adaptive II",
        "GRPO",
        "diversity",
        notebook="11_coverage_diversity",
    ),
    Claim(
        "PSN responses are more self-consistent",
        "higher ReCEval-style step consistency",
        "coverage",
        "PSN adaptive II",
        "GRPO",
        "step_validity",
        notebook="12_self_consistency",
    ),
)
