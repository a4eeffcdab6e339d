"""The papers' claims that RESULTS.md tests, in its order: RL's narrowing of coverage (the
premise of both papers), the PSN paper's main claims (``claims_psn``), the released code's
configurations and the TIS three-way (``claims_released``), the PSN paper's other claims, the
released-code ablation chain and the exploration baselines (``claims_released``), then the
weak-model guidance paper's (``claims_weak``). One ``psnlib.replication.claim.Claim`` each (what
the fields mean is there); the ``paper`` strings quote the papers (arXiv 2602.02555 for PSN,
2608.27420 for weak-model guidance).
"""

from __future__ import annotations

from psnlib.replication.claim import Claim
from psnlib.replication.claims_psn import PSN_CLAIMS, PSN_MAIN_CLAIMS
from psnlib.replication.claims_released import (
    BASELINE_CLAIMS,
    RELEASED_ABLATION_CLAIMS,
    RELEASED_CLAIMS,
    TIS_CLAIMS,
)
from psnlib.replication.claims_weak import COVERAGE_CLAIMS, WEAK_PREFIX_CLAIMS

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
    *COVERAGE_CLAIMS,
    *PSN_MAIN_CLAIMS,
    *RELEASED_CLAIMS,
    *TIS_CLAIMS,
    *PSN_CLAIMS,
    *RELEASED_ABLATION_CLAIMS,
    *BASELINE_CLAIMS,
    *WEAK_PREFIX_CLAIMS,
)
