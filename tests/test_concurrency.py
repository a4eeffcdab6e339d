"""Two processes train the same run at once: the second waits for the first (it holds the run's
lock) and then loads what the first finished, so the cache holds exactly the uninterrupted run.

The first process is held inside its training until the second one has said that it waits for
it, so the two overlap whatever the machine's speed: the race of issue 29 (the second started
0.3-0.65 s after the first, resumed from a checkpoint the first then rotated away, and cached a
run of steps that never happened)."""

import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import time

import pytest
import torch

from psnlib.models import load_saved_policy
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TIMES = ("time", "per_second", "runtime")  # wall-clock entries of a log: never equal

TRAIN = """
import hashlib, json, sys, time
from pathlib import Path
import torch
from psnlib.replication.compute import runs

training, go = sys.argv[1:3]
if training:  # the first process: say that it trains, then wait to be let go
    fit = runs.fit
    def held(*args):
        Path(training).write_text("training")
        while not Path(go).exists():
            time.sleep(0.05)
        return fit(*args)
    runs.fit = held
torch.set_num_threads(1)
model, _, log = runs.train_policy("smoke", "psn", 0)
weights = model.state_dict()
digest = hashlib.sha256(b"".join(weights[k].numpy().tobytes() for k in sorted(weights)))
print(json.dumps({"log": log.to_dict(orient="records"), "weights": digest.hexdigest()}))
"""


def digest(model: torch.nn.Module) -> str:
    weights = model.state_dict()
    data = b"".join(weights[k].numpy().tobytes() for k in sorted(weights))
    return hashlib.sha256(data).hexdigest()


def steps(log: list[dict]) -> list[dict]:
    """A log's rows without wall-clock entries, NaN made comparable."""
    return [
        {k: "nan" if v != v else v for k, v in row.items() if not any(t in k for t in TIMES)}
        for row in log
    ]


def wait_for_line(stream, text: str, seconds: float) -> list[str]:
    """The lines of ``stream`` up to one that holds ``text``; all it wrote if it ends first or
    ``seconds`` pass."""
    lines, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not select.select([stream], [], [], 0.1)[0]:
            continue
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            break
    return lines


def test_two_processes_training_one_run_cache_the_uninterrupted_run(tmp_path, monkeypatch):
    data, reference = tmp_path / "data", tmp_path / "reference"
    monkeypatch.setenv("PSNLIB_DATA", str(data))
    base_policy("smoke")  # built once, so both processes start at once on the RL run
    shutil.copytree(data, reference)
    training, go = tmp_path / "training", tmp_path / "go"
    env = {**os.environ, "PSNLIB_DATA": str(data), "OMP_NUM_THREADS": "1"}
    env |= {"PYTHONPATH": ":".join(sys.path), "PYTHONUNBUFFERED": "1"}

    def start(*args: str) -> subprocess.Popen:
        command = [sys.executable, "-c", TRAIN, *args]
        return subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    first = start(str(training), str(go))
    try:
        deadline = time.monotonic() + 300
        while not training.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert training.exists(), first.stderr.read()[-2000:]
        second = start("", "")
        said = wait_for_line(second.stderr, f"waiting for pid {first.pid} ", seconds=300)
    finally:
        go.write_text("go")  # the first trains on from here
    out_first, err_first = first.communicate(timeout=600)
    out_second, err_second = second.communicate(timeout=600)
    assert first.returncode == 0, err_first[-2000:]
    assert second.returncode == 0, (err_second, said)
    assert said and f"waiting for pid {first.pid} " in said[-1], "".join(said)[-2000:]
    assert "training the run smoke psn seed 0" in said[-1]  # the owner named, and its work
    one, two = (json.loads(out.strip().splitlines()[-1]) for out in (out_first, out_second))

    # The run trained alone, uninterrupted, in another cache: same code, same arithmetic.
    monkeypatch.setenv("PSNLIB_DATA", str(reference))
    model, _, log = train_policy("smoke", "psn", 0)
    expected = steps(log.to_dict(orient="records"))
    assert [row["step"] for row in expected] == [1, 2, 3, 4]
    assert steps(one["log"]) == steps(two["log"]) == expected
    assert one["weights"] == two["weights"] == digest(model)
    # The cache holds it, and nothing else: no work directory, no lock left behind.
    runs_dir = data / "cache" / "runs" / "smoke"
    (cached,) = runs_dir.iterdir()
    meta = json.loads((cached / "psnlib_meta.json").read_text())
    assert steps(meta["log"]) == expected and digest(load_saved_policy(cached)[0]) == digest(model)
