"""The papers' claims that RESULTS.md tests, in its order: RL's narrowing of coverage (the premise
of both papers), the PSN paper's main claims (``claims_psn``), the released code's
configurations and the TIS three-way (``claims_released``), the PSN paper's other claims, the
released-code ablation chain, the exploration baselines and the tuned explorers
(``claims_released``), then the weak-model guidance paper's (``claims_weak``). One
``psnlib.replication.analysis.claim.Claim`` each (what the fields mean is there); the ``paper``
strings quote the papers (arXiv 2602.02555 for PSN, 2608.27420 for weak-model guidance).
"""

from __future__ import annotations

from dataclasses import replace

from psnlib.replication.analysis.claim import (
    PSN_CONFIRMATORY,
    PSN_SECONDARY,
    WEAK_CONFIRMATORY,
    WEAK_SECONDARY,
    Claim,
)
from psnlib.replication.analysis.claims_psn import PSN_CLAIMS, PSN_MAIN_CLAIMS
from psnlib.replication.analysis.claims_released import (
    BASELINE_CLAIMS,
    MASKED_IS_CLAIMS,
    RELEASED_ABLATION_CLAIMS,
    RELEASED_CLAIMS,
    TIS_CLAIMS,
    TUNED_CLAIMS,
)
from psnlib.replication.analysis.claims_weak import COVERAGE_CLAIMS, WEAK_PREFIX_CLAIMS
from psnlib.replication.plan.experiments import GRPO

__all__ = ["CLAIMS"]


def _families(
    claims: tuple[Claim, ...], confirmatory: str, secondary: str, against_grpo: bool = True
) -> tuple[Claim, ...]:
    """``claims`` in ``confirmatory`` where they compare with GRPO (all of them where
    ``against_grpo`` is False), the others in ``secondary``."""
    return tuple(
        replace(c, family=confirmatory if c.theirs == GRPO or not against_grpo else secondary)
        for c in claims
    )


CLAIMS: tuple[Claim, ...] = (
    *_families(COVERAGE_CLAIMS, WEAK_CONFIRMATORY, WEAK_SECONDARY, against_grpo=False),
    *_families(PSN_MAIN_CLAIMS, PSN_CONFIRMATORY, PSN_SECONDARY),
    *_families(RELEASED_CLAIMS, PSN_CONFIRMATORY, PSN_SECONDARY),
    *_families(
        (*TIS_CLAIMS, *MASKED_IS_CLAIMS, *PSN_CLAIMS, *RELEASED_ABLATION_CLAIMS),
        PSN_SECONDARY,
        PSN_SECONDARY,
    ),
    *_families((*BASELINE_CLAIMS, *TUNED_CLAIMS), PSN_SECONDARY, PSN_SECONDARY),
    *_families(WEAK_PREFIX_CLAIMS, WEAK_CONFIRMATORY, WEAK_SECONDARY),
)
