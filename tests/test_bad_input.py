"""Bad input and damaged caches: a one-line error naming the value or file before any work, or,
for a damaged cache entry, a warning naming the file and the entry recomputed. Also the run
directory of the command line (its recorded settings), counts, and bf16 on a CPU."""

import json
import re
import warnings

import pandas as pd
import pytest
import torch
from datasets import Dataset

from psnlib import cli, evaluate, reproduce
from psnlib.cli import main
from psnlib.evaluate import evaluate_policy
from psnlib.models import META_FILE, build_tokenizer, tiny_policy
from psnlib.pretrain import base_policy
from psnlib.profiles import get_profile
from psnlib.runs import rl_config, run_dir, train_policy
from psnlib.store import ResultStore
from psnlib.tasks import task_reward
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
SMOKE_REWARD = task_reward(get_profile("smoke").rl_dataset).__qualname__


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def fails(argv: list[str], message: str, capsys) -> None:
    """``python -m psnlib ARGV`` ends with one line naming the problem, and prints nothing."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert text.startswith(f"psnlib {argv[0]}: error:") and re.search(message, text), text
    assert capsys.readouterr().out == ""


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
    from psnlib import runs

    real_save = runs.save_policy
    monkeypatch.setattr(runs, "save_policy", lambda *a, **k: pytest.fail("killed"))
    with pytest.raises(pytest.fail.Exception):
        train_policy("smoke", "grpo", 0)
    monkeypatch.setattr(runs, "save_policy", real_save)
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
    monkeypatch.setattr(cli, "base_policy", lambda *a: pytest.fail("did work"))
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
        rl_config("smoke", "psn", 0, data, max_steps=0)


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
    path = run_dir("smoke", "grpo", 0, {}, SMOKE_REWARD)
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
