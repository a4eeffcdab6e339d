"""The papers' claims that RESULTS.md tests, with the numbers the papers report.

A ``Claim`` names the experiment (``psnlib.experiments.PLANS``) whose runs test it, the policy
the paper finds ahead (``ours``), the one it is compared with (``theirs``), the statistic and the
benchmarks it is averaged over; ``psnlib.results`` computes our side. The ``paper`` strings quote
the papers (arXiv 2602.02555 for PSN, 2608.27420 for weak-model guidance); ``effect`` is the
difference the paper reports, in its points, where it gives numbers; an "about equal" claim
states its equivalence margin (``psnlib.verdicts`` says how both enter the verdict).
"""

from __future__ import annotations

from dataclasses import dataclass

STATISTICS = ("pass@1", "pass@max", "solved_only", "step_validity")


@dataclass(frozen=True)
class Claim:
    """One claim of the papers, and how we test it."""

    name: str  # the claim, in a few words
    paper: str  # what the paper reports (its own numbers, quoted)
    experiment: str  # the key of psnlib.experiments.PLANS whose runs test it
    ours: str  # the policy label the paper finds ahead (or equal, direction 0)
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


PSN_AVG = "avg. of AIME24/25, AMC23, OlympiadBench, Minerva, Qwen2.5-Math-7B"
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
        "PSN responses are more self-consistent",
        "higher ReCEval-style step consistency",
        "coverage",
        "PSN adaptive II",
        "GRPO",
        "step_validity",
        notebook="12_self_consistency",
    ),
)
