"""What the command line (``psnlib.replication.compute.cli``) refuses, and how it says so: the
values ``python -m psnlib train`` and ``eval`` check before any model is loaded, each failure a
one-line ValueError naming the value and what is allowed (TRL's options that psnlib does not honour,
``UNSUPPORTED``; DeepSpeed or vLLM asked for but not installed; noise targets and a completion
length the policy cannot take, ``check_noise_targets``; TRL's and transformers' settings the built
trainer would refuse, ``check_trainer_settings``; a data directory that cannot be written where
training writes there, ``data_dir_needs``; a policy that ``--overwrite_output_dir`` would delete; a
TRL whose methods the trainer overrides have changed, ``check_trl``; a damaged committed starting
point or a weak-prefix set that is a directory, ``check_run_inputs``; unknown benchmarks, a missing
policy directory, an out-of-range seed or vLLM setting, a ``--run_key`` that is not a plain name),
and the one line that ends a command a full disk stopped (``write_error``). The checks of a model
directory, a hub id or a data set are in ``model_checks``."""

from __future__ import annotations

import errno
import importlib.util
import os
import re
from dataclasses import fields
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig
from transformers.integrations import get_available_reporting_integrations
from transformers.integrations.integration_utils import get_reporting_integration_callbacks
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig, GRPOTrainer

from psnlib import sampling
from psnlib.cache import Damaged
from psnlib.models import check_saved_policy, tiny_policy
from psnlib.noise import target_linears, target_parameters
from psnlib.paths import check_data_dir
from psnlib.replication.compute.model_checks import check_model_dir
from psnlib.replication.compute.prefixes import prefix_source
from psnlib.replication.compute.pretrain import BUILT_META_KEYS, policy_meta
from psnlib.replication.compute.sitting import check_prefix_sets, check_starting_points
from psnlib.replication.compute.store import NAME
from psnlib.replication.plan.policies import policy_dir
from psnlib.replication.plan.profiles import Profile
from psnlib.replication.plan.runs import Run
from psnlib.tasks import BENCHMARKS, dataset_names
from psnlib.tasks.datasets import TESTBED
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.trainer.compat import TRLVersionError, check_overrides
from psnlib.trainer.config_checks import MAX_SEED

# TRL options that psnlib train would accept and silently not honour, and why.
UNSUPPORTED = {
    "trust_remote_code": "psnlib loads the policy itself and never runs a model's remote code",
    "model_init_kwargs": "psnlib loads the policy itself (--model), not from these arguments",
    "resume_from_checkpoint": "a run resumes from the last checkpoint in --output_dir by itself",
}
# TRL's loss formulations (GRPOConfig.loss_type), as its help lists them; TRL itself refuses
# another only in the first step's loss.
LOSS_TYPES = tuple(
    re.findall(
        r"'(\w+)'",
        next(f for f in fields(GRPOConfig) if f.name == "loss_type")
        .metadata.get("help", "")
        .partition("Supported values are")[2]
        .partition(". ")[0],
    )
)
# Write errors that end a command in one line, and what to do about each.
WRITE_ERRORS = {
    errno.ENOSPC: "free some space on its disk and run again",
    errno.EDQUOT: "free some of your quota on its disk and run again",
    errno.EFBIG: "a file is larger than the limit on a file's size (ulimit -f)",
    errno.EROFS: "its file system is mounted read-only; pass a path on a writable one",
}


def check_supported(given: dict) -> None:
    """None of the options given (``train``'s ``PSNGRPOConfig`` fields) may be one that psnlib
    accepts from TRL but does not honour (``UNSUPPORTED``)."""
    unsupported = [name for name in UNSUPPORTED if name in given]
    if unsupported:
        reasons = "; ".join(f"--{name}: {UNSUPPORTED[name]}" for name in unsupported)
        raise ValueError(f"not supported by psnlib train ({reasons}); remove them")


def check_deepspeed(overrides: dict) -> None:
    """``--deepspeed`` (one of the ``PSNGRPOConfig`` fields given) needs DeepSpeed installed."""
    if overrides.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ValueError(
            "--deepspeed needs DeepSpeed, which is not installed: pip install deepspeed on a "
            "CUDA machine (docs/scale_out.md), or leave --deepspeed out"
        )


