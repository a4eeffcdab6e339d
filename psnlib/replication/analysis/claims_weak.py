"""The weak-model guidance paper's claims (arXiv 2608.27420), with the numbers it reports: RL's
narrowing of pass@k at large k, which both papers start from (its numbers are this paper's table),
and weak-model prefixes with their ablations. One ``psnlib.replication.analysis.claim.Claim`` each;
``psnlib.replication.analysis.claims.CLAIMS`` puts them in RESULTS.md's order.
"""

from __future__ import annotations

from psnlib.replication.analysis.claim import EQUIVALENCE_SHARE, Claim
from psnlib.replication.analysis.claim_stats import ENTROPY, GAIN_GROWTH, PASS_AT_1, PASS_AT_MAX
from psnlib.replication.analysis.verdicts import EQUIVALENT
from psnlib.replication.plan.experiments import (
    BASE_POLICY,
    GRPO,
    PREFIX_P05,
    PREFIX_P1,
    PREFIX_RANDOM_CUT,
    PREFIX_SAME_FAMILY,
    WEAK_PREFIX,
    rl_narrows_coverage,
    weak_prefix,
    weak_prefix_ablation,
)

WEAK_AVG = "avg. of six math benchmarks, Qwen2.5-7B"
WEAK_PASS1 = (38.15, 38.29)  # GRPO + prefix, GRPO: pass@1 (WEAK_AVG)
# GRPO + prefix 69.06 vs GRPO 67.76 pass@128 (WEAK_AVG): the paper's gain for its method, and the
# size each weak-prefix ablation must be able to see (Claim.interest), none reporting a number
PREFIX_GAIN, GRPO_PAPER = 69.06 - 67.76, 67.76

COVERAGE_CLAIMS = (
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
)

WEAK_PREFIX_CLAIMS = (
    Claim(
        "Weak prefixes raise pass@k at large k",
        f"GRPO + prefix 69.06 vs GRPO 67.76 pass@128 ({WEAK_AVG}, Llama-3.2-1B prefixes)",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        notebook="09_weak_prefix",
        effect=PREFIX_GAIN,
        paper_theirs=GRPO_PAPER,
    ),
    Claim(
        "Weak prefixes keep pass@1 about equal",
        f"GRPO + prefix {WEAK_PASS1[0]} vs GRPO {WEAK_PASS1[1]} pass@1 ({WEAK_AVG}, Llama-3.2-1B "
        f"prefixes): {WEAK_PASS1[0] - WEAK_PASS1[1]:+.2f} points, "
        f"{(WEAK_PASS1[0] - WEAK_PASS1[1]) / WEAK_PASS1[1]:+.2%} relative, called about equal "
        f"with no interval or margin; ours: equal within +/- {EQUIVALENCE_SHARE:.2%} of GRPO's "
        "pass@1 (the one margin rule, psnlib.replication.analysis.claim.EQUIVALENCE_SHARE)",
        weak_prefix,
        WEAK_PREFIX,
        GRPO,
        PASS_AT_1,
        direction=EQUIVALENT,
        notebook="09_weak_prefix",
        margin=EQUIVALENCE_SHARE,
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
        interest=PREFIX_GAIN,
        paper_theirs=GRPO_PAPER,
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
        interest=PREFIX_GAIN,
        paper_theirs=GRPO_PAPER,
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
        interest=PREFIX_GAIN,
        paper_theirs=GRPO_PAPER,
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
        interest=PREFIX_GAIN,
        paper_theirs=GRPO_PAPER,
    ),
)
