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
import difflib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from accelerate import PartialState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import TrlParser

from psnlib import sampling
from psnlib.evaluate import evaluate_benchmarks
from psnlib.io import atomic_write_json, read_json
from psnlib.models import META_FILE, load_policy
from psnlib.pretrain import base_policy, spec_hash
from psnlib.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.runs import ARMS, fit, rl_config, rl_settings, train_set
from psnlib.tasks import BENCHMARKS, check_dataset, dataset_names, task_reward
from psnlib.tasks.datasets import TESTBED
from psnlib.trainer import PSNGRPOConfig

COMMANDS = ("train", "eval")
RUN_FILE = "psnlib_run.json"  # in --output_dir: the settings of the run it holds


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


def check_model(name: str | None) -> str | None:
    """``name`` if it is None, a model directory or a hub id; a path that does not exist, or a
    directory without ``config.json``, is an error naming it."""
    if name is None:
        return name
    if Path(name).is_dir():
        if not (Path(name) / "config.json").exists():
            raise ValueError(
                f"--model {name!r} is a directory without config.json; pass a model directory "
                "(config.json and *.safetensors) or a hub id 'org/name'"
            )
        return name
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists():
        raise ValueError(
            f"--model {name!r}: no such model directory; pass a directory holding config.json "
            "and *.safetensors, or a hub id 'org/name'"
        )
    return name


def make_parser(dataclass_types: list[type], prog: str) -> TrlParser:
    """TRL's parser, whose errors (an unknown or misspelled option, a bad value) raise a
    one-line ValueError, with the closest option names, instead of printing the usage."""
    parser = TrlParser(dataclass_types, prog=prog)

    def error(message: str) -> None:
        unknown = re.findall(r"(--?[\w-]+)", message.partition("arguments:")[2])
        options = [o for action in parser._actions for o in action.option_strings]
        close = [m for u in unknown for m in difflib.get_close_matches(u, options, n=2)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"{message}{hint}; see {prog} --help")

    parser.error = error
    return parser


def _read_config_file(parser: TrlParser, args: list[str]) -> list[str]:
    """TRL's ``--config file.yaml``: its ``env`` mapping sets environment variables and every
    other key becomes the default of its argument. Returns ``args`` without the option."""
    if "--config" not in args:
        return args
    at = args.index("--config")
    if at + 1 == len(args):
        raise ValueError("--config needs a YAML file")
    path, args = args[at + 1], args[:at] + args[at + 2 :]
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"--config {path}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise ValueError(f"--config {path}: not valid YAML{line}") from err
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
    parser = make_parser([TrainArguments, PSNGRPOConfig], prog="python -m psnlib train")
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
    overwrite: bool = False

    @property
    def output_dir(self) -> Path:
        return Path(self.config.output_dir)

    def settings(self) -> dict[str, Any]:
        """Everything that determines the trained policy (recorded in ``RUN_FILE``)."""
        base = self.profile.base
        return {
            "profile": self.profile.name,
            "arm": self.arm,
            "seed": self.seed,
            "base": base.name_or_path or f"{base.family}-{base.size}-{spec_hash(base)}",
            "dataset": self.profile.rl_dataset,
            "settings": rl_settings(self.profile, self.arm, self.seed, **self.overrides),
        }


def check_output_dir(run: Run) -> None:
    """An ``--output_dir`` that holds a run (``RUN_FILE``, checkpoints or a policy) must hold
    this one, to resume or reuse it; otherwise the run is refused, naming the differences,
    unless ``--overwrite_output_dir`` starts it afresh."""
    out = run.output_dir
    held = [p.name for p in (out / RUN_FILE, out / "policy") if p.exists()]
    held += sorted(p.name for p in out.glob(f"{PREFIX_CHECKPOINT_DIR}-*"))
    if not held or run.overwrite:
        return
    hint = "pass --overwrite_output_dir true to delete it and start afresh, or another --output_dir"
    if not (out / RUN_FILE).exists():
        raise ValueError(f"--output_dir {str(out)!r} holds {held[:3]} of an unrecorded run; {hint}")
    recorded = read_json(out / RUN_FILE, "run settings")
    if recorded is None:
        raise ValueError(f"--output_dir {str(out)!r}: {RUN_FILE} is damaged; {hint}")
    now = run.settings()
    flat_then, flat_now = _flatten(recorded), _flatten(json.loads(json.dumps(now, default=str)))
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