def check_vllm(config: PSNGRPOConfig) -> None:
    """``train``'s ``--use_vllm true`` needs vLLM installed (else found only when the trainer is
    built)."""
    if config.use_vllm and sampling.vllm is None:
        raise ValueError(
            "--use_vllm true needs vLLM, which is not installed: pip install 'psnlib[gpu]' on a "
            "CUDA machine, or pass --use_vllm false"
        )


def check_noise_targets(profile: Profile, config: PSNGRPOConfig) -> None:
    """Each of ``config.noise_targets`` must match a parameter of the policy to train (one of an
    ``nn.Linear`` where the noise is per row, as the trainer requires), and
    ``config.max_completion_length`` fit in its context (``max_position_embeddings``); checked
    on a weightless copy (the meta device) of the profile's base policy, a tiny one or a local
    directory's, before anything is loaded. A hub id's targets are checked when it is loaded."""
    spec = profile.base
    if spec.name_or_path is not None and not Path(spec.name_or_path).expanduser().is_dir():
        return
    with torch.device("meta"):
        if spec.name_or_path is None:
            model = tiny_policy(spec.family, spec.size)
        else:
            model = AutoModelForCausalLM.from_config(check_model_dir(spec.name_or_path))
    noise = config.noise_config()
    target_parameters(model, noise.targets)
    per_row = "d_sem" in config.sigma_schedule().signals or noise.scope != "step"
    if per_row and not config.use_vllm:  # as PSNGRPOTrainer checks it once the policy is loaded
        target_linears(model, noise.targets)
    _check_context(model.config, config.max_completion_length)


def _check_context(model_config: PretrainedConfig, length: int) -> None:
    """``max_completion_length`` must fit in the policy's context: rollouts of a longer one
    would not fit its positions (and would allocate their buffers first)."""
    positions = getattr(model_config, "max_position_embeddings", None)
    if isinstance(positions, int) and length > positions:
        raise ValueError(
            f"max_completion_length must be <= the policy's context (max_position_embeddings "
            f"{positions}), got {length}"
        )


def check_trainer_settings(config: PSNGRPOConfig, profile: Profile) -> None:
    """TRL's and transformers' settings that ``PSNGRPOConfig`` accepts but the trainer would
    refuse only once it is built, after the policy is loaded, or fail on in its first step, or
    run with doing nothing (at ``profile``'s size of the training set): each a one-line
    ValueError naming the value and what is allowed."""
    every = config.steps_per_generation
    if every is not None and every < 1:
        raise ValueError(
            f"steps_per_generation must be an integer >= 1 (or left out: "
            f"gradient_accumulation_steps), got {every}"
        )
    for name in ("logging", "save"):
        steps = getattr(config, f"{name}_steps")
        if getattr(config, f"{name}_strategy") == "steps" and not steps > 0:
            raise ValueError(
                f"{name}_steps must be > 0 (a number of steps, or a fraction < 1 of max_steps) "
                f"with {name}_strategy 'steps', got {steps}"
            )
    if config.dataloader_num_workers < 0:
        raise ValueError(
            "dataloader_num_workers must be >= 0 (0: load in the main process), got "
            f"{config.dataloader_num_workers}"
        )
    evaluation = getattr(config.eval_strategy, "value", config.eval_strategy)
    if evaluation != "no":
        raise ValueError(
            f"eval_strategy {evaluation!r} needs an evaluation set, which psnlib train has none "
            "of; allowed: no (evaluate the trained policy with python -m psnlib eval)"
        )
    if config.push_to_hub:
        raise ValueError(
            "push_to_hub true is not supported by psnlib train: the policy is saved to "
            "<output_dir>/policy (upload it with hf upload); pass --push_to_hub false"
        )
    try:
        get_reporting_integration_callbacks(config.report_to)
    except ValueError as err:
        raise ValueError(f"report_to: {err}") from err
    installed = get_available_reporting_integrations()
    report_to = [config.report_to] if isinstance(config.report_to, str) else config.report_to
    missing = [name for name in report_to or () if name not in ("none", "all", *installed)]
    if missing:
        raise ValueError(
            f"report_to {missing} is not installed; allowed here: {', '.join(['none', *installed])}"
        )
    if LOSS_TYPES and config.loss_type not in LOSS_TYPES:
        raise ValueError(
            f"unknown loss_type {config.loss_type!r}; allowed: {', '.join(LOSS_TYPES)}"
        )
    if config.fp16 and (config.use_cpu or not torch.cuda.is_available()):
        raise ValueError(
            "fp16=True (fp16 mixed precision) is not supported on a CPU: psnlib samples "
            "rollouts and compares log-probs in float32 there; pass --fp16 false"
        )
    prompts = config.generation_batch_size // config.num_generations
    problems = profile.rl_train_problems
    if problems and prompts > problems:
        raise ValueError(
            f"per_device_train_batch_size {config.per_device_train_batch_size} asks for "
            f"{prompts} prompts per generation batch ({config.generation_batch_size} rollouts, "
            f"num_generations {config.num_generations}), more than the run's {problems} "
            f"training problems (profile {profile.name!r}'s rl_train_problems): no step would "
            f"run; allowed: at most {problems * config.num_generations} rollouts per batch"
        )


