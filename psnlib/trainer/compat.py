"""The TRL methods ``PSNGRPOTrainer`` overrides, and a check that they still look as written for.

``PSNGRPOTrainer`` and its mixins override private ``GRPOTrainer`` / ``transformers.Trainer``
methods, whose signatures move between TRL releases without notice. ``WRITTEN_FOR`` records,
for each overridden name, the parameters it had in the TRL the trainer was written and tested
against (``TESTED_TRL``); ``check_overrides`` compares them with the installed TRL when a trainer
is constructed, so a TRL upgrade fails at once, naming the method, instead of training wrongly.
The private TRL methods psnlib replaces on an instance rather than overrides (``REPLACED``: the
noise on vLLM shadows ``VLLMGeneration._iter_named_params``) are checked alike.
"""

from __future__ import annotations

import importlib
import inspect

import trl

TESTED_TRL = ">=1.16,<1.17"  # pyproject.toml's bound
# name -> its parameters in TRL 1.16 (GRPOTrainer, or transformers.Trainer where TRL inherits it)
WRITTEN_FOR: dict[str, tuple[str, ...]] = {
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("self", "inputs"),
    "_generate_single_turn": (
        "self",
        "prompt_ids",
        "images",
        "multimodal_fields",
        "num_generations",
        "has_tool_images",
    ),
    "_get_output_dir": ("self", "trial"),
    "_get_per_token_logps_and_entropies": (
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
        "pixel_values",
        "image_grid_thw",
        "num_images",
        "pixel_attention_mask",
        "spatial_shapes",
        "num_tiles",
        "image_sizes",
        "token_type_ids",
        "mm_token_type_ids",
        "image_position_ids",
    ),
    "_load_from_checkpoint": ("self", "resume_from_checkpoint", "model"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    "_load_rng_state": ("self", "checkpoint"),
    "_maybe_log_save_evaluate": (
        "self",
        "tr_loss",
        "grad_norm",
        "model",
        "trial",
        "epoch",
        "ignore_keys_for_eval",
        "start_time",
        "learning_rate",
    ),
    "_save_checkpoint": ("self", "model", "trial"),
    "get_off_policy_mask": (
        "advantages",
        "per_token_logps",
        "sampling_per_token_logps",
        "mask",
        "off_policy_threshold",
    ),
    "train": ("self", "resume_from_checkpoint", "trial", "ignore_keys_for_eval"),
    "training_step": ("self", "model", "inputs", "num_items_in_batch"),
}

# TRL's private methods psnlib replaces on an instance (module, class, method) -> their parameters
# in TRL 1.16: psnlib.trainer.vllm_rollouts shadows the weight stream vLLM is synced from.
REPLACED: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("trl.generation.vllm_generation", "VLLMGeneration", "_iter_named_params"): ("self",),
}


class TRLVersionError(RuntimeError):
    """The installed TRL changed a method that ``PSNGRPOTrainer`` overrides."""


def overridden(trainer_cls: type, base: type) -> list[str]:
    """The methods of ``base`` that ``trainer_cls`` or one of its psnlib mixins redefines."""
    names = {
        name
        for cls in trainer_cls.__mro__
        if cls.__module__.startswith("psnlib")
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("__") and hasattr(base, name)
    }
    return sorted(names)


def parameters(method: object) -> tuple[str, ...]:
    """The parameter names of ``method`` (staticmethods have no ``self``)."""
    return tuple(inspect.signature(method).parameters)


def check_overrides(trainer_cls: type, base: type) -> None:
    """Raise ``TRLVersionError`` naming the method and the installed TRL when a method that
    ``trainer_cls`` overrides is gone from ``base`` or takes other parameters than
    ``WRITTEN_FOR`` records, when a method of ``REPLACED`` is gone or takes others, or when an
    override has no record (add it when writing one)."""
    for name in overridden(trainer_cls, base):
        if name not in WRITTEN_FOR:
            raise TRLVersionError(
                f"{trainer_cls.__name__} overrides {base.__name__}.{name}, which "
                "psnlib.trainer.compat.WRITTEN_FOR does not record: add its parameters there"
            )
    methods = {(base, name): want for name, want in WRITTEN_FOR.items()}
    for (module, cls, name), want in REPLACED.items():
        try:
            methods[(getattr(importlib.import_module(module), cls), name)] = want
        except (ImportError, AttributeError):
            raise TRLVersionError(
                f"psnlib replaces {module}.{cls}.{name}, written for TRL {TESTED_TRL}; the "
                f"installed TRL {trl.__version__} has no {module}.{cls}. Install trl{TESTED_TRL} "
                "(pip install -c constraints.txt -e .)"
            ) from None
    for (owner, name), want in methods.items():
        method = getattr(owner, name, None)
        found = None if method is None else parameters(method)
        if found != want:
            now = "is gone" if found is None else f"takes {found}"
            raise TRLVersionError(
                f"{trainer_cls.__name__} overrides {owner.__name__}.{name}, written for "
                f"{want} (TRL {TESTED_TRL}); in the installed TRL {trl.__version__} it {now}. "
                f"Install trl{TESTED_TRL} (pip install -c constraints.txt -e .)"
            )
