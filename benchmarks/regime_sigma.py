"""Sigma against per-token KL on a saved policy (issue 16): ``psnlib.replication.compute.calibrate``
on the main benchmark's prompts, with the sigmas given as shares of the MLP weight RMS.

    OMP_NUM_THREADS=1 python benchmarks/regime_sigma.py DIR --problems 64 --samples 16
"""

from __future__ import annotations

import argparse

import torch

from psnlib.models import load_policy
from psnlib.replication.compute.calibrate import calibrate_sigma, weight_rms
from psnlib.tasks import load_benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="a saved policy directory")
    parser.add_argument("--relative", default="0.07,0.12,0.17,0.24,0.36")
    parser.add_argument("--benchmark", default="countdown-l3")
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.policy, dtype=torch.float32)
    model.eval()
    prompts = list(load_benchmark(args.benchmark, args.problems, seed=0)["prompt"])
    rms = weight_rms(model)
    sigmas = tuple(float(r) * rms for r in args.relative.split(","))
    cal = calibrate_sigma(
        model, tokenizer, prompts, 0.004, sigmas, n=args.samples, draws=args.draws
    )
    print(cal.points.to_string(index=False))
    print(f"MLP weight RMS {rms:.4f}; fit KL = {cal.c:.4g} * sigma^{cal.b:.2f}")
    for kl in (0.002, 0.003, 0.004, 0.005, 0.008):
        sigma = cal.sigma_for(kl)
        print(f"KL {kl}: sigma {sigma:.4f} = {sigma / rms:.3f} x RMS")


if __name__ == "__main__":
    main()
