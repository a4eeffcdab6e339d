"""The command line's parsing: what ``train`` and ``eval`` take (``TrainArguments``,
``EvalArguments``, besides ``PSNGRPOConfig``'s fields), TRL's ``TrlParser`` with one-line errors
(``make_parser``) and TRL's ``--config file.yaml``, each value checked against its field's type
before any work (``read_config_file``)."""

from __future__ import annotations

import difflib
import enum
import numbers
import os
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from trl import TrlParser

from psnlib.replication.plan.arms import ARMS
from psnlib.replication.plan.profiles import PROFILES


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


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value read from YAML has the type ``hint`` of its field (an int is a float, a
    bool is neither; a type not known here takes anything)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if hint is dict or origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        kind = numbers.Integral if hint is int else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {member.value for member in hint}
    return True


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def check_config_types(parser: TrlParser, config: dict[str, Any], path: str) -> None:
    """Each value of a ``--config`` file must have its field's type; a string is left to the
    argument's own parser (YAML reads ``1e-5`` as one), as on the command line."""
    hints = {}
    for kind in parser.dataclass_types:
        resolved = typing.get_type_hints(kind)
        hints.update({f.name: resolved[f.name] for f in fields(kind)})
    for key, value in config.items():
        if key in hints and not isinstance(value, str) and not _fits(value, hints[key]):
            raise ValueError(
                f"--config {path}: {key}: {value!r} is not of type {_type_name(hints[key])}"
            )


def read_config_file(parser: TrlParser, args: list[str]) -> list[str]:
    """TRL's ``--config file.yaml``: its ``env`` mapping sets environment variables and every
    other key becomes the default of its argument (each of its field's type). Returns ``args``
    without the option."""
    if "--config" not in args:
        return args
    at = args.index("--config")
    if at + 1 == len(args) or args[at + 1].startswith("--"):
        raise ValueError("--config needs a YAML file")
    if not args[at + 1].strip():
        raise ValueError("--config is empty; pass a YAML file")
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
    env = config.pop("env", {})
    if not isinstance(env, dict):
        raise ValueError(f"--config {path}: env: {env!r} is not a mapping of variables to values")
    check_config_types(parser, config, path)
    for key, value in env.items():
        os.environ[key] = str(value)
    unknown = parser.set_defaults_with_config(**config)
    if unknown:
        raise ValueError(f"--config {path}: unknown arguments {unknown[::2]}")
    return args


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
