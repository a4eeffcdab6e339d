"""``PSNGRPOTrainer`` checks, when it is built, that every private TRL method it overrides still
takes the parameters it was written for, and names the method and the installed TRL if not."""

import pytest
import trl
from trl import GRPOTrainer

from psnlib.trainer import PSNGRPOTrainer
from psnlib.trainer.compat import (
    REPLACED,
    WRITTEN_FOR,
    TRLVersionError,
    check_overrides,
    overridden,
)


def test_every_override_is_recorded_and_matches_the_installed_trl():
    assert overridden(PSNGRPOTrainer, GRPOTrainer) == sorted(WRITTEN_FOR)
    check_overrides(PSNGRPOTrainer, GRPOTrainer)  # the lock's TRL: nothing raised


def test_a_changed_signature_raises_naming_the_method_and_the_trl_version(monkeypatch):
    def moved(self, inputs, new_argument):  # as a TRL release might change it
        raise AssertionError("never called")

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", moved)
    message = (
        rf"PSNGRPOTrainer overrides GRPOTrainer\._generate_and_score_completions, written for "
        rf"\('self', 'inputs'\) .* in the installed TRL {trl.__version__} it takes "
        r"\('self', 'inputs', 'new_argument'\)"
    )
    with pytest.raises(TRLVersionError, match=message):
        check_overrides(PSNGRPOTrainer, GRPOTrainer)
    with pytest.raises(TRLVersionError, match="_generate_and_score_completions"):
        PSNGRPOTrainer(model=None, reward_funcs=None)  # before any model is touched


def test_a_removed_method_and_an_unrecorded_override_raise(monkeypatch):
    monkeypatch.delattr(GRPOTrainer, "_calculate_rewards")
    with pytest.raises(TRLVersionError, match=r"_calculate_rewards.* it is gone"):
        check_overrides(PSNGRPOTrainer, GRPOTrainer)
    monkeypatch.undo()
    monkeypatch.delitem(WRITTEN_FOR, "training_step")  # an override written without a record
    with pytest.raises(TRLVersionError, match=r"overrides GRPOTrainer\.training_step, which"):
        check_overrides(PSNGRPOTrainer, GRPOTrainer)


def test_the_vllm_weight_stream_psn_replaces_is_checked(monkeypatch):
    """The noise on vLLM shadows TRL's private VLLMGeneration._iter_named_params (issue 50, item
    10): a TRL where it is gone or takes other parameters fails the check, naming it."""
    from trl.generation.vllm_generation import VLLMGeneration

    assert ("trl.generation.vllm_generation", "VLLMGeneration", "_iter_named_params") in REPLACED
    check_overrides(PSNGRPOTrainer, GRPOTrainer)
    monkeypatch.setattr(VLLMGeneration, "_iter_named_params", lambda self, model: iter(()))
    with pytest.raises(TRLVersionError, match=r"VLLMGeneration\._iter_named_params.*takes"):
        check_overrides(PSNGRPOTrainer, GRPOTrainer)
    monkeypatch.delattr(VLLMGeneration, "_iter_named_params")
    with pytest.raises(TRLVersionError, match=r"VLLMGeneration\._iter_named_params.*is gone"):
        check_overrides(PSNGRPOTrainer, GRPOTrainer)
