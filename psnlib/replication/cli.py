"""The command line: ``python -m psnlib train ...`` and ``python -m psnlib eval ...``.

``train`` runs one RL run the way the notebooks do, through ``psnlib.replication.runs.train_run``:
the profile's sizes, then the arm's settings, then every ``PSNGRPOConfig`` field given on the
command line or in a ``--config`` YAML file (TRL's ``TrlParser``; the command line wins), then
``PSNGRPOTrainer``. ``--model`` (a directory or hub id) replaces the profile's base policy and
``--dataset`` its training set (``countdown``, judged by ``countdown_reward``, or a real one, judged
by ``math_reward``). Checkpoints go to ``--output_dir``, the trained policy to
``<output_dir>/policy``; an interrupted run resumes from its last checkpoint. Launch it with
``accelerate launch --config_file configs/accelerate/<setup>.yaml -m psnlib train ...`` for
several GPUs or DeepSpeed (``docs/scale_out.md``).

``eval`` evaluates a saved policy on the profile's benchmarks (or ``--benchmarks``) through
``psnlib.replication.evaluation.evaluate_benchmarks`` (stored under ``data/results``) and prints
pass@k. With ``--use_vllm`` (the default at profiles whose ``eval_engine`` is vLLM: ``paper``) a
``vllm.LLM`` of the policy samples (``psnlib.sampling._sample_vllm``) instead of the psnlib decoder.

Bad input fails before any model is loaded, in one line naming the value and what is allowed:
unknown profiles, arms, datasets, benchmarks or noise targets; a value of the wrong type (in a
``--config`` file too); a missing or damaged model directory, or a hub id that is not cached when
the hub cannot be reached (or ``HF_HUB_OFFLINE`` is set); an output or data directory
(``PSNLIB_DATA``) that cannot be written; options that psnlib accepts from TRL but does not
honour (``UNSUPPORTED``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib import sampling
from psnlib.io import Busy, check_data_dir, check_writable, read_json
from psnlib.models import load_policy, tiny_policy
from psnlib.noise import target_parameters
from psnlib.replication.cli_config import make_parser, read_config_file
from psnlib.replication.evaluation import evaluate_benchmarks
from psnlib.replication.model_checks import check_model, check_model_dir
from psnlib.replication.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.replication.runs import ARMS, RUN_FILE, Run, train_run
from psnlib.tasks import BENCHMARKS, check_dataset, dataset_names
from psnlib.tasks.datasets import TESTBED
from psnlib.trainer import PSNGRPOConfig
from psnlib.trainer.checkpoints import CheckpointError

COMMANDS = ("train", "eval")
# TRL options that psnlib train would accept and silently not honour, and why.
UNSUPPORTED = {
    "trust_remote_code": "psnlib loads the policy itself and never runs a model's remote code",
    "model_init_kwargs": "psnlib loads the policy itself (--model), not from these arguments",
    "resume_from_checkpoint": "a run resumes from the last checkpoint in --output_dir by itself",
}


@dataclass
class TrainArguments:
    """What a run is; its trainer settings are ``PSNGRPOConfig`` fields (``--help`` lists them)."""

    profile: str = field(default="cpu", metadata={"help": f"Scale: {', '.join(PROFILES)}."})
    arm: str = field(default="psn", metadata={"help": f"Method: {', '.join(ARMS)}."})
    model: str | None = field(
        default=None,
        metadata={"help": "Policy to train: a directory or hub id; default: the profile's base."},
    )
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Training set: 'countdown' or a real one of psnlib.tasks.REAL_BENCHMARKS "
            "(e.g. simplerl-math-l3to5); default: the profile's rl_dataset."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Start afresh in an --output_dir that holds a run with other settings (its "
            "checkpoints and policy are deleted); without it such a run is refused."
        },
    )


@dataclass
class EvalArguments:
    """Which policy to evaluate, on what, at which profile's scale."""

    model: str = field(metadata={"help": "The policy: a directory (e.g. <output_dir>/policy)."})
    profile: str = field(default="cpu", metadata={"help": f"Scale: {', '.join(PROFILES)}."})
    benchmarks: list[str] | None = field(
        default=None, metadata={"help": "Benchmarks; default: the profile's."}
    )
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    run_key: str | None = field(
        default=None, metadata={"help": "Name of the results; default: the policy's directory."}
    )
    use_vllm: bool | None = field(
        default=None,
        metadata={
            "help": "Sample with vLLM instead of the psnlib decoder; default: the profile's "
            "eval_engine (vLLM at paper, where the decoder's KV cache would not fit)."
        },
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.9, metadata={"help": "vLLM: share of GPU memory for weights and KV cache."}
    )
    vllm_tensor_parallel_size: int = field(
        default=1, metadata={"help": "vLLM: GPUs the policy is split over."}
    )


