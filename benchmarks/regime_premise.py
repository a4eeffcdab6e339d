"""The premise check and the RL lift from a saved base policy (issue 16), at the cpu profile.

Trains GRPO (one seed, the profile's RL settings, ``--prompts`` per step, constant learning rate by
default as in the papers) from the base policy in DIR, then on the main benchmark: pass@1 and
pass@max of the base and of GRPO, sigma calibrated on the GRPO checkpoint
(``psnlib.replication.compute.calibrate``), and ``psnlib.replication.report.regime.premise_check``
(noise at the calibrated sigmas of 0.002, 0.004, 0.008 per token against temperature). Runs and
evaluations go under ``$PSNLIB_DATA``.

    OMP_NUM_THREADS=1 PSNLIB_DATA=/tmp/data python benchmarks/regime_premise.py DIR --samples 128

``--lift-only`` stops after the clean pass@1 and pass@max of the base and of GRPO (the RL lift).
"""

from __future__ import annotations

import argparse
import time

import torch

from psnlib.replication.compute.calibrate import calibrate_sigma, weight_rms
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.replication.plan.profiles import PolicySpec, get_profile
from psnlib.replication.report.regime import at_equal_pass1, main_benchmark, premise_check
from psnlib.tasks import load_benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="a saved base policy directory")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=32, help="RL prompts per step")
    parser.add_argument("--lr-schedule", default="constant", help="TRL lr_scheduler_type")
    parser.add_argument(
        "--lift-only", action="store_true", help="stop after the clean pass@k of base and GRPO"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = get_profile(args.profile)
    ks = tuple(k for k in base.ks if k <= args.samples)
    P = base.with_overrides(
        base=PolicySpec(name_or_path=args.policy),
        eval_samples=args.samples,
        ks=ks,
        rl_prompts_per_step=args.prompts,
    )
    tick = time.perf_counter()
    grpo, tokenizer, log = train_policy(P, "grpo", args.seed, lr_scheduler_type=args.lr_schedule)
    print(f"GRPO trained in {time.perf_counter() - tick:.0f} s; reward (first, last 10 steps):")
    print(log["reward"].head(10).mean(), log["reward"].tail(10).mean(), flush=True)
    base_model, _, _ = base_policy(P)
    clean = premise_check(base_model.eval(), tokenizer, P, (), (1.0,))
    print("base:", clean.to_string(index=False), flush=True)
    if args.lift_only:
        lifted = premise_check(grpo.eval(), tokenizer, P, (), (1.0,))
        print("GRPO:", lifted.to_string(index=False))
        print(f"total {time.perf_counter() - tick:.0f} s")
        return
    prompts = list(load_benchmark(main_benchmark(P), 64, seed=0)["prompt"])
    rms = weight_rms(grpo)
    sigmas = tuple(r * rms for r in (0.12, 0.24, 0.36))
    cal = calibrate_sigma(grpo, tokenizer, prompts, 0.004, sigmas, n=16, draws=4)
    print(cal.points.to_string(index=False))
    print(f"GRPO: RMS {rms:.4f}, KL = {cal.c:.4g} sigma^{cal.b:.2f}, KL 0.004 at sigma")
    print(f"{cal.sigma:.4f} = {cal.sigma_over_rms:.3f} x RMS", flush=True)
    noise = tuple(cal.sigma_for(kl) for kl in (0.002, 0.004, 0.008))
    premise = premise_check(grpo, tokenizer, P, noise, (1.0, 1.1, 1.2, 1.35, 1.5))
    print(premise.to_string(index=False))
    print(at_equal_pass1(premise).to_string(index=False))
    print(f"total {time.perf_counter() - tick:.0f} s")


if __name__ == "__main__":
    main()
