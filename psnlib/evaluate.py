"""Evaluation: sample many completions per problem, verify them exactly, pass@k over problems."""

from __future__ import annotations

import pandas as pd
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.metrics import pass_at_k
from psnlib.sampling import generate_samples
from psnlib.tasks.countdown import Problem, verify


def evaluate_policy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    *,
    n: int,
    ks: tuple[int, ...],
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sample ``n`` completions per problem and score them exactly.

    Returns ``(problems, curve)``: one row per problem (``correct`` of ``n``), and one row per k
    with the mean unbiased pass@k over problems.
    """
    samples = generate_samples(
        model,
        tokenizer,
        list(dataset["prompt"]),
        n,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    rows = []
    for row, completions in zip(dataset, samples, strict=True):
        problem = Problem(tuple(row["numbers"]), row["target"])
        correct = sum(verify(problem, c).correct for c in completions)
        rows.append({"prompt": row["prompt"], "n": n, "correct": correct})
    problems = pd.DataFrame(rows)
    curve = pd.DataFrame(
        {"k": k, "pass_at_k": float(pass_at_k(n, problems["correct"].to_numpy(), k).mean())}
        for k in ks
        if k <= n
    )
    return problems, curve
