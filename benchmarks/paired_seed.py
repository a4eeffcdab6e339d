"""Cost of one paired seed of the primary comparison (GRPO vs PSN fixed) at the cpu profile, in
core-minutes, today (a git worktree of a baseline commit) against this checkout, in one run.

A paired seed is: train the ``grpo`` and the ``psn`` arm for the profile's ``rl_steps`` from the
base policy, then evaluate both trained policies on every benchmark the experiments evaluate
their main-seed runs on (``psnlib.replication.plan.schedule.planned_work``: ``main_results``'
in-distribution benchmarks and ``ood``'s others, the cpu profile's seven) at ``eval_samples``
samples per problem (512 at cpu). The base
policy's own evaluation is shared by all seeds and not counted.

To fit a benchmark, the run scales down: ``--steps`` training steps per arm and ``--problems``
problems per benchmark, and extrapolates linearly to the profile's steps and problems (the
output says so). Each measurement runs in a fresh subprocess at one thread
(``OMP_NUM_THREADS=1``) with the tree's own ``psnlib`` on ``PYTHONPATH``, and is timed in the
process's CPU time (``time.process_time``), so other load on the cores does not count. Today and
new take turns, ``--rounds`` times; the ratio is the median over rounds of new / today.

The split: ``sampling`` (rollouts, ``_generate_single_turn``), ``loss forward``
(``_get_per_token_logps_and_entropies``), ``backward`` (``accelerator.backward``), ``TRL
bookkeeping`` (the rest of a step: rewards, advantages, optimizer, logging) and ``evaluation``.

Beside them, each tree's ``matmul floor``: the CPU time its linear layers' FLOPs would take at
the fp32 matmul rate measured in the same worker (``sampling.matmul_gflops``, the policy's
shapes). It counts every token row that enters the first layer's MLP (the decoder's nodes,
prefills, the loss forwards with their padding, informativeness) at 2 FLOPs per ``nn.Linear``
weight, and 4 more per weight for rows that carry gradients; attention and elementwise work cost
extra, so no implementation of the same arithmetic gets under it. It is not part of the total.

    python benchmarks/paired_seed.py                      # ~15 minutes on 2 cores
    python benchmarks/paired_seed.py --steps 4 --problems 4 --rounds 1   # quicker, noisier
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = "8d49a5e"  # main when issue 18's halving began (the previous cpu figures' code)
TARGET = 0.5  # acceptance: new / today cost per paired seed
ARMS = ("grpo", "psn")
PARTS = ("sampling", "loss forward", "backward", "TRL bookkeeping", "evaluation")
FLOOR = "matmul floor"
REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- worker side


def _timed(owner: object, name: str, clock: dict[str, float], part: str) -> None:
    """Wrap ``owner.name`` (an instance attribute) so its CPU time adds to ``clock[part]``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            clock[part] += time.process_time() - start

    setattr(owner, name, wrapper)


class MatmulFloor:
    """Counts the token rows entering a policy's first MLP, and the CPU seconds their
    ``nn.Linear`` FLOPs take at ``gflops``: 2 per weight forward, 4 more with gradients."""

    def __init__(self, gflops: float) -> None:
        self.gflops, self.flops = gflops, 0.0

    def watch(self, model) -> None:
        import torch

        weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))

        def count(module, inputs) -> None:
            x = inputs[0]
            rows = x.numel() // x.shape[-1]
            self.flops += (6 if x.requires_grad else 2) * weights * rows

        model.model.layers[0].mlp.gate_proj.register_forward_pre_hook(count)

    @property
    def seconds(self) -> float:
        return self.flops / (self.gflops * 1e9)


