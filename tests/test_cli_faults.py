"""The command line (``python -m psnlib train|eval``) under faults and adversarial input: the
recovery it recommends works (``--overwrite_output_dir`` on an interrupted run), a read-only data
directory that holds what a run needs serves, and every bad value, damaged file, unreachable data
set or full disk ends in one line naming it, before the long work where it can be found then.

The ``no_work`` fixture fails a test that loads a policy, builds a training set or evaluates."""

import errno
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import datasets
import pytest
import torch
from test_bad_input import fails, fake_hub
from transformers.integrations import get_available_reporting_integrations

from psnlib import io as psnlib_io
from psnlib import paths as psnlib_paths
from psnlib.models import META_FILE, build_tokenizer, load_policy, save_policy, tiny_policy
from psnlib.replication.compute import cli, model_checks, pretrain, runs, store
from psnlib.replication.compute.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A saved smoke-size policy directory (random weights: what it samples does not matter)."""
    path = tmp_path_factory.mktemp("policy") / "model"
    tokenizer = build_tokenizer()
    save_policy(tiny_policy(size="smoke", tokenizer=tokenizer, seed=0), tokenizer, path)
    return path


@pytest.fixture(scope="module")
def built_data(tmp_path_factory) -> Path:
    """A data directory holding the smoke profile's base policy, built once (SFT)."""
    root = tmp_path_factory.mktemp("built") / "data"
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PSNLIB_DATA", str(root))
        torch.set_num_threads(1)
        try:
            pretrain.base_policy("smoke")
        finally:
            torch.set_num_threads(threads)
    return root


def copy_policy(policy: Path, where: Path) -> Path:
    shutil.copytree(policy, where)
    return where


# ------------------------------------------------------------------------ issue 39, 1-3


def test_overwrite_output_dir_starts_an_interrupted_run_with_other_settings_afresh(
    policy, data, tmp_path, capsys
):
    """A run killed before it saved its policy: checkpoints and a record, no ``policy``. The
    refusal recommends ``--overwrite_output_dir true``; that must work (it ended in
    FileNotFoundError .../policy)."""
    out = tmp_path / "run"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-1" / "trainer_state.json").write_text("{}")
    record = {"profile": "smoke", "arm": "psn", "seed": 0, "settings": {"sigma": 0.003}}
    (out / cli.RUN_FILE).write_text(json.dumps(record))
    argv = ["train", "--profile", "smoke", "--model", str(policy), "--output_dir", str(out)]
    argv += ["--max_steps", "1", "--save_strategy", "no", "--sigma", "0.05"]
    fails(argv, r"holds a run with other settings .*pass --overwrite_output_dir true", capsys)
    main([*argv, "--overwrite_output_dir", "true"])
    assert f"trained policy: {out / 'policy'}" in capsys.readouterr().out
    meta = json.loads((out / "policy" / META_FILE).read_text())
    assert meta["settings"]["sigma"] == 0.05 and [row["step"] for row in meta["log"]] == [1]
    assert not (out / "checkpoint-1").exists()
    assert json.loads((out / cli.RUN_FILE).read_text())["settings"]["sigma"] == 0.05


def test_overwrite_output_dir_never_deletes_the_policy_to_train(policy, no_work, capsys):
    """``--model <out>/policy --output_dir <out> --overwrite_output_dir true`` (train on from the
    last policy, afresh): the policy would be deleted before it is loaded."""
    out = no_work / "run"
    model = copy_policy(policy, out / "policy")
    argv = ["train", "--profile", "smoke", "--model", str(model), "--output_dir", str(out)]
    message = rf"--model '{model}' lies in --output_dir '{out}' \(its policy\), which --overwrite"
    fails([*argv, "--overwrite_output_dir", "true"], message, capsys)
    assert (model / "model.safetensors").is_file()


