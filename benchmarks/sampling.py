"""Tokens/s of ``psnlib.sampling`` against ``model.generate`` on the tiny testbed policy.

Both sample the same rows (problems x samples per problem, temperature 1, up to 48 new tokens),
in batches of ``--batch-size`` rows (``generate`` as ``generate_samples`` did before
``psnlib.sampling``). They take turns for a few rounds so that drift in machine load hits both
alike; the medians are compared, and each round's back-to-back pair shows the spread. A token
counts if it was generated up to and including EOS (``generate`` also spends compute on finished
rows; that is part of its cost). For scale, the run also measures the matmul GFLOP/s the machine
achieves at the policy's shapes and the tokens/s that would give if decoding were nothing but its
FLOPs.

High entropy and long rollouts: ``--random --temperature 1.5`` samples a random policy (every
row's history its own after a few tokens: nothing to share), and ``--full-length`` keeps every
row going to ``--max-new-tokens`` (EOS never ends a row; ``generate`` gets ``min_new_tokens``).
``--cpu-time`` times by the process's CPU time, steadier than wall time when other jobs share
the cores.

    python benchmarks/sampling.py                   # 4096 rows, ~2 minutes on 2 cores
    python benchmarks/sampling.py --problems 4      # 1024 rows
    python benchmarks/sampling.py --random --temperature 1.5 --max-new-tokens 512 --full-length \
        --problems 2 --samples 64 --batch-size 128 --threads 1 --cpu-time
    python benchmarks/sampling.py --suite           # issue 18's three conditions, ~10 minutes
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import PreTrainedModel

from psnlib.models import build_tokenizer, count_parameters, load_policy, tiny_policy
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.plan.policies import policy_dir
from psnlib.replication.plan.profiles import get_profile
from psnlib.sampling import sample_tokens
from psnlib.tasks import MAIN_BENCHMARK, load_benchmark

TARGET_RATIO = 3.0  # acceptance: psnlib.sampling / generate tokens/s


def load_model(args: argparse.Namespace) -> tuple[PreTrainedModel, object, str]:
    """``--policy``: a saved policy; else the cached ``cpu`` base policy if it is built (unless
    ``--random``), else a random tiny Qwen2 of the same shape."""
    if args.policy:
        model, tokenizer = load_policy(args.policy, dtype=torch.float32)
        return model.eval(), tokenizer, f"policy {args.policy}"
    if policy_dir(get_profile("cpu").base).exists() and not args.random:
        model, tokenizer, path = base_policy("cpu")
        return model, tokenizer, f"cpu base policy ({path.name})"
    tokenizer = build_tokenizer()
    positions = max(128, 2 * (args.max_new_tokens + 32))  # rotary positions for long rollouts
    model = tiny_policy("qwen2", "base", tokenizer, max_positions=positions).eval()
    return model, tokenizer, "random tiny qwen2-base"


def generated_tokens(completions: torch.Tensor, eos_token_id: int) -> int:
    """Tokens up to and including the first EOS of each row of (B, L)."""
    ended = completions == eos_token_id
    first = torch.where(ended.any(-1), ended.float().argmax(-1) + 1, completions.shape[-1])
    return int(first.sum())


@torch.no_grad()
def run_generate(model, tokenizer, prompts: list[str], args: argparse.Namespace, seed: int) -> int:
    rows = [p for p in prompts for _ in range(args.samples)]
    torch.manual_seed(seed)
    tokens = 0
    for start in range(0, len(rows), args.batch_size):
        enc = tokenizer(
            rows[start : start + args.batch_size], return_tensors="pt", padding=True
        )  # left-padded
        out = model.generate(
            **enc,
            max_new_tokens=args.max_new_tokens,
            min_new_tokens=args.max_new_tokens if args.full_length else 0,
            do_sample=True,
            temperature=args.temperature,
            top_k=0,
            top_p=1.0,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        tokens += generated_tokens(out[:, enc["input_ids"].shape[1] :], tokenizer.eos_token_id)
    return tokens


def run_psnlib(model, tokenizer, prompts: list[str], args: argparse.Namespace, seed: int) -> int:
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    samples = sample_tokens(
        model,
        ids,
        args.samples,
        eos_token_id=len(tokenizer) if args.full_length else tokenizer.eos_token_id,  # none ends
        pad_token_id=tokenizer.pad_token_id,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        seed=seed,
        progress=False,
    )
    return int(samples.lengths.sum())


def matmul_gflops(model: PreTrainedModel, rows: int, reps: int = 20) -> float:
    """Achieved GFLOP/s of (rows, hidden) x (hidden, intermediate) matmuls, best of ``reps``."""
    x = torch.randn(rows, model.config.hidden_size)
    w = torch.randn(model.config.intermediate_size, model.config.hidden_size)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - start)
    return 2 * x.shape[0] * x.shape[1] * w.shape[0] / best / 1e9


def flops_per_token(model: PreTrainedModel, context: int) -> float:
    """Forward FLOPs of one decoded token at ``context``: 2 per weight, plus attention.

    The tied embedding counts once, as the head's matmul (the lookup costs no FLOPs).
    """
    config = model.config
    attention = 4 * config.num_hidden_layers * config.hidden_size * context  # scores and mix
    return 2 * count_parameters(model) + attention


# The acceptance conditions of issue 18, run one after another by --suite: (name, flags). Each
# runs at one thread in CPU time; the trained policy is --policy or the cached cpu base policy.
SUITE = (
    ("trained cpu policy, T=1, 48 tokens", "--problems 8 --samples 256 --rounds 5", 3.0),
    (
        "random policy, T=1.5, 48 tokens",
        "--random --temperature 1.5 --problems 4 --samples 256 --rounds 5",
        3.0,
    ),
    (
        "random policy, T=1.5, 512 tokens (full length)",
        "--random --temperature 1.5 --max-new-tokens 512 --full-length --problems 2 "
        "--samples 64 --batch-size 128 --rounds 3",
        1.0,
    ),
)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--samples", type=int, default=256, help="samples per problem")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=1024, help="rows decoded together")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--policy", help="a saved policy directory (default: see load_model)")
    parser.add_argument("--random", action="store_true", help="a random policy: high entropy")
    parser.add_argument(
        "--full-length", action="store_true", help="no row ends before --max-new-tokens"
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time by process CPU time, not wall time"
    )
    parser.add_argument(
        "--suite",
        action="store_true",
        help="the three acceptance conditions (SUITE), one thread, CPU time, one summary",
    )
    args = parser.parse_args(argv)
    for name in ("problems", "samples", "max_new_tokens", "batch_size", "rounds", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def measure(args: argparse.Namespace, target: float = TARGET_RATIO) -> dict[str, float]:
    """Both samplers, ``args.rounds`` rounds taking turns; prints each round and the summary.
    Returns the median tokens/s of each and the per-round ratios' range."""
    torch.set_num_threads(args.threads)
    model, tokenizer, policy = load_model(args)
    clock = time.process_time if args.cpu_time else time.perf_counter
    prompts = list(load_benchmark(MAIN_BENCHMARK, args.problems, seed=0)["prompt"])
    rows = args.problems * args.samples
    print(f"{policy}, {count_parameters(model):,} parameters, {rows} rows, {args.threads} threads")
    print(
        f"batches of {args.batch_size} rows, temperature {args.temperature}, up to "
        f"{args.max_new_tokens} new tokens{' (full length)' if args.full_length else ''}, "
        f"{'CPU' if args.cpu_time else 'wall'} time"
    )

    runs = {"generate": run_generate, "psnlib": run_psnlib}
    rates: dict[str, list[float]] = {k: [] for k in runs}
    lengths: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(args.rounds):
        for name in list(runs)[r % 2 :] + list(runs)[: r % 2]:  # alternate who goes first
            start = clock()
            tokens = runs[name](model, tokenizer, prompts, args, r)
            seconds = clock() - start
            rates[name].append(tokens / seconds)
            lengths[name].append(tokens / rows)
            print(f"  round {r} {name:>8}: {tokens / seconds:8.0f} tokens/s ({seconds:.1f} s)")

    gflops = matmul_gflops(model, args.batch_size)
    mean_length = statistics.median(lengths["psnlib"])
    context = len(prompts[0]) + mean_length / 2
    bound = gflops * 1e9 / flops_per_token(model, int(context))
    median = {k: statistics.median(v) for k, v in rates.items()}
    ratio = median["psnlib"] / median["generate"]
    print(
        f"mean completion length: {mean_length:.1f} tokens (generate: "
        f"{statistics.median(lengths['generate']):.1f})"
    )
    print(f"generate       : {median['generate']:8.0f} tokens/s (median of {args.rounds})")
    print(f"psnlib.sampling: {median['psnlib']:8.0f} tokens/s (median of {args.rounds})")
    paired = [p / g for p, g in zip(rates["psnlib"], rates["generate"], strict=True)]
    above = sum(r >= target for r in paired)
    print(f"ratio          : {ratio:.2f}x (target >= {target}x)")
    print(
        f"per round      : {min(paired):.2f}x-{max(paired):.2f}x, {above} of {args.rounds} "
        f"rounds >= {target}x (each round's two runs back to back)"
    )
    print(
        f"FLOP bound     : {bound:8.0f} tokens/s if every token were decoded at the "
        f"{gflops:.1f} GFLOP/s matmul rate measured here; psnlib.sampling reaches "
        f"{median['psnlib'] / bound:.0%} of it (it decodes each distinct prefix once)"
    )
    return {**median, "ratio": ratio, "lo": min(paired), "hi": max(paired)}


def suite(args: argparse.Namespace) -> None:
    """The SUITE's conditions in one run, then one table of their ratios against the targets."""
    common = ["--threads", "1", "--cpu-time"] + (["--policy", args.policy] if args.policy else [])
    results = []
    for name, flags, target in SUITE:
        print(f"\n== {name}: {flags}")
        results.append((name, target, measure(parse(flags.split() + common), target)))
    print(f"\n{'condition':<48} {'generate':>9} {'psnlib':>9} {'ratio':>7} {'rounds':>13} target")
    for name, target, r in results:
        verdict = "met" if r["ratio"] >= target else "NOT met"
        print(
            f"{name:<48} {r['generate']:9.0f} {r['psnlib']:9.0f} {r['ratio']:6.2f}x "
            f"{r['lo']:5.2f}-{r['hi']:.2f}x >= {target}x {verdict}"
        )


def main() -> None:
    args = parse()
    suite(args) if args.suite else measure(args)


if __name__ == "__main__":
    main()