def work(args: argparse.Namespace) -> dict[str, float]:
    """Train both arms for ``args.steps`` and evaluate both on ``args.problems`` problems of
    each benchmark of the main seeds' claims; CPU seconds per part, and the matmul floor of
    training (``FLOOR``) and of evaluation (``FLOOR`` + " eval"), imports ``psnlib`` from
    ``PYTHONPATH``."""
    import warnings

    import torch
    from sampling import matmul_gflops  # benchmarks/sampling.py, beside this file
    from transformers.trainer_callback import PrinterCallback

    from psnlib.evaluate import evaluate_policy
    from psnlib.models import load_policy
    from psnlib.replication.compute.runs import train_set
    from psnlib.replication.plan.experiments import GRPO, PSN
    from psnlib.replication.plan.profiles import get_profile
    from psnlib.replication.plan.runs import rl_config
    from psnlib.replication.plan.schedule import planned_work
    from psnlib.tasks import load_benchmark
    from psnlib.tasks.datasets import task_reward
    from psnlib.trainer import PSNGRPOTrainer

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    profile = get_profile("cpu")
    main_seed = profile.seeds[-1]  # a main seed that no ablation shares
    read = {
        v.arm.name: b
        for v, seed, b in planned_work(profile)
        if seed == main_seed and v in (GRPO, PSN)
    }
    clock = dict.fromkeys(PARTS, 0.0)
    train_total = 0.0
    policies = []
    floor = None
    for arm in ARMS:
        model, tokenizer = load_policy(args.policy, dtype=torch.float32)
        floor = floor or MatmulFloor(matmul_gflops(model, rows=1024))
        floor.watch(model)
        with tempfile.TemporaryDirectory() as tmp:
            config = rl_config(
                profile, arm, args.seed, tmp, max_steps=args.steps, save_strategy="no"
            )
            config.disable_tqdm = True
            trainer = PSNGRPOTrainer(
                model=model,
                reward_funcs=task_reward(profile.rl_dataset),
                args=config,
                train_dataset=train_set(profile, arm, args.seed),
                processing_class=tokenizer,
            )
            trainer.remove_callback(PrinterCallback)
            _timed(trainer, "_generate_single_turn", clock, "sampling")
            _timed(trainer, "_get_per_token_logps_and_entropies", clock, "loss forward")
            _timed(trainer.accelerator, "backward", clock, "backward")
            start = time.process_time()
            trainer.train()
            train_total += time.process_time() - start
        policies.append(trainer.model.eval())
    clock["TRL bookkeeping"] = train_total - sum(clock[p] for p in PARTS[:3])
    clock[FLOOR], floor.flops = floor.seconds, 0.0
    start = time.process_time()
    for arm, model in zip(ARMS, policies, strict=True):
        for benchmark in read[arm]:  # what the experiments evaluate the arm's main-seed run on
            evaluate_policy(
                model,
                tokenizer,
                load_benchmark(benchmark, args.problems, seed=0),
                n=profile.eval_samples,
                ks=profile.ks,
                temperature=profile.eval_temperature,
                max_new_tokens=profile.max_completion_length,
                seed=0,
                progress=False,
            )
    clock["evaluation"] = time.process_time() - start
    clock[FLOOR + " eval"] = floor.seconds
    return clock


# ----------------------------------------------------------------------------- driver side


