"""Evaluation: sample many completions per problem, verify them exactly, score them, and keep
the results as tidy tables (``psnlib.replication.compute.store``), so a finished evaluation is never
recomputed.

Countdown benchmarks get the testbed's full analysis (``evaluate_policy``); a real benchmark
(a key of ``REAL_BENCHMARKS``, as the ``gpu`` and ``paper`` profiles name them) is judged by
``math_reward`` (``evaluate_answers``). ``evaluate_at_profile`` routes by name.

Samples come from ``psnlib.sampling`` on the model, or, given ``engine`` (a ``vllm.LLM`` of the
same weights; ``python -m psnlib eval --use_vllm``), from vLLM (``psnlib.sampling._sample_vllm``:
no token entropies). The model is still read for the weights' fingerprint (and, on Countdown,
informativeness); results sampled by vLLM are stored under their own key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.metrics import bootstrap_ci
from psnlib.response_metrics import (
    distinct_forms,
    informativeness,
    mean_token_entropy,
    pairwise_diversity,
    solution_count,
    step_score,
)
from psnlib.sampling import Samples, decode, sample_prompts
from psnlib.tasks import math_reward
from psnlib.tasks.countdown import Problem, verify


def check_ks(n: int, ks: tuple[int, ...]) -> None:
    """pass@k is estimated from ``n`` samples per problem: every k must be in 1..n."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"ks must be integers >= 1, got {tuple(ks)}")
    above = [k for k in ks if k > n]
    if above:
        raise ValueError(
            f"ks {above} exceed n={n} samples per problem (pass@k needs k <= n); raise n or drop "
            "them"
        )


def _problem_row(problem: Problem, texts: list[str], seed: int) -> dict[str, Any]:
    verdict_of = {t: verify(problem, t) for t in dict.fromkeys(texts)}  # each distinct text once
    score_of = {t: step_score(problem, t, v) for t, v in verdict_of.items()}
    verdicts, scores = [verdict_of[t] for t in texts], [score_of[t] for t in texts]
    fractions = [s.valid_fraction for s in scores if s.steps]  # responses with steps
    errors = [s.first_error for s in scores if s.first_error is not None]
    correct = [t for t, v in zip(texts, verdicts, strict=True) if v.correct]
    return {
        "correct": len(correct),
        "distinct_correct": distinct_forms(correct),
        "solutions": solution_count(problem),
        "diversity": pairwise_diversity(texts, seed=seed),
        "step_validity": float(np.mean(fractions)) if fractions else float("nan"),
        "first_error": float(np.mean(errors)) if errors else float("nan"),
    }


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
    batch_size: int = 2048,
    informativeness_samples: int = 2,
    progress: bool = True,
    engine: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sample ``n`` completions per problem and score them exactly.

    Returns ``(problems, curve)``. ``problems``: one row per problem with prompt, numbers,
    target, n and

    - ``correct``: samples that are correct;
    - ``distinct_correct``: distinct correct solutions (canonical forms) among them, against
      ``solutions``, the distinct solutions the problem has (None above 4 numbers);
    - ``diversity``: 1 - mean lexical similarity of random pairs of samples;
    - ``step_validity``: mean share of a sample's steps that are valid; ``first_error``: mean
      index of the first failing step, over samples with one (ReCEval-style, exact);
    - ``informativeness``: mean rise of log p(final step) per step, over the first
      ``informativeness_samples`` samples of the problem;
    - ``entropy``: mean token entropy; ``length``: mean completion length in tokens.

    ``curve``: one row per k <= n, the mean unbiased pass@k over problems and its 95%
    bootstrap interval over problems (lo, hi).
    """
    if len(dataset) == 0:
        raise ValueError("evaluate_policy needs at least one problem, got an empty dataset")
    check_ks(n, ks)
    if informativeness_samples < 0:
        raise ValueError(f"informativeness_samples must be >= 0, got {informativeness_samples}")
    prompts = list(dataset["prompt"])
    sampling = dict(temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size)
    sampler = model if engine is None else engine
    samples, texts = _draw(sampler, tokenizer, prompts, n, seed, progress, **sampling)
    problems = [Problem(tuple(row["numbers"]), row["target"]) for row in dataset]
    scored = [
        (p, t) for p, ts in zip(problems, texts, strict=True) for t in ts[:informativeness_samples]
    ]
    gains = informativeness(model, tokenizer, scored)
    per_problem = min(informativeness_samples, n)
    rows = []
    for i, (prompt, problem, completions) in enumerate(zip(prompts, problems, texts, strict=True)):
        mine = [g.mean() for g in gains[i * per_problem : (i + 1) * per_problem] if len(g)]
        rows.append(
            {
                "prompt": prompt,
                "numbers": list(problem.numbers),
                "target": problem.target,
                "n": n,
                **_problem_row(problem, completions, seed),
                "informativeness": float(np.mean(mine)) if mine else float("nan"),
            }
        )
    return _with_curve(pd.DataFrame(rows), samples, n, ks, seed)


def _draw(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    n: int,
    seed: int,
    progress: bool,
    **sampling: Any,
) -> tuple[Samples, list[list[str]]]:
    """``n`` samples of each prompt, with their statistics, and their texts."""
    samples = sample_prompts(
        model, tokenizer, prompts, n, seed=seed, with_stats=True, progress=progress, **sampling
    )
    return samples, decode(tokenizer, samples)


def _with_curve(
    table: pd.DataFrame, samples: Samples, n: int, ks: tuple[int, ...], seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-problem table with mean token entropy and length, and its pass@k curve."""
    if samples.entropies is not None:
        table["entropy"] = mean_token_entropy(samples.entropies, samples.lengths)
    table["length"] = samples.lengths.double().mean(-1).numpy()
    curve = bootstrap_ci(n, table["correct"].to_numpy(), list(ks), seed=seed)
    return table, curve


def evaluate_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    *,
    n: int,
    ks: tuple[int, ...],
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    seed: int = 0,
    batch_size: int = 2048,
    progress: bool = True,
    engine: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sample ``n`` completions per problem of a real benchmark (``load_real_benchmark``
    columns) and judge them with ``math_reward``.

    Returns ``(problems, curve)`` as ``evaluate_policy`` does; ``problems`` has one row per
    problem with id, prompt, answer, n, ``correct`` (samples judged right), ``length`` (mean
    completion tokens) and ``entropy`` (mean token entropy).
    """
    if len(dataset) == 0:
        raise ValueError("evaluate_answers needs at least one problem, got an empty dataset")
    check_ks(n, ks)
    sampling = dict(temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size)
    sampler = model if engine is None else engine
    samples, texts = _draw(
        sampler, tokenizer, list(dataset["prompt"]), n, seed, progress, **sampling
    )
    correct = [
        int(
            sum(math_reward(completions, [row["answer"]] * n, answer_type=[row["answer_type"]] * n))
        )
        for row, completions in zip(dataset, texts, strict=True)
    ]
    table = pd.DataFrame(
        {
            "id": dataset["id"],
            "prompt": dataset["prompt"],
            "answer": dataset["answer"],
            "n": n,
            "correct": correct,
        }
    )
    return _with_curve(table, samples, n, ks, seed)
