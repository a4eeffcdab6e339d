"""Bad input and damaged caches: a one-line error naming the value or file before any work, or,
for a damaged cache entry, a warning naming the file and the entry recomputed. Also the run
directory of the command line (its recorded settings), counts, and bf16 on a CPU.

Bad input is tried at the command line (``python -m psnlib train|eval``, a ``--config`` file),
``python -m psnlib.replication.reproduce``, notebook parameters (as papermill sets them) and the
Python API (``psnlib.replication.plan.experiments``); the ``no_work`` fixture fails a test that
loads, trains, prepares or runs anything."""

import json
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from conftest import did_work
from datasets import Dataset
from huggingface_hub.errors import RepositoryNotFoundError

from psnlib import evaluate, sampling
from psnlib.evaluate import evaluate_policy
from psnlib.models import META_FILE, build_tokenizer, save_policy, tiny_policy
from psnlib.replication import reproduce
from psnlib.replication.analysis import summaries
from psnlib.replication.compute import cli, model_checks, pretrain, runs
from psnlib.replication.compute.cli import main
from psnlib.replication.compute.pretrain import base_policy
from psnlib.replication.compute.runs import train_policy
from psnlib.replication.compute.store import ResultStore
from psnlib.replication.plan import experiments
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.plan.runs import rl_config, run_dir
from psnlib.replication.report import notebook
from psnlib.tasks import task_reward
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
SMOKE_REWARD = task_reward(get_profile("smoke").rl_dataset).__qualname__


