"""SFT and evaluation do not depend on the torch thread count: the smoke base policy built and
evaluated at 1 and at 2 threads, each in a fresh process, gives bit-identical weights and
results. (Across CPUs the kernels, hence float summation orders, may differ: not tested here.)"""

import json
import os
import subprocess
import sys

import pytest

BUILD_AND_EVALUATE = """
import hashlib, json, sys, torch
from psnlib.replication.compute.evaluation import evaluate_at_profile
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.plan.profiles import get_profile
assert torch.get_num_threads() == int(sys.argv[1])
smoke = get_profile("smoke")
model, tokenizer, _ = base_policy(smoke)
weights = model.state_dict()
digest = hashlib.sha256(b"".join(weights[k].numpy().tobytes() for k in sorted(weights)))
problems, curve = evaluate_at_profile(model, tokenizer, smoke, "countdown-l1", progress=False)
table = problems.drop(columns=["numbers"]).to_dict(orient="list")
curve = curve.to_dict(orient="list")
print(json.dumps({"weights": digest.hexdigest(), "curve": curve, "problems": table}))
"""


@pytest.mark.slow
def test_sft_and_evaluation_are_bit_identical_at_one_and_two_threads(tmp_path):
    results = []
    for threads in (1, 2):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        env |= {"PSNLIB_DATA": str(tmp_path / str(threads)), "PYTHONPATH": ":".join(sys.path)}
        done = subprocess.run(
            [sys.executable, "-c", BUILD_AND_EVALUATE, str(threads)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    one, two = results
    assert one["weights"] == two["weights"]
    assert one["curve"] == two["curve"] and one["problems"] == two["problems"]
