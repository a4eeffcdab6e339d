"""One function per paper experiment: takes a profile and seeds, returns tidy tables.

Notebooks call these and only show what they return.
"""

from __future__ import annotations

import time

import pandas as pd

from psnlib.evaluate import evaluate_policy
from psnlib.models import count_parameters
from psnlib.pretrain import base_policy, policy_meta, weak_policy
from psnlib.profiles import Profile, get_profile
from psnlib.tasks import MAIN_BENCHMARK, load_benchmark


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
        info["parameters"] = count_parameters(model)
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