def fails(argv: list[str], message: str, capsys) -> str:
    """``python -m psnlib ARGV`` ends with one line naming the problem, and prints nothing;
    returns that line."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert text.startswith(f"psnlib {argv[0]}: error:") and re.search(message, text), text
    assert capsys.readouterr().out == ""
    return text


# ----------------------------------------------------------------------- run directories


def test_cli_refuses_a_run_directory_with_other_settings_and_never_trains_past_max_steps(
    tmp_path, data, capsys
):
    out = tmp_path / "run"
    run = ["train", "--profile", "smoke", "--arm", "psn", "--output_dir", str(out)]
    main(run)
    steps = get_profile("smoke").rl_steps
    meta = json.loads((out / "policy" / META_FILE).read_text())
    assert [row["step"] for row in meta["log"]] == list(range(1, steps + 1))
    capsys.readouterr()
    # Other settings into the same directory: refused, naming each difference, before work.
    other = [*run, "--sigma", "0.05", "--learning_rate", "0.01"]
    fails(other, r"other settings \(learning_rate .* -> 0\.01; sigma 0\.003 -> 0\.05\)", capsys)
    recorded = json.loads((out / cli.RUN_FILE).read_text())
    assert recorded["settings"]["sigma"] == 0.003 and recorded["arm"] == "psn"
    # The same settings again: the finished run, not one step more.
    main(run)
    again = json.loads((out / "policy" / META_FILE).read_text())
    assert again["log"] == meta["log"]
    assert not (out / f"checkpoint-{steps + 1}").exists()
    # Starting afresh where the user asks: the new settings are the ones trained and logged.
    main([*other, "--overwrite_output_dir", "true"])
    fresh = json.loads((out / "policy" / META_FILE).read_text())
    assert fresh["settings"]["sigma"] == 0.05 and fresh["log"][0]["psn/sigma"] == 0.05
    assert json.loads((out / cli.RUN_FILE).read_text())["settings"]["learning_rate"] == 0.01


def test_cli_refuses_an_unrecorded_run_directory(tmp_path, capsys):
    (tmp_path / "checkpoint-5").mkdir()
    argv = ["train", "--profile", "smoke", "--output_dir", str(tmp_path)]
    fails(argv, r"holds \['checkpoint-5'\] of an unrecorded run; pass --overwrite_output", capsys)


def test_a_checkpoint_at_max_steps_is_loaded_not_trained_on(data, monkeypatch):
    """A kill between the last checkpoint and the cache save: the run is finished from its
    checkpoint, with max_steps rows under its max_steps key."""
    from psnlib.replication.compute import runs

    real_save = runs.save_run
    monkeypatch.setattr(runs, "save_run", lambda *a, **k: pytest.fail("killed"))
    with pytest.raises(pytest.fail.Exception):
        train_policy("smoke", "grpo", 0)
    monkeypatch.setattr(runs, "save_run", real_save)
    _, _, log = train_policy("smoke", "grpo", 0)
    assert list(log["step"]) == list(range(1, get_profile("smoke").rl_steps + 1))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max_steps", "0"], r"max_steps .* >= 1.*got 0"),
        (["--max_steps", "-3"], r"max_steps .* >= 1.*got -3"),
        (["--per_device_train_batch_size", "0"], r"per_device_train_batch_size must be >= 1"),
        (["--max_completion_length", "-1"], r"max_completion_length must be >= 1, got -1"),
        (["--sigmaa", "0.1"], r"unrecognized arguments: --sigmaa 0.1 \(did you mean --sigma"),
        (["--config", "/no/such.yaml"], r"--config /no/such.yaml: cannot read it"),
        (["--model", "/"], r"--model '/' is a directory without config.json"),
    ],
)
def test_bad_train_arguments_fail_in_one_line_before_work(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(runs, "base_policy", lambda *a: pytest.fail("did work"))
    fails(["train", "--profile", "smoke", *argv], message, capsys)


def test_malformed_config_file_fails_in_one_line(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("arm: psn\nsigma: [0.1\n")
    fails(["train", "--config", str(config)], rf"--config {config}: not valid YAML at line", capsys)
    fails(["eval", "--model", ".", "--seedd", "1"], r"--seedd 1 \(did you mean --seed\?\)", capsys)
    fails(
        ["eval", "--model", "/"], r"--model '/': no such policy directory \(one with config", capsys
    )


def test_negative_counts_are_refused_in_profiles_and_runs(data):
    smoke = get_profile("smoke")
    for name in ("rl_steps", "rl_prompts_per_step", "num_generations", "eval_samples"):
        with pytest.raises(ValueError, match=rf"profile 'smoke': {name} must be an integer >= 1"):
            smoke.with_overrides(**{name: -3})
    with pytest.raises(ValueError, match="rl_steps must be an integer >= 1, got 0"):
        smoke.with_overrides(rl_steps=0)
    with pytest.raises(ValueError, match=r"ks must be integers >= 1"):
        smoke.with_overrides(ks=(0, 1))
    with pytest.raises(ValueError, match=r"max_steps of a run must be an integer >= 1, got 0"):
        rl_config(get_profile("smoke"), "psn", 0, data, max_steps=0)


# ----------------------------------------------------------------------------- bf16 on CPU


def small_config(tmp_path, **overrides) -> PSNGRPOConfig:
    """TRL's defaults but the sizes: bf16 is not given."""
    sizes = {"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 8}
    return PSNGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, max_steps=1, report_to="none", **sizes, **overrides
    )


def test_trl_default_precision_trains_on_a_cpu(tmp_path):
    args = small_config(tmp_path)
    tokenizer = build_tokenizer()
    trainer = PSNGRPOTrainer(
        model=tiny_policy(size="smoke", tokenizer=tokenizer, seed=0),
        reward_funcs=lambda completions, **kw: [float(len(c)) for c in completions],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["7 3 5 4->22:", "1 2 3 4->10:"]}),
        processing_class=tokenizer,
    )
    trainer.train()  # TRL's bf16 on a CPU crashed in the rollout sampler
    assert trainer.state.global_step == 1
    assert args.bf16 is False  # TRL's default, bf16=True, is meant for GPUs


def test_bf16_asked_for_on_a_cpu_is_refused_at_config_time(tmp_path):
    with pytest.raises(ValueError, match=r"bf16=True .* not supported on a CPU.*set bf16=False"):
        small_config(tmp_path, bf16=True)


