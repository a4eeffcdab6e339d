"""The command line (``python -m psnlib``) and the accelerate configs it is launched with."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate.commands.config.config_args import ClusterConfig
from accelerate.commands.launch import launch_command_parser
from safetensors.torch import load_file

from psnlib.models import META_FILE, build_tokenizer, save_policy, tiny_policy
from psnlib.replication.compute import model_checks
from psnlib.replication.compute.cli import main, parse_train, plan_train
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.runs import rl_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs" / "accelerate"


def test_only_the_trainer_settings_given_become_overrides(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("arm: grpo\nlearning_rate: 0.05\nnum_generations: 2\nenv:\n  PSNLIB_X: '1'\n")
    script, overrides = parse_train(
        ["--config", str(config), "--learning_rate", "0.1", "--use_tis", "false", "--seed", "3"]
    )
    assert (script.profile, script.arm, script.model, script.dataset) == ("cpu", "grpo", None, None)
    # the command line wins over the file; nothing that was not given appears
    assert overrides == {"learning_rate": 0.1, "num_generations": 2, "use_tis": False, "seed": 3}
    assert os.environ.pop("PSNLIB_X") == "1"


def test_train_resolves_profile_then_arm_then_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(model_checks, "ask_hub", lambda name: None)  # the hub: org/m exists
    run = plan_train(
        ["--profile", "smoke", "--arm", "psn", "--output_dir", str(tmp_path), "--sigma", "0.02"]
        + ["--noise_targets", "mlp", "attn", "--seed", "1"]
    )
    expected = rl_config(
        get_profile("smoke"), "psn", 1, tmp_path, sigma=0.02, noise_targets=["mlp", "attn"]
    )
    assert run.config.to_dict() == expected.to_dict()
    assert (run.run.profile.name, run.run.arm.name, run.run.seed) == ("smoke", "psn", 1)
    run = plan_train(["--profile", "paper", "--output_dir", str(tmp_path), "--model", "org/m"])
    profile = run.run.profile
    assert profile.base.name_or_path == "org/m" and profile.rl_dataset != "countdown"
    assert run.config.learning_rate == 3e-7  # the paper profile's


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--profile", "laptop"], r"unknown profile 'laptop'; allowed: .*'smoke'"),
        (["train", "--arm", "ppo"], r"unknown arm 'ppo'; allowed: .*'psn'"),
        (["train", "--model", "./no/such/dir"], r"--model './no/such/dir': no such model dir"),
        (
            ["train", "--dataset", "gsm8k"],
            r"unknown dataset .gsm8k.; allowed: countdown, countdown-dense, aime",
        ),
        (["train", "--noise_scope", "token"], r"unknown noise scope 'token'; allowed: step"),
        (["eval", "--model", "missing"], r"--model 'missing': no such policy directory"),
        (["eval", "--model", ".", "--benchmarks", "aime23"], r"\['aime23'\]; allowed: countdown"),
    ],
)
def test_bad_input_fails_with_the_value_and_what_is_allowed(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code.startswith(f"psnlib {argv[0]}: error:")
    assert re.search(message, exit_.value.code), exit_.value.code


@pytest.mark.parametrize("name", ["single_process", "multi_gpu", "zero2", "zero3"])
def test_accelerate_configs_parse_with_valid_keys(name):
    config = ClusterConfig.from_yaml_file(CONFIGS / f"{name}.yaml")  # unknown keys raise
    launch_options = {action.dest for action in launch_command_parser()._actions}
    assert set(config.deepspeed_config or {}) <= launch_options
    expected = {
        "single_process": ("NO", 1, None),
        "multi_gpu": ("MULTI_GPU", 8, None),
        "zero2": ("DEEPSPEED", 8, 2),
        "zero3": ("DEEPSPEED", 8, 3),
    }[name]
    stage = (config.deepspeed_config or {}).get("zero_stage")
    assert (config.distributed_type.value, config.num_processes, stage) == expected


def test_accelerate_launch_trains_and_saves_a_policy(tmp_path):
    """``accelerate launch -m psnlib train`` end to end, as a user runs it (about 30 s)."""
    tokenizer = build_tokenizer()
    save_policy(tiny_policy(size="smoke", tokenizer=tokenizer, seed=0), tokenizer, tmp_path / "p")
    out = tmp_path / "out"
    env = {**os.environ, "PSNLIB_DATA": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "accelerate.commands.launch"]
    args = ["--profile", "smoke", "--arm", "psn", "--model", str(tmp_path / "p")]
    args += ["--output_dir", str(out), "--max_steps", "2", "--save_strategy", "no"]
    # A random policy earns no reward, so the weights move by weight decay alone: what this
    # checks is that the optimizer stepped the very model that was saved.
    args += ["--weight_decay", "0.1", "--learning_rate", "0.01"]
    done = subprocess.run(
        [*launch, "--config_file", str(CONFIGS / "single_process.yaml"), "-m", "psnlib", "train"]
        + args,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"trained policy: {out / 'policy'}" in done.stdout
    meta = json.loads((out / "policy" / META_FILE).read_text())
    assert [row["step"] for row in meta["log"]] == [1, 2]
    assert meta["settings"]["sigma"] == 0.003 and meta["settings"]["learning_rate"] == 0.01
    assert all("psn/kl_proxy" in row and "tis/mean" in row for row in meta["log"])
    before = load_file(tmp_path / "p" / "model.safetensors")
    after = load_file(out / "policy" / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[name], after[name]) for name in before)
