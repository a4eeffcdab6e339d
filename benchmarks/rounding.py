"""How far a change that only reorders floating-point work moves a full run: one cpu-profile run
trained and evaluated by a baseline commit's code and by this checkout's, from the same base
policy, compared.

Issue 18's speed-ups (the decoder's einsum attention, the loss forward in length groups) change
rounding, not what is computed. This measures what that does to a run: whether any training
step's rewards differ (a sampled token flipped), the largest weight difference after
``rl_steps`` steps, and the pass@k of the trained policy on one benchmark (100 problems x the
profile's samples), per problem and averaged; ``base`` evaluates the base policy (the sampler's
rounding alone). Each side runs in a fresh subprocess at one thread,
with its tree's ``psnlib`` on ``PYTHONPATH`` and a data directory of its own that shares the
cached base policy (built first if missing).

    PSNLIB_DATA=<data> python benchmarks/rounding.py    # base, grpo, psn: ~6 minutes on 2 cores
    PSNLIB_DATA=<data> python benchmarks/rounding.py --arms grpo
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from paired_seed import BASELINE, REPO, baseline_tree  # benchmarks/paired_seed.py


def work(arm: str, seed: int, benchmark: str, out: Path) -> None:
    """Train ``arm`` (or load it) and evaluate it; write the weights and the results."""
    import warnings

    from psnlib.replication.compute.evaluation import evaluate_at_profile
    from psnlib.replication.compute.pretrain import base_policy
    from psnlib.replication.compute.runs import train_policy
    from psnlib.replication.plan.profiles import get_profile

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if arm == "base":  # no training: the sampler alone
        model, tokenizer, _ = base_policy("cpu")
        rewards = []
    else:
        model, tokenizer, log = train_policy("cpu", arm, seed)
        rewards = log["reward"].tolist()
    problems, curve = evaluate_at_profile(
        model, tokenizer, get_profile("cpu"), benchmark, seed=0, progress=False
    )
    torch.save(model.state_dict(), out.with_suffix(".pt"))
    result = {
        "reward": rewards,
        "correct": problems["correct"].tolist(),
        "curve": dict(zip(curve["k"].tolist(), curve["pass_at_k"].tolist(), strict=True)),
    }
    out.write_text(json.dumps(result))


def run(tree: Path, data: Path, args: argparse.Namespace, arm: str, out: Path) -> None:
    """One worker with ``tree``'s psnlib and ``data`` as its data directory."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "PSNLIB_DATA": str(data)}
    env["TQDM_DISABLE"] = "1"  # two runs side by side: their progress bars would interleave
    command = [sys.executable, __file__, "--worker", arm, "--out", str(out)]
    command += ["--seed", str(args.seed), "--benchmark", args.benchmark]
    subprocess.run(command, env=env, check=True, cwd=tree, stdout=subprocess.DEVNULL)


def compare(arm: str, today: Path, new: Path) -> None:
    a, b = json.loads(today.read_text()), json.loads(new.read_text())
    wa, wb = torch.load(today.with_suffix(".pt")), torch.load(new.with_suffix(".pt"))
    gap = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    scale = max(w.abs().max().item() for w in wa.values())
    steps = [i for i, (x, y) in enumerate(zip(a["reward"], b["reward"], strict=True)) if x != y]
    moved = sum(x != y for x, y in zip(a["correct"], b["correct"], strict=True))
    print(f"\n{arm}: {len(a['reward'])} training steps")
    print(f"  steps whose mean reward differs : {len(steps)} (first: {steps[0] if steps else '-'})")
    print(f"  largest weight difference       : {gap:.2e} (largest weight {scale:.2f})")
    print(
        f"  correct samples                 : {sum(a['correct'])} vs {sum(b['correct'])}; "
        f"{moved} of {len(a['correct'])} problems differ"
    )
    for k in a["curve"]:
        print(f"  pass@{k:<4} {a['curve'][k]:.4f} vs {b['curve'][k]:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--arms", nargs="+", default=["base", "grpo", "psn"], help="'base': the base policy"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--benchmark", default="countdown-l3")
    parser.add_argument("--baseline", default=BASELINE, help="commit of the other side")
    parser.add_argument("--baseline-dir", type=Path, default=Path("/tmp/psnlib-baseline"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work(args.worker, args.seed, args.benchmark, args.out)
        return
    from psnlib.replication.compute.pretrain import base_policy

    policies = base_policy("cpu")[2].parent  # the shared cache of built policies
    trees = {"today": baseline_tree(args.baseline_dir, args.baseline), "new": REPO}
    print(f"today = {args.baseline}, new = this checkout; cpu profile, seed {args.seed}")
    with tempfile.TemporaryDirectory() as tmp:
        for arm in args.arms:
            outs = {name: Path(tmp, f"{arm}-{name}.json") for name in trees}
            for name in trees:
                cache = Path(tmp, name, "cache")
                cache.mkdir(parents=True, exist_ok=True)
                if not (cache / "policies").exists():
                    (cache / "policies").symlink_to(policies)
            with ThreadPoolExecutor(len(trees)) as pool:  # the two sides side by side
                sides = [
                    pool.submit(run, tree, Path(tmp, name), args, arm, outs[name])
                    for name, tree in trees.items()
                ]
                for side in sides:
                    side.result()
            compare(arm, outs["today"], outs["new"])


if __name__ == "__main__":
    main()