def test_eval_refuses_a_policy_with_non_finite_weights(no_work, monkeypatch, capsys):
    """It used to score 0 and exit 0."""
    path = no_work / "nan model"
    tokenizer = build_tokenizer()
    model = tiny_policy(size="smoke", tokenizer=tokenizer, seed=0)
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")
    model.save_pretrained(path)  # save_policy itself refuses a non-finite weight
    tokenizer.save_pretrained(path)
    monkeypatch.setattr(cli, "load_policy", load_policy)  # the real one: load it
    message = rf"--model '{re.escape(str(path))}' cannot be evaluated: its model\.norm\.weight "
    fails(
        ["eval", "--profile", "smoke", "--model", str(path)], message + "holds non-finite", capsys
    )


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def read_only(monkeypatch):
    """``read_only(root)`` makes ``root`` read-only: no write bits, and (as root ignores them)
    the temporary file ``psnlib.paths.check_writable`` tries there refused as the kernel refuses a
    user; the bits are restored after the test."""
    made: list[Path] = []
    real = tempfile.TemporaryFile

    def refuse_inside(*args, dir=None, **kwargs):  # noqa: A002 (tempfile's name)
        if dir is not None and any(Path(dir).is_relative_to(root) for root in made):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
        return real(*args, dir=dir, **kwargs)

    shim = SimpleNamespace(**{**vars(tempfile), "TemporaryFile": refuse_inside})
    monkeypatch.setattr(psnlib_paths, "tempfile", shim)

    def make(root: Path) -> Path:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        made.append(root)
        return root

    yield make
    for root in made:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_a_read_only_data_dir_that_holds_the_base_policy_serves_train(
    built_data, tmp_path, monkeypatch, read_only, capsys
):
    """Only ``--output_dir`` is written: a shared, read-only data directory serves (it was
    refused at the entry point, a regression), and nothing in it changes."""
    root = tmp_path / "data"
    shutil.copytree(built_data, root)
    monkeypatch.setenv("PSNLIB_DATA", str(root))
    before = snapshot(read_only(root))
    out = tmp_path / "run"
    main(["train", "--profile", "smoke", "--output_dir", str(out), "--max_steps", "1"])
    assert f"trained policy: {out / 'policy'}" in capsys.readouterr().out
    assert (out / "policy" / META_FILE).is_file()
    assert snapshot(root) == before


def test_a_read_only_data_dir_without_the_base_policy_is_refused_naming_it(
    no_work, tmp_path, monkeypatch, read_only, capsys
):
    """Where the base policy must be built (by SFT), and cached there, it is refused at once."""
    root = tmp_path / "empty"
    root.mkdir()
    monkeypatch.setenv("PSNLIB_DATA", str(read_only(root)))
    argv = ["train", "--profile", "smoke", "--output_dir", str(tmp_path / "run")]
    message = rf"PSNLIB_DATA '{root}': cannot write in .*training writes the base policy qwen2-"
    fails(argv, message, capsys)


# ---------------------------------------------------------------- issue 39, 4: one line each


