"""A training run prints no warnings (issue 39): TRL 1.16 toggles gradient checkpointing, on by
TRL's default, around generation and its no-grad forwards through names transformers 5
deprecates, a FutureWarning for each of them at every step; PSNGRPOTrainer ignores exactly those.

Every warning is recorded (``simplefilter("always")``: a repeat is not hidden by the registry of
warnings already shown), from building the trainer to the end of the run."""

import warnings
from pathlib import Path

import pytest
from conftest import PROMPTS, distinct_chars, tiny_settings, tiny_trainer
from datasets import Dataset

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer


def shown(caught: list[warnings.WarningMessage]) -> list[str]:
    """Each warning as its category, message and origin, for the assertion's message."""
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


@pytest.mark.usefixtures("one_thread")
def test_readme_settings_train_without_warnings(tmp_path: Path) -> None:
    """The README's script, at smoke size: gradient checkpointing not given (TRL's default, on),
    two training steps of the psnlib rollout engine under noise, with TIS."""
    settings = tiny_settings(tmp_path, max_steps=2, sigma=0.003, noise_scope="rollout")
    del settings["gradient_checkpointing"]  # the README does not set it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokenizer = build_tokenizer()
        trainer = PSNGRPOTrainer(
            model=tiny_policy(size="smoke", tokenizer=tokenizer, seed=0),
            reward_funcs=distinct_chars,
            args=PSNGRPOConfig(**settings),
            train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
            processing_class=tokenizer,
        )
        assert trainer.args.gradient_checkpointing  # the setting that triggers the toggle
        trainer.train()
    assert trainer.state.global_step == 2
    assert shown(caught) == []


@pytest.mark.usefixtures("one_thread")
def test_generate_engine_pairs_and_evaluation_without_warnings(tmp_path: Path) -> None:
    """TRL's ``generate`` toggles checkpointing once more around each generation: the rollouts,
    Variant II's clean pairs and an evaluation's generation."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = tiny_trainer(
            tmp_path,
            gradient_checkpointing=True,
            rollout_engine="generate",
            sigma=0.003,
            sigma_scheduler="diversity",
            div_similarity="lexical",
        )
        trainer.train()
        metrics = trainer.evaluate(Dataset.from_dict({"prompt": PROMPTS[:2]}))
    assert trainer.state.global_step == 1
    assert "eval_reward" in metrics
    assert shown(caught) == []