def check_noise_targets(profile: Profile, config: PSNGRPOConfig) -> None:
    """Each of ``config.noise_targets`` must match a parameter of the policy to train; checked on
    a weightless copy (the meta device) of the profile's base policy, a tiny one or a local
    directory's, before anything is loaded. A hub id's targets are checked when it is loaded."""
    spec = profile.base
    if spec.name_or_path is not None and not Path(spec.name_or_path).expanduser().is_dir():
        return
    with torch.device("meta"):
        if spec.name_or_path is None:
            model = tiny_policy(spec.family, spec.size)
        else:
            model = AutoModelForCausalLM.from_config(check_model_dir(spec.name_or_path))
    target_parameters(model, config.noise_config().targets)


def parse_train(args: list[str]) -> tuple[TrainArguments, dict[str, Any]]:
    """The run's arguments, and the ``PSNGRPOConfig`` fields that were given (and only those:
    the others come from the profile and the arm)."""
    parser = make_parser([TrainArguments, PSNGRPOConfig], prog="python -m psnlib train")
    own = {f.name for f in fields(TrainArguments)}
    for action in parser._actions:
        if action.dest not in own:
            action.default = argparse.SUPPRESS  # absent from the namespace unless given
    given = vars(parser.parse_args(read_config_file(parser, args)))
    unsupported = [name for name in UNSUPPORTED if name in given]
    if unsupported:
        reasons = "; ".join(f"--{name}: {UNSUPPORTED[name]}" for name in unsupported)
        raise ValueError(f"not supported by psnlib train ({reasons}); remove them")
    script = TrainArguments(**{name: given.pop(name) for name in own})
    return script, given


@dataclass
class TrainCommand:
    """A checked ``train`` command: the run (its profile with ``--model`` and ``--dataset``
    applied), the trainer config it resolves to (checkpoints in ``--output_dir``), and whether
    to start afresh (``--overwrite_output_dir``)."""

    run: Run
    config: PSNGRPOConfig
    overwrite: bool = False

    @property
    def output_dir(self) -> Path:
        return Path(self.config.output_dir)


def check_output_dir(command: TrainCommand) -> None:
    """An ``--output_dir`` that holds a run (checkpoints or a policy) must hold this one, to
    resume or reuse it: the same record (``Run.record``; its ``overrides`` are not compared, as
    the resolved ``settings`` hold what they change); otherwise the run is refused, naming the
    differences, unless ``--overwrite_output_dir`` starts it afresh. A ``RUN_FILE`` alone (a
    start that failed before its first checkpoint) holds nothing to lose, and is replaced."""
    out = command.output_dir
    held = [p.name for p in (out / "policy",) if p.exists()]
    held += sorted(p.name for p in out.glob(f"{PREFIX_CHECKPOINT_DIR}-*"))
    if not held or command.overwrite:
        return
    hint = "pass --overwrite_output_dir true to delete it and start afresh, or another --output_dir"
    if not (out / RUN_FILE).exists():
        raise ValueError(f"--output_dir {str(out)!r} holds {held[:3]} of an unrecorded run; {hint}")
    recorded = read_json(out / RUN_FILE, "run settings")
    if recorded is None:
        raise ValueError(f"--output_dir {str(out)!r}: {RUN_FILE} is damaged; {hint}")
    now = json.loads(json.dumps(command.run.record(), default=str))
    flat_then, flat_now = _flatten(recorded), _flatten(now)
    changed = [
        f"{key} {flat_then.get(key, '(unset)')!r} -> {flat_now.get(key, '(unset)')!r}"
        for key in sorted(set(flat_then) | set(flat_now))
        if flat_then.get(key, "(unset)") != flat_now.get(key, "(unset)")
    ]
    if changed:
        raise ValueError(
            f"--output_dir {str(out)!r} holds a run with other settings ({'; '.join(changed)}); "
            f"re-run with its settings to resume it, or {hint}"
        )


