"""The command line: ``python -m psnlib train ...`` and ``python -m psnlib eval ...``.

``train`` runs one RL run the way ``psnlib.runs`` builds it for the notebooks: the profile's sizes,
then the arm's settings, then every ``PSNGRPOConfig`` field given on the command line or in a
``--config`` YAML file (TRL's ``TrlParser``; the command line wins), then ``PSNGRPOTrainer``.
``--model`` (a directory or hub id) replaces the profile's base policy and ``--dataset`` its
training set (``countdown``, judged by ``countdown_reward``, or a real one, judged by
``math_reward``). Checkpoints go to ``--output_dir``, the trained policy to
``<output_dir>/policy``; an interrupted run resumes from its last checkpoint. Launch it with
``accelerate launch --config_file configs/accelerate/<setup>.yaml -m psnlib train ...`` for
several GPUs or DeepSpeed (``docs/scale_out.md``).

``eval`` evaluates a saved policy on the profile's benchmarks (or ``--benchmarks``) through
``psnlib.evaluate.evaluate_benchmarks`` (stored under ``data/results``) and prints pass@k. With
``--use_vllm`` (the default at profiles whose ``eval_engine`` is vLLM: ``paper``) a ``vllm.LLM``
of the policy samples (``psnlib.sampling._sample_vllm``) instead of the psnlib decoder.

Unknown profiles, arms, datasets, benchmarks or a missing model directory fail before any model
is loaded, naming the value and what is allowed.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from trl import TrlParser

from psnlib import sampling
from psnlib.evaluate import evaluate_benchmarks
from psnlib.io import atomic_write_json
from psnlib.models import META_FILE, load_policy
from psnlib.pretrain import base_policy
from psnlib.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.runs import ARMS, fit, rl_config, rl_settings, train_set
from psnlib.tasks import BENCHMARKS, COUNTDOWN, check_dataset, dataset_names, task_reward
from psnlib.trainer import PSNGRPOConfig

COMMANDS = ("train", "eval")


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


def check_model(name: str | None) -> str | None:
    """``name`` if it is None, an existing directory or a hub id; a path that does not exist is
    an error naming it."""
    if name is None or Path(name).is_dir():
        return name
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists():
        raise ValueError(
            f"--model {name!r}: no such model directory; pass a directory holding config.json "
            "and *.safetensors, or a hub id 'org/name'"
        )
    return name


def _read_config_file(parser: TrlParser, args: list[str]) -> list[str]:
    """TRL's ``--config file.yaml``: its ``env`` mapping sets environment variables and every
    other key becomes the default of its argument. Returns ``args`` without the option."""
    if "--config" not in args:
        return args
    at = args.index("--config")
    path, args = args[at + 1], args[:at] + args[at + 2 :]
    config = yaml.safe_load(Path(path).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"--config {path}: expected a YAML mapping of argument names to values")
    for key, value in config.pop("env", {}).items():
        os.environ[key] = str(value)
    unknown = parser.set_defaults_with_config(**config)
    if unknown:
        raise ValueError(f"--config {path}: unknown arguments {unknown[::2]}")
    return args


def parse_train(args: list[str]) -> tuple[TrainArguments, dict[str, Any]]:
    """The run's arguments, and the ``PSNGRPOConfig`` fields that were given (and only those:
    the others come from the profile and the arm)."""
    parser = TrlParser([TrainArguments, PSNGRPOConfig], prog="python -m psnlib train")
    own = {f.name for f in fields(TrainArguments)}
    for action in parser._actions:
        if action.dest not in own:
            action.default = argparse.SUPPRESS  # absent from the namespace unless given
    given = vars(parser.parse_args(_read_config_file(parser, args)))
    script = TrainArguments(**{name: given.pop(name) for name in own})
    return script, given


@dataclass
class Run:
    """A checked ``train`` command: the profile (with ``--model`` and ``--dataset`` applied), the
    arm, seed and given trainer settings, and the trainer config they resolve to."""

    profile: Profile
    arm: str
    seed: int
    overrides: dict[str, Any]
    config: PSNGRPOConfig


def plan_train(args: list[str]) -> Run:
    """Parse and check a ``train`` command line; nothing is loaded yet."""
    script, overrides = parse_train(args)
    profile = get_profile(script.profile)
    if script.model is not None:
        profile = profile.with_overrides(base=PolicySpec(name_or_path=check_model(script.model)))
    if script.dataset is not None:
        profile = profile.with_overrides(rl_dataset=check_dataset(script.dataset))
    seed = overrides.pop("seed", 0)
    output_dir = overrides.pop("output_dir", f"runs/{profile.name}/{script.arm}-s{seed}")
    config = rl_config(profile, script.arm, seed, output_dir, **overrides)  # validates the rest
    return Run(profile, script.arm, seed, overrides, config)


def train(run: Run) -> Path:
    """Train ``run`` (resuming from its last checkpoint); returns the trained policy's directory,
    ``<output_dir>/policy``, with a ``psnlib_meta.json`` that records the run and its log."""
    profile, arm, seed, overrides = run.profile, run.arm, run.seed, run.overrides
    model, tokenizer, _ = base_policy(profile)
    dataset = train_set(profile, arm, seed, **overrides)
    trainer, log = fit(run.config, model, tokenizer, dataset, task_reward(profile.rl_dataset))
    policy = Path(run.config.output_dir) / "policy"
    trainer.save_model(str(policy))  # gathers sharded weights; writes on the main process
    if trainer.accelerator.is_main_process:
        meta = {
            "profile": profile.name,
            "arm": arm,
            "seed": seed,
            "base": profile.base.name_or_path,
            "dataset": profile.rl_dataset,
            "settings": rl_settings(profile, arm, seed, **overrides),
            "log": log,
        }
        atomic_write_json(policy / META_FILE, meta)
    return policy


def _check_benchmarks(profile: Profile, names: list[str] | None) -> tuple[str, ...]:
    allowed = [*BENCHMARKS, *(name for name in dataset_names() if name != COUNTDOWN)]
    names = tuple(names or profile.benchmarks)
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; allowed: {', '.join(allowed)}")
    return names


def _bare(args: list[str], i: int, flags: tuple[str, ...]) -> bool:
    """Whether ``args[i]`` is one of ``flags`` without a value after it."""
    return args[i] in flags and (i + 1 == len(args) or args[i + 1].startswith("-"))


def plan_eval(args: list[str]) -> tuple[EvalArguments, Profile, tuple[str, ...]]:
    """Parse and check an ``eval`` command line: its arguments, profile and benchmarks."""
    parser = TrlParser([EvalArguments], prog="python -m psnlib eval")
    # a bare --use_vllm means true (its default, None, is "the profile's", so argparse wants a
    # value)
    flags = ("--use_vllm", "--use-vllm")
    args = [x for i, a in enumerate(args) for x in ([a, "true"] if _bare(args, i, flags) else [a])]
    (script,) = parser.parse_args_and_config(args)
    profile = get_profile(script.profile)
    benchmarks = _check_benchmarks(profile, script.benchmarks)
    if not Path(script.model).is_dir():
        raise ValueError(f"--model {script.model!r}: no such policy directory")
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
        print(f"trained policy: {train(checked)}")
    else:
        evaluate(*checked)
