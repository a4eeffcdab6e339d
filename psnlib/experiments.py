"""One function per paper experiment: takes a profile and seeds, returns tidy tables.

Notebooks call these and only show what they return.
"""

from __future__ import annotations

import time

import pandas as pd
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.metrics import pass_at_k
from psnlib.pretrain import base_policy, policy_meta, weak_policy
from psnlib.profiles import Profile, get_profile
from psnlib.sampling import generate_samples
from psnlib.tasks import MAIN_BENCHMARK, load_benchmark
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


def testbed(
    profile: str | Profile = "cpu", benchmarks: tuple[str, ...] | None = None, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """The testbed's base and weak policies and their pass@k (notebook 01).

    Returns ``{"curves": policy x benchmark x k, "policies": one row per policy}``.
    """
    profile = get_profile(profile)
    benchmarks = benchmarks or (MAIN_BENCHMARK,)
    curves, policies = [], []
    for name, build in (("base", base_policy), ("weak", weak_policy)):
        start = time.perf_counter()
        model, tokenizer, path = build(profile)
        meta = policy_meta(path)
        info = {"policy": name, "path": str(path), "build_seconds": meta["train_seconds"]}
        info["parameters"] = sum(p.numel() for p in model.parameters())
        info["final_sft_loss"] = meta["final_loss"]
        for bench in benchmarks:
            data = load_benchmark(bench, profile.eval_problems, seed=seed)
            _, curve = evaluate_policy(
                model,
                tokenizer,
                data,
                n=profile.eval_samples,
                ks=profile.ks,
                temperature=profile.eval_temperature,
                max_new_tokens=profile.max_completion_length,
                seed=seed,
            )
            curves.append(curve.assign(policy=name, benchmark=bench))
        info["seconds"] = round(time.perf_counter() - start, 1)
        policies.append(info)
    return {"curves": pd.concat(curves, ignore_index=True), "policies": pd.DataFrame(policies)}
