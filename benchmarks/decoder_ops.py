"""Where the evaluation decoder's CPU time goes, against its matmul floor measured in the same run.

Samples ``--problems`` problems of ``--benchmark`` x ``--samples`` with ``psnlib.sampling`` (as
an evaluation does, with token statistics) at one thread under the torch profiler, and groups the
ops' self CPU time:

- ``linear``: ``mm``/``addmm`` (the model's ``nn.Linear`` layers and head);
- ``attention``: ``bmm``/``baddbmm`` (the per-node einsums and the prompt part);
- ``cache moves``: ``index_copy_``/``index_select`` (node splits, prompt gathers);
- ``other``: everything else (norms, rotary, SiLU, softmax, copies, sampling, bookkeeping).

The baseline is the **matmul floor**: the ``nn.Linear`` FLOPs of every token row that entered the
first layer's MLP (``paired_seed.MatmulFloor``), at the fp32 matmul rate measured here at the
policy's shapes (``sampling.matmul_gflops``, 1024 rows). The printout gives the linear ops'
achieved rate against it and the whole decoder's time as a multiple of it. The policy is
``--policy``, else the cached cpu base policy (a random tiny Qwen2 of its shape if that is not
built).

    PSNLIB_DATA=<data> python benchmarks/decoder_ops.py
    PSNLIB_DATA=<data> python benchmarks/decoder_ops.py --policy <a trained run's policy dir>
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from paired_seed import MatmulFloor  # benchmarks/, beside this file
from sampling import load_model, matmul_gflops
from torch.profiler import ProfilerActivity, profile

from psnlib.sampling import sample_prompts
from psnlib.tasks import load_benchmark

GROUPS = {
    "aten::mm": "linear",
    "aten::addmm": "linear",
    "aten::bmm": "attention",
    "aten::baddbmm": "attention",
    "aten::index_copy_": "cache moves",
    "aten::index_select": "cache moves",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=None, help="a saved policy directory")
    parser.add_argument("--benchmark", default="countdown-l3")
    parser.add_argument("--problems", type=int, default=10)
    parser.add_argument("--samples", type=int, default=512)
    args = parser.parse_args()
    if args.problems < 1 or args.samples < 1:
        raise SystemExit(f"--problems and --samples must be >= 1, got {vars(args)}")
    torch.set_num_threads(1)
    args.random, args.max_new_tokens = False, 48  # what sampling.load_model reads
    model, tokenizer, name = load_model(args)
    floor = MatmulFloor(matmul_gflops(model, rows=1024))
    floor.watch(model)
    prompts = list(load_benchmark(args.benchmark, args.problems, seed=0)["prompt"])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sample_prompts(model, tokenizer, prompts, args.samples, with_stats=True, progress=False)
    seconds: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        seconds[GROUPS.get(event.key, "other")] += event.self_cpu_time_total / 1e6
    total = sum(seconds.values())
    print(
        f"{name}; {args.benchmark}, {args.problems} problems x {args.samples} samples; "
        f"{floor.flops / 1e9:,.0f} GFLOP through the linear layers, 1 thread, torch profiler self "
        "CPU time"
    )
    for group in ("linear", "attention", "cache moves", "other"):
        print(f"  {group:<12} {seconds[group]:7.2f} s  {seconds[group] / total:6.1%}")
    print(f"  {'total':<12} {total:7.2f} s")
    print(
        f"matmul floor {floor.seconds:.2f} s ({floor.gflops:.0f} GFLOP/s measured here); "
        f"linear ops reach {floor.seconds / seconds['linear']:.2f} of that rate; the decoder "
        f"takes {total / floor.seconds:.2f}x its floor"
    )


if __name__ == "__main__":
    main()