def data_dir_needs(config: PSNGRPOConfig, profile: Profile) -> str | None:
    """What training a run (its trainer config and profile) writes in the data directory
    (``PSNLIB_DATA``): its base policy, built by SFT where no whole copy is there yet
    (``policies.policy_dir``), and a weak-prefix run's weak policy and prefixes; None where it
    writes nothing there (only ``--output_dir``), as when the base policy is built already or is
    a directory or hub id."""
    if config.prefix_prob > 0:
        return "the weak policy and the prefixes of a weak-prefix run"
    spec = profile.base
    if spec.name_or_path is not None:
        return None
    path = policy_dir(spec)
    try:
        whole = all(key in policy_meta(path) for key in BUILT_META_KEYS)
        check_saved_policy(path)
    except (Damaged, OSError):
        whole = False
    return None if whole else f"the base policy {path.name}, built by SFT"


def check_train_data_dir(config: PSNGRPOConfig, profile: Profile) -> None:
    """The data directory must be writable where training writes there (``data_dir_needs``);
    else a read-only one serves."""
    needs = data_dir_needs(config, profile)
    if needs is not None:
        try:
            check_data_dir()
        except ValueError as err:
            raise ValueError(f"{err} (training writes {needs} there)") from err


def check_trl() -> None:
    """The installed TRL's methods that ``PSNGRPOTrainer`` overrides still look as written for
    (``psnlib.trainer.compat.check_overrides``, which the trainer checks once the policy is
    loaded): checked before anything is loaded, in one line."""
    try:
        check_overrides(PSNGRPOTrainer, GRPOTrainer)
    except TRLVersionError as err:
        raise ValueError(str(err)) from err


def check_run_inputs(run: Run) -> None:
    """What ``run`` starts from besides a ``--model``: the committed starting points of its base
    policy and, in a weak-prefix run, of its prefixes' writer, whole (never trained again
    silently), and the weak-prefix sets files (``psnlib.replication.compute.sitting``)."""
    settings = run.settings()
    specs = [run.profile.base]
    if settings.get("prefix_prob", 0.0) > 0:
        specs.append(prefix_source(run.profile, settings["prefix_source"]))
        check_prefix_sets()
    check_starting_points(specs)


def check_not_overwritten(profile: Profile, output_dir: Path, what: str) -> None:
    """The policy to train (``profile``'s base) must not lie in what ``--overwrite_output_dir``
    deletes (the policy and checkpoints of ``output_dir``): it would be deleted before it is
    loaded."""
    base = profile.base.name_or_path
    if base is None or not Path(base).expanduser().is_dir():
        return
    model, out = Path(base).expanduser().resolve(), output_dir.resolve()
    for doomed in [out / "policy", *out.glob(f"{PREFIX_CHECKPOINT_DIR}-*")]:
        if model == doomed or doomed in model.parents:
            raise ValueError(
                f"{what} {base!r} lies in --output_dir {str(output_dir)!r} (its "
                f"{doomed.name}), which --overwrite_output_dir true deletes before training; copy "
                "it elsewhere first, or pass another --output_dir"
            )


