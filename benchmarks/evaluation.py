"""Wall time of evaluating one policy on every testbed benchmark at a profile's scale.

Runs ``psnlib.replication.compute.evaluation.evaluate_at_profile`` (sampling, exact verification,
diversity, step-level self-consistency, informativeness, pass@k curves with bootstrap intervals) on
each of the profile's benchmarks, at its number of problems and samples, with no result store
(nothing is loaded from cache). The baseline is the issue's budget: the ratio printed is total time
over ``BUDGET_SECONDS``. The policy is the profile's cached base policy if built, else a random tiny
policy of the same shape (random policies write longer completions: an upper bound).

    python benchmarks/evaluation.py                   # cpu profile: 7 benchmarks x 100 x 512
    python benchmarks/evaluation.py --profile smoke
"""

from __future__ import annotations

import argparse
import time

import torch

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.compute.evaluation import evaluate_at_profile
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.plan.policies import policy_dir
from psnlib.replication.plan.profiles import get_profile

BUDGET_SECONDS = 300.0  # acceptance: all seven benchmarks at the cpu profile in 5 minutes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    profile = get_profile(args.profile)
    if policy_dir(profile.base).exists():
        model, tokenizer, path = base_policy(profile)
        policy = f"{profile.name} base policy ({path.name})"
    else:
        tokenizer = build_tokenizer()
        model = tiny_policy(profile.base.family, profile.base.size, tokenizer).eval()
        policy = f"random tiny {profile.base.family}-{profile.base.size} (base not built)"
    print(
        f"{policy}; {len(profile.benchmarks)} benchmarks x {profile.eval_problems} problems x "
        f"{profile.eval_samples} samples, {args.threads} threads"
    )
    total = 0.0
    for benchmark in profile.benchmarks:
        start = time.perf_counter()
        _, curve = evaluate_at_profile(model, tokenizer, profile, benchmark, progress=False)
        seconds = time.perf_counter() - start
        total += seconds
        top = curve.iloc[-1]
        print(f"  {benchmark:<16} {seconds:6.1f} s   pass@{int(top['k'])} {top['pass_at_k']:.3f}")
    print(f"total          : {total:6.1f} s")
    print(f"ratio to budget: {total / BUDGET_SECONDS:.2f} (budget {BUDGET_SECONDS:.0f} s; <= 1)")


if __name__ == "__main__":
    main()