def _flatten(record: dict[str, Any]) -> dict[str, Any]:
    """A run's record with its ``settings`` at the top level and without its ``overrides``."""
    inner = record.get("settings", {})
    return {**{k: v for k, v in record.items() if k not in ("settings", "overrides")}, **inner}


def plan_train(args: list[str]) -> TrainCommand:
    """Parse and check a ``train`` command line: the policy to train, vLLM if it is asked for,
    the noise targets, the output and data directories, and the run its ``--output_dir``
    holds; nothing is loaded."""
    script, overrides = parse_train(args)
    profile = get_profile(script.profile)
    if script.model is not None:
        profile = profile.with_overrides(base=PolicySpec(name_or_path=check_model(script.model)))
    else:
        check_model(profile.base.name_or_path, f"profile {profile.name!r}'s base policy")
    if script.dataset is not None:
        profile = profile.with_overrides(rl_dataset=check_dataset(script.dataset))
    seed = overrides.pop("seed", 0)
    output_dir = overrides.pop("output_dir", None)
    if output_dir is None:
        output_dir = f"runs/{profile.name}/{script.arm}-s{seed}"
    elif not output_dir.strip():
        raise ValueError("--output_dir is empty; pass the directory of the run's checkpoints")
    run = Run(profile, script.arm, seed, overrides)
    command = TrainCommand(run, run.config(output_dir), script.overwrite_output_dir)
    if command.config.use_vllm and sampling.vllm is None:  # else found when the trainer is built
        raise ValueError(
            "--use_vllm true needs vLLM, which is not installed: pip install 'psnlib[gpu]' on a "
            "CUDA machine, or pass --use_vllm false"
        )
    check_noise_targets(profile, command.config)
    check_writable(command.output_dir, "--output_dir")
    check_data_dir()
    check_output_dir(command)
    return command


def train(command: TrainCommand) -> Path:
    """Train the command's run into ``<output_dir>/policy`` (``runs.train_run``: checkpoints in
    ``--output_dir``, its lock held, so a second ``train`` into it is refused with
    ``psnlib.io.Busy``, the run's record in ``RUN_FILE`` once training starts); a finished run is
    left as it is. Returns the policy's directory."""
    policy = command.output_dir / "policy"
    if train_run(command.run, command.config, policy, fresh=command.overwrite) is None:
        print(f"finished already: {policy}")
    return policy


def _check_benchmarks(profile: Profile, names: list[str] | None) -> tuple[str, ...]:
    allowed = [*BENCHMARKS, *(name for name in dataset_names() if name not in TESTBED)]
    names = tuple(names or profile.benchmarks)
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; allowed: {', '.join(allowed)}")
    return names


def _bare(args: list[str], i: int, flags: tuple[str, ...]) -> bool:
    """Whether ``args[i]`` is one of ``flags`` without a value after it."""
    return args[i] in flags and (i + 1 == len(args) or args[i + 1].startswith("-"))


