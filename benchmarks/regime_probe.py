"""Regime probes (issue 16): how SFT length, data and size move a tiny policy's pass@1.

Trains one tiny policy by SFT (psnlib.replication.compute.pretrain's recipe: AdamW, linear warm-up,
cosine decay to 10% over ``--steps``), and every ``--eval-every`` steps samples ``--samples``
completions of ``--problems`` problems of each benchmark at temperature 1 and prints pass@1 (the
share of correct samples) and the verifier's reasons for the wrong ones. Intermediate evaluations
are mid-schedule (the learning rate has not decayed yet), so they under-state what a run of that
many steps would reach. Besides the verifier's reasons (shares of all samples): ``forced_last_step``
(the first error is in the last step, which writes the target as a wrong result) and
``alive_before_last`` (the last attempt before its last step can still reach the target).
``--save DIR`` keeps the final model (e.g. for psnlib.replication.compute.calibrate); ``--load DIR``
evaluates one.

    OMP_NUM_THREADS=1 python benchmarks/regime_probe.py --steps 4800 --eval-every 800
    OMP_NUM_THREADS=1 python benchmarks/regime_probe.py --load DIR --samples 64
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import torch

from psnlib.models import build_tokenizer, load_policy, save_policy, tiny_policy
from psnlib.replication.compute.pretrain import encode_sft, sft_train
from psnlib.sampling import generate_samples
from psnlib.tasks import load_benchmark, sft_corpus
from psnlib.tasks.countdown import ATTEMPT_SEP, Problem, final_attempt, verify
from psnlib.tasks.prefix_quality import finish_attempt


def pass1(
    model, tokenizer, benchmarks: list[str], problems: int, samples: int, max_new_tokens: int
) -> dict:
    """pass@1 and wrong-answer reasons per benchmark (evaluation seed 0, as the notebooks);
    ``attempts`` and ``chars``: the mean number of attempts and characters per completion. For
    search traces, over all attempts: ``hit_rate`` (the share that are correct chains),
    ``go_after_hit`` (the share of hits followed by another attempt) and ``stop_after_miss``
    (the share of missed attempts that end the completion)."""
    out = {}
    for name in benchmarks:
        data = load_benchmark(name, problems, seed=0)
        texts = generate_samples(
            model,
            tokenizer,
            list(data["prompt"]),
            samples,
            max_new_tokens=max_new_tokens,
            progress=False,
        )
        reasons: Counter[str] = Counter()
        ends: Counter[tuple[bool, bool]] = Counter()  # (attempt correct, completion ends there)
        chars = 0
        for row, completions in zip(data, texts, strict=True):
            problem = Problem(tuple(row["numbers"]), row["target"])
            for text in completions:
                verdict = verify(problem, text)
                reasons[verdict.reason] += 1
                tried = text.strip().split(ATTEMPT_SEP)
                for k, attempt in enumerate(tried):
                    ends[verify(problem, attempt).correct, k == len(tried) - 1] += 1
                chars += len(text)
                steps = final_attempt(text).split(",")
                # a wrong result written where the target belongs: a "forced" last step
                last = verdict.reason == "bad_arithmetic" and verdict.first_error == len(steps) - 1
                reasons["forced_last_step"] += last and steps[-1].endswith(f"={problem.target}")
                # the chain up to its last step could still reach the target
                head = ",".join(steps[:-1]) + ","
                reasons["alive_before_last"] += len(steps) > 1 and bool(
                    finish_attempt(problem, head)
                )
        total, attempts = len(data) * samples, ends.total()
        hits, misses = ends[True, True] + ends[True, False], ends[False, True] + ends[False, False]
        out[name] = {
            "pass1": reasons["ok"] / total,
            "attempts": round(attempts / total, 2),
            "chars": round(chars / total, 1),
            "hit_rate": round(hits / attempts, 4),
            "go_after_hit": round(ends[True, False] / max(1, hits), 3),
            "stop_after_miss": round(ends[False, True] / max(1, misses), 3),
        } | {k: round(v / total, 4) for k, v in reasons.items() if k != "ok"}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="qwen2")
    parser.add_argument("--size", default="base")
    parser.add_argument("--style", default="uniform")
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--examples", type=int, default=0, help="0: steps x batch (one epoch)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-misses", type=int, default=0, help="search traces (with_misses)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--eval-every", type=int, default=400)
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--benchmarks", default="countdown-l3")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--save", default=None)
    parser.add_argument("--load", default=None, help="evaluate a saved policy, train nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    benchmarks = args.benchmarks.split(",")
    if args.load:
        model, tokenizer = load_policy(args.load, dtype=torch.float32)
        print(
            json.dumps(
                pass1(
                    model.eval(),
                    tokenizer,
                    benchmarks,
                    args.problems,
                    args.samples,
                    args.max_new_tokens,
                )
            )
        )
        return
    start = time.perf_counter()
    tokenizer = build_tokenizer()
    model = tiny_policy(args.family, args.size, tokenizer, seed=args.seed)
    corpus = sft_corpus(
        args.examples or args.steps * args.batch,
        seed=args.seed,
        style=args.style,
        max_misses=args.max_misses,
    )
    input_ids, labels = encode_sft(list(corpus["prompt"]), list(corpus["completion"]), tokenizer)
    print(f"corpus {len(corpus)} examples in {time.perf_counter() - start:.0f} s", flush=True)
    clock = {"start": time.perf_counter(), "eval_s": 0.0}

    def evaluate(step: int, losses: list[float]) -> None:
        if step % args.eval_every and step != args.steps:
            return
        model.eval()
        tick = time.perf_counter()
        result = pass1(
            model, tokenizer, benchmarks, args.problems, args.samples, args.max_new_tokens
        )
        eval_s = time.perf_counter() - tick
        record = {
            "step": step,
            "loss": round(sum(losses[-100:]) / len(losses[-100:]), 4),
            "train_s": round(tick - clock["start"] - clock["eval_s"], 1),
            "eval_s": round(eval_s, 1),
        }
        clock["eval_s"] += eval_s
        print(json.dumps(record | result), flush=True)

    sft_train(
        model,
        input_ids,
        labels,
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        seed=args.seed,
        desc="probe SFT",
        on_step=evaluate,
    )
    if args.save:
        save_policy(model.eval(), tokenizer, args.save, meta={"probe": vars(args)})


if __name__ == "__main__":
    main()