def check_benchmarks(profile: Profile, names: list[str] | str | None) -> tuple[str, ...]:
    """The benchmarks to evaluate on (the profile's where none are given), each once, in order;
    else a ValueError naming the unknown ones and those allowed."""
    allowed = [*BENCHMARKS, *(name for name in dataset_names() if name not in TESTBED)]
    if isinstance(names, str):  # one name, as a --config file may give it
        names = [names]
    names = tuple(dict.fromkeys(names or profile.benchmarks))  # each once, in order
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; allowed: {', '.join(allowed)}")
    return names


def check_eval_model(model: str) -> None:
    """``eval``'s ``--model`` must be a policy directory (not a run's ``--output_dir``) that
    transformers can load (``check_model_dir``)."""
    if not Path(model, "config.json").is_file():
        if Path(model, "policy", "config.json").is_file():
            raise ValueError(
                f"--model {model!r} is a run's --output_dir; pass its policy: "
                f"{str(Path(model, 'policy'))!r}"
            )
        raise ValueError(
            f"--model {model!r}: no such policy directory (one with config.json and *.safetensors)"
        )
    check_model_dir(model)


def check_eval_values(
    seed: int, gpu_memory_utilization: float, tensor_parallel_size: int, run_key: str | None
) -> None:
    """``eval``'s sampling seed, vLLM settings and ``--run_key`` (a file-safe name, ``NAME``)."""
    if seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {seed}")
    if seed > MAX_SEED:
        raise ValueError(f"--seed must be an integer <= {MAX_SEED} (numpy's range), got {seed}")
    if not 0 < gpu_memory_utilization <= 1:  # also refuses NaN
        raise ValueError(
            f"--vllm_gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}"
        )
    if tensor_parallel_size < 1:
        raise ValueError(f"--vllm_tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if run_key is not None and not run_key.strip():
        raise ValueError("--run_key is empty; pass a name for the results, or leave it out")
    if run_key is not None and not NAME.fullmatch(run_key):
        raise ValueError(
            f"--run_key {run_key!r} must be a name, not a path: letters, digits and "
            ". _ + -, starting with a letter or digit"
        )


def check_eval_engine(use_vllm: bool, profile: Profile, tensor_parallel_size: int) -> None:
    """``eval`` with vLLM (``--use_vllm``, or ``profile``'s ``eval_engine``) needs vLLM installed
    and no more GPUs to split the policy over than there are here."""
    if use_vllm and sampling.vllm is None:
        raise ValueError(
            f"sampling with vLLM (--use_vllm; profile {profile.name!r} evaluates with "
            f"{profile.eval_engine!r}) needs vLLM: pip install 'psnlib[gpu]' on a CUDA machine, "
            "or pass --use_vllm false for the psnlib decoder"
        )
    gpus = torch.cuda.device_count()
    if use_vllm and gpus and tensor_parallel_size > gpus:
        raise ValueError(
            f"--vllm_tensor_parallel_size must be <= the {gpus} GPU(s) here, got "
            f"{tensor_parallel_size}"
        )


def one_line(err: BaseException) -> str:
    """An error's message on one line (its lines joined; spaces within a line kept)."""
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or (
        type(err).__name__
    )


def write_error(err: BaseException, command: str) -> str | None:
    """The one-line message of an error that a full disk (or a quota, a read-only file system, a
    file size limit) caused, anywhere in its chain of causes; None for any other error."""
    seen: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in seen:
        seen.append(cause)
        code = getattr(cause, "errno", None)
        if code is None and "no space left on device" in str(cause).lower():
            code = errno.ENOSPC  # a library's own error type (safetensors', say)
        if code in WRITE_ERRORS:
            name = getattr(cause, "filename", None)
            where = f" writing {os.fsdecode(name)}" if isinstance(name, str | bytes) else ""
            kept = (
                "the run resumes from its last checkpoint"
                if command == "train"
                else "finished benchmarks are kept"
            )
            return f"{os.strerror(code).lower()}{where}; {WRITE_ERRORS[code]} ({kept})"
        cause = cause.__cause__ or cause.__context__
    return None