def plan_eval(args: list[str]) -> tuple[EvalArguments, Profile, tuple[str, ...]]:
    """Parse and check an ``eval`` command line: its arguments, profile, benchmarks, policy
    directory and sampling settings, and that its results can be stored."""
    parser = make_parser([EvalArguments], prog="python -m psnlib eval")
    # a bare --use_vllm means true (its default, None, is "the profile's", so argparse wants a
    # value)
    flags = ("--use_vllm", "--use-vllm")
    args = [x for i, a in enumerate(args) for x in ([a, "true"] if _bare(args, i, flags) else [a])]
    script = EvalArguments(**vars(parser.parse_args(read_config_file(parser, args))))
    profile = get_profile(script.profile)
    benchmarks = _check_benchmarks(profile, script.benchmarks)
    if not Path(script.model, "config.json").is_file():
        raise ValueError(
            f"--model {script.model!r}: no such policy directory (one with config.json and "
            "*.safetensors)"
        )
    check_model_dir(script.model)
    if script.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {script.seed}")
    if not 0 < script.vllm_gpu_memory_utilization <= 1:  # also refuses NaN
        raise ValueError(
            "--vllm_gpu_memory_utilization must be in (0, 1], got "
            f"{script.vllm_gpu_memory_utilization}"
        )
    if script.vllm_tensor_parallel_size < 1:
        raise ValueError(
            f"--vllm_tensor_parallel_size must be >= 1, got {script.vllm_tensor_parallel_size}"
        )
    if script.run_key is not None and not script.run_key.strip():
        raise ValueError("--run_key is empty; pass a name for the results, or leave it out")
    check_data_dir()
    if script.use_vllm is None:
        script.use_vllm = profile.eval_engine == "vllm"
    if script.use_vllm and sampling.vllm is None:
        raise ValueError(
            f"sampling with vLLM (--use_vllm; profile {profile.name!r} evaluates with "
            f"{profile.eval_engine!r}) needs vLLM: pip install 'psnlib[gpu]' on a CUDA machine, "
            "or pass --use_vllm false for the psnlib decoder"
        )
    return script, profile, benchmarks


def evaluate(script: EvalArguments, profile: Profile, benchmarks: tuple[str, ...]) -> dict:
    """Evaluate the policy (results stored by ``evaluate_benchmarks``), print pass@k per
    benchmark and k, and return the tables."""
    model, tokenizer = load_policy(script.model)  # on the CPU: for the weights' fingerprint
    engine = None
    if script.use_vllm:
        engine = sampling.vllm.LLM(
            model=script.model,
            dtype="auto",
            seed=script.seed,
            gpu_memory_utilization=script.vllm_gpu_memory_utilization,
            tensor_parallel_size=script.vllm_tensor_parallel_size,
        )
    run_key = script.run_key or Path(script.model).resolve().name
    tables = evaluate_benchmarks(
        model.eval(),
        tokenizer,
        profile,
        benchmarks,
        run_key=run_key,
        seed=script.seed,
        engine=engine,
    )
    curves = tables["curves"].pivot_table(index="benchmark", columns="k", values="pass_at_k")
    print(curves.round(4).to_string())
    return tables


def main(argv: list[str] | None = None) -> None:
    """Dispatch ``train`` or ``eval``. Bad arguments end the program with a one-line message
    before anything is loaded."""
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m psnlib {{{','.join(COMMANDS)}}} [--help] [options]"
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{usage}\n\n{__doc__.strip()}")
        return
    if not argv or argv[0] not in COMMANDS:
        sys.exit(usage)
    command, args = argv[0], argv[1:]
    plan = plan_train if command == "train" else plan_eval
    try:
        checked = plan(args)
    except ValueError as err:
        sys.exit(f"psnlib {command}: error: {err}")
    if command == "train":
        try:
            policy = train(checked)
        except Busy as err:
            sys.exit(
                f"psnlib train: error: {err}; wait for it to finish, or pass another --output_dir"
            )
        except (ValueError, FloatingPointError, CheckpointError) as err:
            # settings only the built trainer can judge (a hub model's noise targets), a run that
            # went non-finite, a checkpoint that cannot be written or resumed: one line each
            sys.exit(f"psnlib train: error: {err}")
        print(f"trained policy: {policy}")
    else:
        evaluate(*checked)
