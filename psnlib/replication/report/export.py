"""``python -m psnlib.replication.report.export``: the generated Countdown splits as files a reader
can open.

Writes ``data/countdown/<benchmark>.jsonl`` for the seven benchmarks, the problems a ``cpu``
evaluation draws (``eval_problems`` of each, seed ``EVAL_SEED``), and ``rl-train-seed0.jsonl``,
the ``cpu`` profile's RL training problems of seed 0. One JSON object a line:
``{"prompt": "7 3 5 4->22:", "numbers": [7, 3, 5, 4], "target": 22}``. The splits are generated
in code (``psnlib.tasks.splits``); these files are a copy to read, and a test checks that
regenerating them gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from datasets import Dataset

from psnlib.io import atomic_write_text
from psnlib.paths import ROOT
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.variants import EVAL_SEED
from psnlib.tasks.splits import BENCHMARKS, load_benchmark, rl_train_set

DATA_DIR = ROOT / "data" / "countdown"
PROFILE = "cpu"


def to_jsonl(dataset: Dataset) -> str:
    """One ``{"prompt", "numbers", "target"}`` object a line."""
    rows = zip(dataset["prompt"], dataset["numbers"], dataset["target"], strict=True)
    return "".join(json.dumps({"prompt": p, "numbers": n, "target": t}) + "\n" for p, n, t in rows)


def split_files(profile: str = PROFILE) -> dict[str, Dataset]:
    """File name -> problems: each benchmark as evaluated, and the RL training set of seed 0."""
    p = get_profile(profile)
    files = {f"{b}.jsonl": load_benchmark(b, p.eval_problems, EVAL_SEED) for b in BENCHMARKS}
    return files | {"rl-train-seed0.jsonl": rl_train_set(p.rl_train_problems, seed=0)}


def write_splits(directory: Path = DATA_DIR, profile: str = PROFILE) -> list[Path]:
    """Write ``split_files(profile)`` to ``directory`` (atomically); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, dataset in split_files(profile).items():
        atomic_write_text(directory / name, to_jsonl(dataset))
        paths.append(directory / name)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="where the files go")
    args = parser.parse_args(argv)
    for path in write_splits(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