def measure(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """One worker run with ``tree``'s psnlib: CPU seconds per part."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
        command = [sys.executable, __file__, "--worker", "--out", out.name, "--policy"]
        command += [str(args.policy), "--steps", str(args.steps), "--problems", str(args.problems)]
        subprocess.run(command, env=env, check=True, cwd=tree)
        return json.loads(Path(out.name).read_text())


def baseline_tree(path: Path, commit: str) -> Path:
    """A git worktree of ``commit`` at ``path`` (made if missing; a registration left by a
    deleted one, e.g. a cleared /tmp, is pruned first)."""
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=True)
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True
        )
    return path


def default_policy() -> Path:
    """The cached cpu base policy if built, else a cheaper cpu-like one (400 SFT steps), cached."""
    from psnlib.replication.compute.pretrain import build_policy
    from psnlib.replication.plan.policies import policy_dir
    from psnlib.replication.plan.profiles import get_profile

    spec = get_profile("cpu").base
    if policy_dir(spec).exists():
        return policy_dir(spec)
    from dataclasses import replace

    cheap = replace(spec, sft_steps=400, sft_examples=12_800)
    return build_policy(cheap)[2]


def scale(args: argparse.Namespace) -> dict[str, float]:
    """Factors from the measured run to one paired seed at the cpu profile."""
    from psnlib.replication.plan.profiles import get_profile

    cpu = get_profile("cpu")
    return {"train": cpu.rl_steps / args.steps, "eval": cpu.eval_problems / args.problems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="training steps per arm")
    parser.add_argument("--problems", type=int, default=10, help="problems per benchmark")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", type=Path, default=None, help="a saved base policy")
    parser.add_argument("--baseline", default=BASELINE, help="commit of today's cost")
    parser.add_argument("--baseline-dir", type=Path, default=Path("/tmp/psnlib-baseline"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.problems < 1 or args.rounds < 1:
        raise SystemExit(f"--steps, --problems, --rounds must be >= 1, got {vars(args)}")
    if args.worker:
        Path(args.out).write_text(json.dumps(work(args)))
        return
    args.policy = args.policy or default_policy()
    trees = {"today": baseline_tree(args.baseline_dir, args.baseline), "new": REPO}
    runs: dict[str, list[dict[str, float]]] = {"today": [], "new": []}
    for r in range(args.rounds):  # alternate, the order rotating each round
        for name in ("today", "new") if r % 2 == 0 else ("new", "today"):
            runs[name].append(measure(trees[name], args))
            print(f"round {r + 1} {name}: {sum(runs[name][-1].values()):.1f} CPU s", flush=True)
    factor = scale(args)

    def minutes(clock: dict[str, float]) -> dict[str, float]:
        train = {p: clock[p] * factor["train"] for p in PARTS[:4]}
        evaluation = clock["evaluation"] * factor["eval"]
        floor = clock[FLOOR] * factor["train"] + clock[FLOOR + " eval"] * factor["eval"]
        return {**train, "evaluation": evaluation, "total": sum(train.values()) + evaluation} | {
            FLOOR: floor
        }

    cost = {name: [minutes(c) for c in clocks] for name, clocks in runs.items()}
    print(
        f"\none paired seed (grpo + psn arms, {ARMS}) at the cpu profile, core-minutes: measured "
        f"{args.steps} steps per arm and {args.problems} problems per benchmark, extrapolated "
        f"linearly (x{factor['train']:g} steps, x{factor['eval']:g} problems); 1 thread, CPU "
        f"time; policy {args.policy}; today = {args.baseline}, {args.rounds} rounds"
    )
    print(f"{'part':<16} {'today':>8} {'new':>8} {'new/today':>10}")
    for part in (*PARTS, "total", FLOOR):
        today = statistics.median(c[part] for c in cost["today"]) / 60
        new = statistics.median(c[part] for c in cost["new"]) / 60
        print(f"{part:<16} {today:8.2f} {new:8.2f} {new / today:10.3f}")
    ratios = [n["total"] / t["total"] for n, t in zip(cost["new"], cost["today"], strict=True)]
    print(
        f"ratio new / today per round: {', '.join(f'{x:.3f}' for x in ratios)}; "
        f"median {statistics.median(ratios):.3f} (target <= {TARGET})"
    )
    today = statistics.median(c["total"] for c in cost["today"])
    floor = statistics.median(c[FLOOR] for c in cost["new"])
    print(
        f"new's matmul floor is {floor / today:.3f} of today's cost: the target asks for the "
        f"whole paired seed within {TARGET * today / floor:.2f}x of its linear layers' FLOPs "
        "at the measured fp32 matmul rate"
    )


if __name__ == "__main__":
    main()
