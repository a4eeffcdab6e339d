"""Fixtures and builders shared by several test files: one thread, and the tiny trainer setup
(a smoke-size policy, four Countdown prompts, a reward that varies across random completions);
the hypothesis profile of the run."""

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from hypothesis import settings
from hypothesis.errors import InvalidArgument

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication import reproduce
from psnlib.replication.analysis import summaries
from psnlib.replication.compute import cli, pretrain, runs
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

# Property tests in CI (CI=true) draw the same examples at every run, with no example database:
# a CI run cannot fail on a new draw, and a failure there reproduces. Locally hypothesis' default
# profile: new random examples each run, failures remembered in .hypothesis/. The "ci" profile
# extends hypothesis' own where it has one (6.170 does: deadline off, ...; it loads that one
# wherever it sees a CI variable set, to any value).
try:
    _HYPOTHESIS_CI: settings | None = settings.get_profile("ci")
except InvalidArgument:  # an older hypothesis, without it
    _HYPOTHESIS_CI = None
settings.register_profile("ci", _HYPOTHESIS_CI, derandomize=True, database=None)


def hypothesis_profile(environ: Mapping[str, str]) -> str | None:
    """The hypothesis profile this conftest loads in ``environ``: "ci" where CI is "true", else
    None (hypothesis' own choice stands: its default profile locally)."""
    return "ci" if environ.get("CI") == "true" else None


if (_profile := hypothesis_profile(os.environ)) is not None:
    settings.load_profile(_profile)  # before the test modules build their settings


PROMPTS = ["7 3 5 4->22:", "1 2 3 4->10:", "9 9 1 2->18:", "5 6 7 8->3:"]
G = 4  # rollouts per prompt: small, but enough for non-trivial group statistics
# A run of three steps with a checkpoint after each (resume and fault tests)
CHECKPOINTED = {"max_steps": 3, "save_strategy": "steps", "save_steps": 1, "sigma": 0.01}


@pytest.fixture(autouse=True, scope="session")
def own_ledger(tmp_path_factory) -> Iterator[None]:
    """Every test reads and writes a run ledger of its own (``PSNLIB_RESULTS``), never the
    checkout's committed ``results/``: a record there would stand in for what a test computes."""
    before = os.environ.get("PSNLIB_RESULTS")
    os.environ["PSNLIB_RESULTS"] = str(tmp_path_factory.mktemp("results"))
    yield
    if before is None:
        os.environ.pop("PSNLIB_RESULTS", None)
    else:
        os.environ["PSNLIB_RESULTS"] = before


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """A fresh, empty data directory (``PSNLIB_DATA``) for the test."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and oversubscribed cores make them crawl."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def distinct_chars(completions: list[str], **kwargs: Any) -> list[float]:
    """A cheap reward that varies across random completions, so advantages are non-zero."""
    return [len(set(c)) / 10 for c in completions]


def tiny_settings(output_dir: str | Path, **overrides: Any) -> dict[str, Any]:
    """Trainer settings of one short CPU step: 2 prompts x G rollouts of 8 tokens, fp32."""
    return {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 2 * G,  # the smallest real batch
        "num_generations": G,
        "max_completion_length": 8,  # short rollouts keep a step well under a second
        "max_steps": 1,
        "learning_rate": 1e-2,  # large, so one step visibly moves the weights
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "bf16": False,  # CPU fp32, so the comparisons can be tight
        "gradient_checkpointing": False,
        "use_cpu": True,
        "seed": 0,
        **overrides,
    }


def tiny_trainer(
    output_dir: str | Path,
    trainer_cls: type = PSNGRPOTrainer,
    config_cls: type = PSNGRPOConfig,
    reward: Any = distinct_chars,
    train_dataset: Dataset | None = None,
    **overrides: Any,
) -> PSNGRPOTrainer:
    """A trainer (PSN-GRPO, or TRL's GRPO with ``GRPOConfig``) on the smoke-size tiny policy of
    seed 0; ``train_dataset`` defaults to ``PROMPTS``; ``overrides`` are config settings, but
    ``similarity`` goes to the trainer."""
    tokenizer = build_tokenizer()
    extra = {"similarity": overrides.pop("similarity")} if "similarity" in overrides else {}
    if train_dataset is None:
        train_dataset = Dataset.from_dict({"prompt": PROMPTS})
    return trainer_cls(
        model=tiny_policy(size="smoke", tokenizer=tokenizer, seed=0),
        reward_funcs=reward,
        args=config_cls(**tiny_settings(output_dir, **overrides)),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS})
        if train_dataset is None
        else train_dataset,
        processing_class=tokenizer,
        **extra,
    )


def did_work(*args: Any, **kwargs: Any) -> None:
    """A stand-in for an expensive step that a test of bad input must never reach."""
    pytest.fail("did work before refusing the bad input")


@pytest.fixture
def no_work(tmp_path, monkeypatch) -> Path:
    """A fresh data directory, and every expensive step fails the test if called: loading or
    building a policy, the training set, training, evaluating, the reproduction's prepare
    stage and notebooks, an experiment's runs."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    for module, name in [
        (runs, "base_policy"),
        (runs, "train_set"),
        (cli, "load_policy"),
        (cli, "evaluate_benchmarks"),
        (pretrain, "build_policy"),
        (runs, "fit"),
        (reproduce, "prepare"),
        (reproduce, "run_notebook"),
        (summaries, "compare"),
    ]:
        monkeypatch.setattr(module, name, did_work)
    return tmp_path