# ------------------------------------------------------------------------------ bad input


def test_k_above_n_is_an_error_not_a_dropped_k(monkeypatch):
    monkeypatch.setattr(evaluate, "sample_prompts", lambda *a, **k: pytest.fail("did work"))
    data = Dataset.from_dict({"prompt": ["1 2->3:"], "numbers": [[1, 2]], "target": [3]})
    with pytest.raises(ValueError, match=r"ks \[8\] exceed n=4 samples per problem"):
        evaluate_policy(None, build_tokenizer(), data, n=4, ks=(1, 2, 8))
    with pytest.raises(ValueError, match=r"n must be >= 1, got 0"):
        evaluate_policy(None, build_tokenizer(), data, n=0, ks=(1,))


def test_a_dataset_without_prompts_fails_when_the_trainer_is_built(tmp_path):
    tokenizer = build_tokenizer()
    with pytest.raises(ValueError, match=r"needs a 'prompt' column .* it has \['question'\]"):
        PSNGRPOTrainer(
            model=tiny_policy(size="smoke", tokenizer=tokenizer, seed=0),
            reward_funcs=lambda completions, **kw: [0.0] * len(completions),
            args=small_config(tmp_path),
            train_dataset=Dataset.from_dict({"question": ["7 3 5 4->22:"]}),
            processing_class=tokenizer,
        )


# ------------------------------------------------------------------------ damaged caches


def truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def test_a_damaged_result_part_is_named_and_recomputed(tmp_path):
    store = ResultStore(tmp_path)
    table = {"t": pd.DataFrame({"a": [1, 2]})}
    store.save("l3", table)
    truncate(store.part_path("l3"))
    with pytest.warns(UserWarning, match=re.escape(str(store.part_path("l3")))):
        again = store.cached("l3", lambda: table)
    assert again["t"]["a"].tolist() == [1, 2]
    assert store.load("l3")["t"]["a"].tolist() == [1, 2]  # stored again, whole


@pytest.mark.parametrize("damaged", [META_FILE, "model.safetensors"])
def test_a_damaged_cached_run_is_named_and_retrained(data, damaged):
    model, _, log = train_policy("smoke", "grpo", 0)
    path = run_dir(get_profile("smoke"), "grpo", 0, {}, SMOKE_REWARD)
    truncate(path / damaged)
    with pytest.warns(UserWarning, match=rf"damaged cached run {re.escape(str(path))}"):
        again, _, log2 = train_policy("smoke", "grpo", 0)
    assert log2["reward"].tolist() == log["reward"].tolist()
    pairs = zip(model.parameters(), again.parameters(), strict=True)
    assert all(torch.equal(p, q) for p, q in pairs)


def test_a_damaged_policy_is_named_and_rebuilt(data):
    _, _, path = base_policy("smoke")
    truncate(path / "model.safetensors")
    with pytest.warns(UserWarning, match=rf"damaged policy {re.escape(str(path))}"):
        _, _, again = base_policy("smoke")
    assert again == path and (path / "model.safetensors").stat().st_size > 1000


def test_a_damaged_timing_log_is_named_and_started_afresh(tmp_path):
    timing = tmp_path / "reproduce_timing.json"
    timing.write_text('[{"stage": "01_testbed", "seconds": 3}, {"sta')
    with pytest.warns(UserWarning, match=re.escape(str(timing))):
        reproduce._record(timing, {"stage": "02", "seconds": 1})
    assert json.loads(timing.read_text()) == [{"stage": "02", "seconds": 1}]


def test_the_package_versions_are_recorded_with_the_figures(tmp_path):
    reproduce.record_versions(tmp_path)
    versions = json.loads((tmp_path / "versions.json").read_text())
    assert versions["torch"] == torch.__version__
    assert {"python", "transformers", "trl", "datasets"} <= set(versions)