def _flatten(settings: dict[str, Any]) -> dict[str, Any]:
    inner = settings.get("settings", {})
    return {**{k: v for k, v in settings.items() if k != "settings"}, **inner}


def plan_train(args: list[str]) -> Run:
    """Parse and check a ``train`` command line, and the run its ``--output_dir`` holds;
    nothing is loaded yet."""
    script, overrides = parse_train(args)
    profile = get_profile(script.profile)
    if script.model is not None:
        profile = profile.with_overrides(base=PolicySpec(name_or_path=check_model(script.model)))
    if script.dataset is not None:
        profile = profile.with_overrides(rl_dataset=check_dataset(script.dataset))
    seed = overrides.pop("seed", 0)
    output_dir = overrides.pop("output_dir", f"runs/{profile.name}/{script.arm}-s{seed}")
    config = rl_config(profile, script.arm, seed, output_dir, **overrides)  # validates the rest
    run = Run(profile, script.arm, seed, overrides, config, script.overwrite_output_dir)
    check_output_dir(run)
    return run


def train(run: Run) -> Path:
    """Train ``run`` (resuming from its last checkpoint); returns the trained policy's directory,
    ``<output_dir>/policy``, with a ``psnlib_meta.json`` that records the run and its log. The
    run's settings are recorded in ``<output_dir>/psnlib_run.json`` first; a finished run is
    returned as it is."""
    profile, arm, seed, overrides = run.profile, run.arm, run.seed, run.overrides
    policy = run.output_dir / "policy"
    processes = PartialState()
    if run.overwrite and processes.is_main_process:
        for path in [policy, *run.output_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*")]:
            shutil.rmtree(path)
    processes.wait_for_everyone()
    done = read_json(policy / META_FILE, "trained policy's record")
    if done is not None and len(done.get("log", [])) == run.config.max_steps:
        print(f"finished already: {policy}")
        return policy
    if processes.is_main_process:
        atomic_write_json(run.output_dir / RUN_FILE, run.settings())
    model, tokenizer, _ = base_policy(profile)
    dataset = train_set(profile, arm, seed, **overrides)
    trainer, log = fit(run.config, model, tokenizer, dataset, task_reward(profile.rl_dataset))
    trainer.save_model(str(policy))  # gathers sharded weights; writes on the main process
    if trainer.accelerator.is_main_process:
        meta = {
            "profile": profile.name,
            "arm": arm,
            "seed": seed,
            **run.settings(),
            "base": profile.base.name_or_path,
            "log": log,
        }
        atomic_write_json(policy / META_FILE, meta)
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
    """Parse and check an ``eval`` command line: its arguments, profile and benchmarks."""
    parser = make_parser([EvalArguments], prog="python -m psnlib eval")
    # a bare --use_vllm means true (its default, None, is "the profile's", so argparse wants a
    # value)
    flags = ("--use_vllm", "--use-vllm")
    args = [x for i, a in enumerate(args) for x in ([a, "true"] if _bare(args, i, flags) else [a])]
    script = EvalArguments(**vars(parser.parse_args(_read_config_file(parser, args))))
    profile = get_profile(script.profile)
    benchmarks = _check_benchmarks(profile, script.benchmarks)
    if not Path(script.model, "config.json").is_file():
        raise ValueError(
            f"--model {script.model!r}: no such policy directory (one with config.json and "
            "*.safetensors)"
        )
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