@pytest.mark.parametrize("damage", ["truncated", "damaged"])
def test_a_weights_file_of_the_wrong_length_is_named_before_loading(
    damage, policy, no_work, capsys
):
    """A copy or download that stopped short (or bytes appended): safetensors' traceback."""
    path = copy_policy(policy, no_work / damage)
    weights = path / "model.safetensors"
    size = weights.stat().st_size
    now = size // 2 if damage == "truncated" else size + 4
    os.truncate(weights, now)  # a longer length pads it with zeros
    message = rf"--model '{path}': model\.safetensors is {damage} \({now} bytes, its header says"
    for command in ("train", "eval"):
        fails([command, "--profile", "smoke", "--model", str(path)], message, capsys)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """An empty ``datasets`` cache, the hub on; the offline switches restored after the test
    (``check_data_set`` turns them on where it loads a cached copy)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # set (not deleted), so that teardown removes it
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(model_checks.huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    return monkeypatch


DATA_SETS = [
    ("train", "--dataset", "aime24", "--dataset 'aime24' \\(Maxwell-Jia/AIME_2024\\)"),
    ("eval", "--benchmarks", "math500", "--benchmarks 'math500' \\(HuggingFaceH4/MATH-500\\)"),
]


@pytest.mark.parametrize(("command", "flag", "name", "named"), DATA_SETS, ids=["train", "eval"])
@pytest.mark.parametrize("state", ["offline", "unreachable", "not found"])
def test_a_real_data_set_that_cannot_be_loaded_fails_at_once(
    command, flag, name, named, state, policy, no_work, hub, capsys
):
    """Where ``datasets`` would retry for a minute, after the policy is loaded, and end in a
    ConnectionError traceback."""
    hub.setattr(model_checks, "ask_hub_data_set", fake_hub(state), raising=False)
    if state == "offline":
        hub.setenv("HF_HUB_OFFLINE", "1")
    message = {
        "offline": rf"{named} is not in the datasets cache, and HF_HUB_OFFLINE",
        "unreachable": rf"{named} is not in the datasets cache and the hub cannot be reached "
        r"\(ConnectionError\)",
        "not found": rf"{flag} '{name}': no such data set on the hub",
    }[state]
    start = time.perf_counter()
    argv = [command, "--profile", "smoke", "--model", str(policy), flag, name]
    fails(
        argv + (["--output_dir", str(no_work / "run")] if command == "train" else []),
        message,
        capsys,
    )
    assert time.perf_counter() - start < 10  # not a minute of retries


def test_a_cached_data_set_is_loaded_offline_when_the_hub_cannot_be_reached(
    policy, no_work, hub, capsys
):
    def ask(hub_id: str) -> None:
        raise TimeoutError("the hub did not answer")

    hub.setattr(model_checks, "data_set_cached", lambda hub_id: True, raising=False)
    hub.setattr(model_checks, "ask_hub_data_set", ask, raising=False)
    argv = ["train", "--profile", "smoke", "--dataset", "aime24", "--model", str(policy)]
    with pytest.raises(pytest.fail.Exception, match="did work"):  # planned and checked: trains
        main([*argv, "--output_dir", str(no_work / "run")])
    assert datasets.config.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"


def test_eval_of_a_directory_with_a_space_in_its_name_stores_its_results(
    policy, data, tmp_path, capsys
):
    """Its default run key (the directory's name) was refused by the result store, in a
    traceback after loading; it becomes a file-safe name."""
    path = copy_policy(policy, tmp_path / "my model")
    main(["eval", "--profile", "smoke", "--model", str(path), "--benchmarks", "countdown-l1"])
    assert "countdown-l1" in capsys.readouterr().out
    stored = list((data / "results" / "smoke").glob("my_model-*/countdown-l1.json"))
    assert len(stored) == 1, sorted((data / "results").rglob("*"))


@pytest.mark.parametrize("key", ["../../escape", "a/b", "..", "/abs", "a b", ".hidden"])
def test_a_run_key_must_be_a_name_not_a_path(key, policy, no_work, capsys):
    argv = ["eval", "--profile", "smoke", "--model", str(policy), "--run_key", key]
    fails(
        argv, rf"--run_key '{re.escape(key)}' must be a name, not a path: letters, digits", capsys
    )
    assert not (no_work / "escape").exists() and not (no_work.parent / "escape").exists()


def test_a_full_disk_ends_eval_in_one_line(policy, data, monkeypatch, capsys):
    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(store, "atomic_write_json", full)
    message = r"no space left on device writing .*config\.json; free some space on its disk"
    fails(["eval", "--profile", "smoke", "--model", str(policy)], message, capsys)


@pytest.mark.parametrize(
    "fault",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/out/psnlib_run.json"),
        RuntimeError(
            'Error while serializing: IoError(Os { code: 28, message: "No space left on device" })'
        ),
    ],
    ids=["OSError", "a library's own error"],
)
def test_a_full_disk_ends_train_in_one_line(fault, policy, data, tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise fault

    monkeypatch.setattr(runs, "fit", full)
    argv = ["train", "--profile", "smoke", "--model", str(policy)]
    message = (
        r"no space left on device.*; free some space on its disk and run again \(the run resumes"
    )
    fails([*argv, "--output_dir", str(tmp_path / "run")], message, capsys)


def test_a_write_psnlib_refuses_ends_train_in_its_one_line(policy, data, tmp_path, monkeypatch):
    """``psnlib.io.WriteFailed`` (a permission, a symbolic link, a read-only file system)."""
    out = tmp_path / "run"
    refused = psnlib_io.WriteFailed(
        errno.EACCES, f"cannot write {out}/x: permission denied; fix its permissions", str(out)
    )

    def refuse(*args, **kwargs):
        raise refused

    monkeypatch.setattr(runs, "fit", refuse)
    argv = ["train", "--profile", "smoke", "--model", str(policy), "--output_dir", str(out)]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == f"psnlib train: error: cannot write {out}/x: permission denied; " + (
        "fix its permissions"
    )


# ------------------------------------------------- adversarial values: one line before work

WANDB = "wandb" in get_available_reporting_integrations()
TRAIN_CASES = [
    (["--steps_per_generation", "0"], r"steps_per_generation must be an integer >= 1.*got 0"),
    (["--logging_steps", "-1"], r"logging_steps must be > 0 .*got -1"),
    (["--save_steps", "-1"], r"save_steps must be > 0 .*got -1"),
    (["--dataloader_num_workers", "-1"], r"dataloader_num_workers must be >= 0 .*got -1"),
    (["--eval_strategy", "steps"], r"eval_strategy 'steps' needs an evaluation set.*allowed: no"),
    (["--push_to_hub", "true"], r"push_to_hub true is not supported by psnlib train"),
    (["--report_to", "nosuch"], r"report_to: nosuch is not supported, only .*tensorboard"),
    (["--loss_type", "nosuch"], r"unknown loss_type 'nosuch'; allowed: .*dapo"),
    (["--per_device_train_batch_size", "1000000"], r"250000 prompts .*more than the run's 64"),
    (["--max_completion_length", "1000000000"], r"max_completion_length must be <= the policy"),
    (
        ["--noise_targets", "", "--noise_scope", "rollout"],
        r"per-row noise .* perturbs nn\.Linear layers only",
    ),
    (["--config", ""], r"--config is empty; pass a YAML file"),
    (["--config", "--seed", "1"], r"--config needs a YAML file"),
]
if not WANDB:
    TRAIN_CASES.append((["--report_to", "wandb"], r"report_to \['wandb'\] is not installed"))
if not torch.cuda.is_available():
    TRAIN_CASES.append((["--fp16", "true"], r"fp16=True .* is not supported on a CPU"))
if importlib.util.find_spec("deepspeed") is None:
    TRAIN_CASES.append((["--deepspeed", "ds.json"], r"--deepspeed needs DeepSpeed, which is not"))


@pytest.mark.parametrize(
    ("argv", "message"), TRAIN_CASES, ids=[" ".join(a) or "''" for a, _ in TRAIN_CASES]
)
def test_bad_train_values_are_one_line_errors_before_any_work(argv, message, no_work, capsys):
    out = no_work / "run"
    fails(["train", "--profile", "smoke", *argv, "--output_dir", str(out)], message, capsys)
    assert not out.exists()


EVAL_CASES = [
    (["--seed", "4294967296"], r"--seed must be an integer <= 4294967295 .*, got 4294967296"),
    (["--seed", "99999999999999999999"], r"--seed must be an integer <= 4294967295"),
]


@pytest.mark.parametrize(("argv", "message"), EVAL_CASES, ids=[" ".join(a) for a, _ in EVAL_CASES])
def test_bad_eval_values_are_one_line_errors_before_loading(argv, message, policy, no_work, capsys):
    fails(["eval", "--profile", "smoke", "--model", str(policy), *argv], message, capsys)


def test_eval_of_a_run_directory_names_its_policy(policy, no_work, capsys):
    run = no_work / "run"
    copy_policy(policy, run / "policy")
    message = rf"--model '{run}' is a run's --output_dir; pass its policy: '{run / 'policy'}'"
    fails(["eval", "--profile", "smoke", "--model", str(run)], message, capsys)


def test_eval_benchmarks_from_a_config_file_or_given_twice_are_each_one_benchmark(policy, no_work):
    """``benchmarks: countdown-l1`` in a ``--config`` file was split into its letters."""
    config = no_work / "eval.yaml"
    config.write_text("benchmarks: countdown-l1\n")
    _, _, benchmarks = cli.plan_eval(["--model", str(policy), "--config", str(config)])
    assert benchmarks == ("countdown-l1",)
    argv = ["--model", str(policy), "--benchmarks", "countdown-l2", "countdown-l1", "countdown-l2"]
    assert cli.plan_eval(argv)[2] == ("countdown-l2", "countdown-l1")


def test_a_missing_absolute_model_path_is_named_plainly(no_work, capsys):
    missing = no_work / "no" / "such"
    argv = ["train", "--profile", "smoke", "--model", str(missing)]
    text = fails(argv, rf"--model '{missing}': no such model directory; pass a directory", capsys)
    assert "//" not in text


def test_help_into_a_pipe_its_reader_closed_ends_without_a_traceback():
    """``python -m psnlib --help | head -1``: a BrokenPipeError traceback after the line."""
    child = subprocess.Popen(
        [sys.executable, "-m", "psnlib", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    child.stdout.close()  # before the child, still importing, writes a byte
    errors = child.stderr.read().decode()
    assert child.wait(timeout=120) == 1 and "Traceback" not in errors, errors


# ------------------------------------------------------------------------ issue 50, item 9


def test_a_stored_result_part_that_is_a_directory_is_named_before_loading(policy, no_work, capsys):
    """``eval`` read it as JSON when its benchmark came, in an IsADirectoryError traceback."""
    part = no_work / "data" / "results" / "smoke" / "mine-0123456789ab" / "countdown-l3.json"
    part.mkdir(parents=True)
    argv = ["eval", "--profile", "smoke", "--model", str(policy), "--run_key", "mine"]
    fails(argv, rf"the stored result part {part} is not a file: remove it \(rm -r ", capsys)


def test_a_cached_weak_prefix_set_that_is_a_directory_is_named_before_any_work(
    policy, no_work, capsys
):
    """A weak-prefix run read it as JSON once its weak policy was built: IsADirectoryError."""
    entry = no_work / "data" / "cache" / "weak_prefixes" / "0123456789ab.json"
    entry.mkdir(parents=True)
    argv = ["train", "--profile", "smoke", "--model", str(policy), "--prefix_prob", "0.5"]
    argv += ["--output_dir", str(no_work / "run")]
    fails(argv, rf"the cached weak-prefix set {entry} is not a file: remove it", capsys)


def test_a_trl_whose_overridden_methods_changed_is_one_line_before_loading(
    policy, no_work, monkeypatch, capsys
):
    """The trainer's check (``psnlib.trainer.compat``) ran once the policy was loaded, and its
    TRLVersionError was a traceback."""
    from psnlib.trainer import compat

    monkeypatch.setitem(compat.WRITTEN_FOR, "_calculate_rewards", ("self", "inputs"))
    argv = ["train", "--profile", "smoke", "--model", str(policy)]
    message = r"overrides GRPOTrainer\._calculate_rewards, written for \('self', 'inputs'\)"
    fails([*argv, "--output_dir", str(no_work / "run")], message, capsys)