def test_trl_checkpointing_default_is_kept_without_a_future_warning(tmp_path):
    """TRL defaults ``gradient_checkpointing`` to True; transformers 5 warns at every config that
    the name is deprecated. The config keeps TRL's setting under the new name, silently, and an
    explicit ``gradient_checkpointing`` still decides."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        args = small_config(tmp_path)
        off = small_config(tmp_path, gradient_checkpointing=False)
    assert args.activation_checkpointing is True and args.gradient_checkpointing is True
    assert off.activation_checkpointing is False and off.gradient_checkpointing is False


# ------------------------------------------- bad input everywhere: one line, before any work


def one_line(error: BaseException | str) -> str:
    text = str(error)
    assert "\n" not in text, text
    return text


def a_file(tmp_path: Path) -> Path:
    """A plain file: nothing can be made under it, not even by root."""
    path = tmp_path / "a_file"
    path.write_text("x")
    return path


def model_dir(tmp_path: Path, damage: str | None = None) -> Path:
    """A saved smoke-size policy directory, with one kind of damage."""
    path = tmp_path / "model"
    tokenizer = build_tokenizer()
    save_policy(tiny_policy(size="smoke", tokenizer=tokenizer, seed=0), tokenizer, path)
    if damage == "config not JSON":
        (path / "config.json").write_text('{"model_type": "qwen2", ')
    elif damage == "no weights":
        (path / "model.safetensors").unlink()
    elif damage == "no model_type":
        (path / "config.json").write_text("{}")
    elif damage == "unknown model_type":
        (path / "config.json").write_text('{"model_type": "nosuchfamily"}')
    elif damage == "no tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (path / name).unlink(missing_ok=True)
    return path


TRAIN_CASES = [  # the trainer settings' checks (PSNGRPOConfig) and the command line's own
    (["--seed", "-1"], r"seed.*-1"),
    (["--seed", "1.5"], r"--seed: invalid int value: '1\.5'"),
    (["--learning_rate", "nan"], r"learning_rate.*nan"),
    (["--learning_rate", "-1"], r"learning_rate.*-1"),
    (["--weight_decay", "nan"], r"weight_decay.*nan"),
    (["--temperature", "nan"], r"temperature.*nan"),
    (["--beta", "nan"], r"beta.*nan"),
    (["--sigma", "1e30"], r"sigma.*1e\+30"),
    (["--tis_cap", "1e308"], r"tis_cap.*1e\+308"),
    (["--arm", "psn_kl", "--sigma_max", "1e30"], r"sigma_max.*1e\+30"),
    (["--arm", "psn_kl", "--kl_factor", "nan"], r"kl_factor.*nan"),
    (["--use_vllm", "true"], r"use_vllm.*vLLM|vLLM.*use_vllm"),
    (["--max_steps", "two"], r"--max_steps\S*: invalid int value: 'two'"),
    (["--overwrite_output_dir", "maybe"], r"Truthy value expected: got maybe"),
    (["--noise_targets", "nosuchlayer"], r"noise target 'nosuchlayer' matches no parameter of"),
    (["--noise_targets", "mlp", "("], r"target '\(' is neither a site .* nor a valid regex"),
    (["--sigma_scheduler", "nosuch"], r"unknown sigma_scheduler 'nosuch'; allowed: fixed"),
    (["--advantage_mode", "nosuch"], r"unknown advantage_mode 'nosuch'; allowed: grpo"),
    (["--prefix_prob", "1.5"], r"prefix_prob must be in \[0, 1\], got 1\.5"),
    (["--profile", "nosuch"], r"unknown profile 'nosuch'; allowed"),
    (["--arm", "nosuch"], r"unknown arm 'nosuch'; allowed"),
    (["--dataset", "nosuch"], r"unknown dataset 'nosuch'; allowed: countdown"),
    (["--output_dir", ""], r"--output_dir is empty"),
    (["--trust_remote_code", "true"], r"not supported by psnlib train \(--trust_remote_code:"),
    (["--model_init_kwargs", '{"dtype": "float16"}'], r"not supported .*\(--model_init_kwargs:"),
    (["--resume_from_checkpoint", "x"], r"not supported .*\(--resume_from_checkpoint: a run"),
    (["--model", ""], r"--model is empty"),
    (["--model", "not a hub id!"], r"--model 'not a hub id!': no such model directory"),
    (["--model", "a/b/c"], r"--model 'a/b/c': no such model directory"),
]


@pytest.mark.parametrize(
    ("argv", "message"), TRAIN_CASES, ids=[" ".join(a) for a, _ in TRAIN_CASES]
)
def test_bad_train_settings_are_one_line_errors_before_any_work(argv, message, no_work, capsys):
    if argv[:1] == ["--use_vllm"] and sampling.vllm is not None:
        pytest.skip("vLLM is installed here")
    out = no_work / "run"
    if "--output_dir" not in argv:
        argv = [*argv, "--output_dir", str(out)]
    fails(["train", "--profile", "smoke", *argv], message, capsys)
    assert not (out / cli.RUN_FILE).exists()


MODEL_DAMAGE = [
    ("config not JSON", r"config\.json is not valid JSON"),
    ("no weights", r"holds no weights \(\*\.safetensors\)"),
    ("no model_type", r"config\.json names no model_type"),
    ("unknown model_type", r"transformers cannot read its config"),
    ("no tokenizer", r"holds no tokenizer"),
]


@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize(("damage", "message"), MODEL_DAMAGE, ids=[d for d, _ in MODEL_DAMAGE])
def test_a_damaged_model_directory_is_named_before_loading(
    command, damage, message, no_work, capsys
):
    path = model_dir(no_work, damage)
    fails([command, "--profile", "smoke", "--model", str(path)], rf"'{path}'.*{message}", capsys)


def test_a_missing_local_model_is_not_taken_for_a_hub_id(no_work, monkeypatch, capsys):
    """``runs/nosuch`` has one slash, like 'org/name'; ``runs/`` is here, so it is a path."""
    monkeypatch.chdir(no_work)
    (no_work / "runs").mkdir()
    monkeypatch.setattr(model_checks, "ask_hub", did_work)
    argv = ["train", "--profile", "smoke", "--model", "runs/nosuch"]
    fails(argv, r"--model 'runs/nosuch': no such model directory \(runs/ is a local dir", capsys)
    fails([*argv[:-1], str(a_file(no_work))], r"a_file': no such model directory", capsys)


def fake_hub(state: str) -> Callable[[str], None]:
    """A stand-in for a question to the hub (``model_checks.ask_hub``, ``ask_hub_data_set``) in
    ``state``: "offline" (asking fails the test), "unreachable" or "not found"."""

    def ask(name: str) -> None:
        if state == "offline":
            pytest.fail("asked the hub in offline mode")
        if state == "unreachable":
            raise ConnectionError("Name or service not known")
        response = SimpleNamespace(headers={}, request=None)
        raise RepositoryNotFoundError("404 Repository Not Found", response=response)

    return ask


@pytest.mark.parametrize(
    ("hub", "message"),
    [
        (
            "offline",
            r"--model 'org/nosuch' is not a local directory and not in the hub cache, "
            r"and HF_HUB_OFFLINE is set",
        ),
        (
            "unreachable",
            r"--model 'org/nosuch' is not in the hub cache and the hub cannot be "
            r"reached \(ConnectionError\)",
        ),
        ("not found", r"--model 'org/nosuch': no such model on the hub"),
    ],
)
def test_a_hub_id_that_cannot_be_loaded_fails_at_once(hub, message, no_work, monkeypatch, capsys):
    monkeypatch.setattr(model_checks, "ask_hub", fake_hub(hub))
    if hub == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    fails(["train", "--profile", "smoke", "--model", "org/nosuch"], message, capsys)
    assert time.perf_counter() - start < 5  # not a minute of retries


def test_a_profiles_hub_base_policy_is_checked_too(no_work, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub = model_checks.huggingface_hub
    monkeypatch.setattr(hub, "try_to_load_from_cache", lambda *a, **k: None)
    message = r"profile 'paper''s base policy 'Qwen/Qwen2\.5-Math-7B' is not a local directory"
    fails(["train", "--profile", "paper", "--output_dir", str(no_work / "run")], message, capsys)


def test_noise_targets_are_checked_on_a_model_directory_before_loading(no_work, capsys):
    path = model_dir(no_work)
    argv = ["train", "--profile", "smoke", "--model", str(path), "--noise_targets", "nosuch"]
    fails(argv, r"noise target 'nosuch' matches no parameter of Qwen2ForCausalLM", capsys)


@pytest.mark.parametrize("command", ["train", "eval", "train --output_dir"])
def test_a_directory_that_cannot_be_written_is_named_before_any_work(
    command, no_work, monkeypatch, capsys
):
    blocked = a_file(no_work) / "sub"
    argv = [*command.split()[:1], "--profile", "smoke"]
    if command == "eval":
        argv += ["--model", str(model_dir(no_work))]
    if command == "train --output_dir":
        argv += ["--output_dir", str(blocked)]
        message = rf"--output_dir '{blocked}' cannot be made: '{blocked.parent}' is a file"
    else:
        monkeypatch.setenv("PSNLIB_DATA", str(blocked))
        argv += ["--output_dir", str(no_work / "run")] if command == "train" else []
        message = rf"PSNLIB_DATA '{blocked}' cannot be made: '{blocked.parent}' is a file"
    fails(argv, message, capsys)


CONFIG_CASES = [
    ("output_dir: [1, 2]", r"output_dir: \[1, 2\] is not of type str \| None"),
    ('output_dir: ""', r"--output_dir is empty"),
    ("seed: [0]", r"seed: \[0\] is not of type int"),
    ("sigma: true", r"sigma: True is not of type float"),
    ("use_tis: 1", r"use_tis: 1 is not of type bool"),
    ("noise_targets: [1]", r"noise_targets: \[1\] is not of type list\[str\]"),
    ("profile: 3", r"profile: 3 is not of type str"),
    ("learning_rate: abc", r"--learning_rate\S*: invalid float value: 'abc'"),
    ("env: [1]", r"env: \[1\] is not a mapping"),
    ("trust_remote_code: true", r"not supported by psnlib train \(--trust_remote_code"),
]


@pytest.mark.parametrize(("yaml_text", "message"), CONFIG_CASES, ids=[c for c, _ in CONFIG_CASES])
def test_a_config_file_value_of_the_wrong_type_is_named(yaml_text, message, no_work, capsys):
    config = no_work / "run.yaml"
    config.write_text(f"profile: smoke\n{yaml_text}\n")
    fails(["train", "--config", str(config)], message, capsys)
    assert not (no_work / "[1, 2]").exists() and not Path("[1, 2]").exists()


EVAL_CASES = [
    (["--seed", "-1"], r"--seed must be an integer >= 0, got -1"),
    (["--vllm_gpu_memory_utilization", "1.5"], r"in \(0, 1\], got 1\.5"),
    (["--vllm_gpu_memory_utilization", "nan"], r"in \(0, 1\], got nan"),
    (["--vllm_tensor_parallel_size", "0"], r"--vllm_tensor_parallel_size must be >= 1, got 0"),
    (["--run_key", ""], r"--run_key is empty"),
    (["--use_vllm", "true"], r"needs vLLM: pip install"),
    (["--benchmarks", "nosuch"], r"unknown benchmark\(s\) \['nosuch'\]; allowed"),
    (["--profile", "nosuch"], r"unknown profile 'nosuch'"),
]


@pytest.mark.parametrize(("argv", "message"), EVAL_CASES, ids=[" ".join(a) for a, _ in EVAL_CASES])
def test_bad_eval_arguments_are_one_line_errors_before_loading(argv, message, no_work, capsys):
    if argv[:1] == ["--use_vllm"] and sampling.vllm is not None:
        pytest.skip("vLLM is installed here")
    fails(
        ["eval", "--model", str(model_dir(no_work)), "--profile", "smoke", *argv], message, capsys
    )


def reproduce_fails(argv: list[str], message: str, capsys) -> None:
    """``python -m psnlib.replication.reproduce ARGV`` ends with one line naming the problem,
    printing nothing (no "0 notebook(s)")."""
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(argv)
    text = one_line(exit_.value.code)
    assert text.startswith("psnlib.replication.reproduce: error: ") and re.search(message, text), (
        text
    )
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "nosuch"], r"unknown profile 'nosuch'; allowed"),
        (["--workers", "-1"], r"--workers must be >= 0, got -1"),
        (["--only", "nosuch"], r"--only \['nosuch'\] matches no notebook in .*; notebooks: 00_"),
        (["--only", "00_quick", "nosuch"], r"--only \['nosuch'\] matches no notebook"),
        (["--notebooks", "/nonexistent"], r"--notebooks '/nonexistent' is not a directory"),
        (["--notebooks", "{empty}"], r"--notebooks '.*empty' holds no notebook"),
        (["--notebooks", "{file}"], r"--notebooks '.*a_file' is not a directory"),
        (["--out", "{file}/out"], r"--out '.*a_file/out' cannot be made: '.*a_file' is a file"),
    ],
)
def test_bad_reproduce_arguments_are_one_line_errors_before_the_prepare_stage(
    argv, message, no_work, capsys
):
    (no_work / "empty").mkdir()
    places = {"{empty}": str(no_work / "empty"), "{file}": str(a_file(no_work))}
    argv = [re.sub(r"\{\w+\}", lambda m: places[m.group()], a) for a in argv]
    out = [] if "--out" in argv else ["--out", str(no_work / "out")]
    reproduce_fails(["--profile", "smoke", *out, *argv], message, capsys)
    assert not (no_work / "out").exists()  # no figures or runs directory made


def test_reproduce_refuses_a_data_directory_it_cannot_write(no_work, monkeypatch, capsys):
    blocked = a_file(no_work) / "data"
    monkeypatch.setenv("PSNLIB_DATA", str(blocked))
    argv = ["--profile", "smoke", "--out", str(no_work / "out")]
    reproduce_fails(argv, rf"PSNLIB_DATA '{blocked}' cannot be made", capsys)


BAD_PARAMETERS = [
    ("seeds", "(0, 1)", r"got '\(0, 1\)'; with papermill pass a list: -y \"seeds: \[0, 1\]\""),
    ("seeds", [0, -1], r"seeds must be None or a non-empty list .* got \[0, -1\]"),
    ("seeds", [0.5], r"integers >= 0, got \[0\.5\]"),
    ("seeds", [], r"non-empty list or tuple of integers >= 0, got \[\]"),
    ("seeds", 3, r"integers >= 0, got 3$"),
    ("seeds", [True], r"integers >= 0, got \[True\]"),
    ("profile", "nosuch", r"unknown profile 'nosuch'; allowed"),
    ("profile", 3, r"notebook parameter profile must be a profile name, got 3"),
    ("figures_dir", 3, r"notebook parameter figures_dir must be None or a path, got 3"),
    ("metrics_path", [1], r"notebook parameter metrics_path must be None or a path, got \[1\]"),
]


@pytest.mark.parametrize(
    ("name", "value", "message"), BAD_PARAMETERS, ids=[f"{n}={v!r}" for n, v, _ in BAD_PARAMETERS]
)
def test_a_notebook_parameter_of_the_wrong_kind_is_named(name, value, message, no_work):
    """As papermill sets them: the parameters cell, then its injected cell, then the check."""
    defaults = "profile = 'smoke'\nseeds = None\nfigures_dir = None\nmetrics_path = None"
    injected = f"# Parameters\n{name} = {value!r}\n"
    namespace = {
        "In": ["", defaults, injected, "notebook.check_parameters(globals())"],
        **{"profile": "smoke", "seeds": None, "figures_dir": None, "metrics_path": None},
        name: value,
    }
    with pytest.raises(ValueError) as error:
        notebook.check_parameters(namespace)
    assert re.search(message, one_line(error.value)), error.value


@pytest.mark.parametrize(
    "call",
    [
        lambda: summaries.read(experiments.plan("main_results", "smoke"), seeds="(0, 1)"),
        lambda: summaries.read(experiments.main_results(get_profile("smoke")), [-1], False),
        lambda: experiments.main_results(get_profile("smoke")).work("01"),
        lambda: experiments.tis_ablation(get_profile("smoke")).work((0, 1.5)),
    ],
    ids=["read string", "read negative", "Plan.work string", "Plan.work float"],
)
def test_the_python_api_refuses_bad_seeds_before_any_work(call, no_work):
    with pytest.raises(ValueError, match=r"seeds must be None or a non-empty list") as error:
        call()
    one_line(error.value)


def test_an_unknown_experiment_is_named(no_work):
    with pytest.raises(ValueError, match=r"unknown experiment 'nosuch'; allowed: \["):
        experiments.plan("nosuch", "smoke")


def test_a_start_that_fails_before_training_does_not_lock_its_run_directory(
    no_work, monkeypatch, capsys
):
    """The settings file is written right before training: a start whose policy fails to load
    leaves none, and the corrected command with other settings is not refused."""

    def broken(*args, **kwargs):
        raise OSError("the policy could not be read")

    monkeypatch.setattr(runs, "base_policy", broken)
    out = no_work / "run"
    first = ["train", "--profile", "smoke", "--output_dir", str(out), "--sigma", "0.5"]
    with pytest.raises(OSError, match="could not be read"):
        main(first)
    assert not (out / cli.RUN_FILE).exists()
    # a settings file alone (an older start that failed before its first checkpoint) holds
    # nothing to lose either: the corrected command is planned, not refused
    out.mkdir(exist_ok=True)
    (out / cli.RUN_FILE).write_text(json.dumps({"profile": "smoke", "seed": 7}))
    run = cli.plan_train(first[1:])
    assert run.output_dir == out and run.config.sigma == 0.5


def test_a_second_train_into_a_busy_output_dir_is_refused_naming_the_owner(no_work, capsys):
    out = no_work / "run"
    holder = (
        "import sys, time\nfrom psnlib.locks import exclusive\n"
        f"with exclusive({str(out)!r}, 'the first train'):\n"
        "    print('holding', flush=True)\n    time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "holding\n"
        argv = ["train", "--profile", "smoke", "--output_dir", str(out)]
        fails(
            argv,
            rf"{re.escape(str(out))}\.lock is held by pid {owner.pid} .*the first train",
            capsys,
        )
    finally:
        owner.terminate()
        owner.wait(timeout=30)
    assert not (out / cli.RUN_FILE).exists()


@pytest.mark.parametrize(
    "call",
    [lambda: train_policy("smoke", "psn", 0), lambda: base_policy("smoke")],
    ids=["train_policy", "base_policy"],
)
def test_python_api_refuses_a_data_directory_it_cannot_write_before_sft(
    tmp_path, monkeypatch, call
):
    """``train_policy`` and ``base_policy`` check the data directory before building anything:
    an SFT or a run into a directory that cannot be written would be lost at the save."""
    monkeypatch.setenv("PSNLIB_DATA", str(a_file(tmp_path) / "data"))
    monkeypatch.setattr(pretrain, "_sft_policy", did_work)
    monkeypatch.setattr(runs, "fit", did_work)
    with pytest.raises(ValueError, match=r"cannot be made: '.*a_file' is a file") as error:
        call()
    one_line(error.value)
