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
import difflib
import enum
import json
import numbers
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import huggingface_hub
import torch
import yaml
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import TrlParser

from psnlib import sampling
from psnlib.io import Busy, check_data_dir, check_writable, read_json
from psnlib.models import HUB_ID, load_policy, tiny_policy
from psnlib.noise import target_parameters
from psnlib.replication.evaluation import evaluate_benchmarks
from psnlib.replication.profiles import PROFILES, PolicySpec, Profile, get_profile
from psnlib.replication.runs import ARMS, RUN_FILE, Run, train_run
from psnlib.tasks import BENCHMARKS, check_dataset, dataset_names
from psnlib.tasks.datasets import TESTBED
from psnlib.trainer import PSNGRPOConfig
from psnlib.trainer.checkpoints import CheckpointError

COMMANDS = ("train", "eval")
HUB_TIMEOUT = 10.0  # seconds to wait for the hub to say whether a model id exists
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


def check_model_dir(path: str | os.PathLike, what: str = "--model") -> PretrainedConfig:
    """The model config of a policy directory: it must hold a config.json that transformers
    reads, weights (``*.safetensors``) and a tokenizer; else a ValueError naming it."""
    path = Path(path)
    needs = "pass a model directory (config.json, *.safetensors and a tokenizer)"
    config = path / "config.json"
    if not config.is_file():
        raise ValueError(f"{what} {str(path)!r} is a directory without config.json; {needs}")
    try:
        settings = json.loads(config.read_text())
    except (ValueError, OSError) as err:
        raise ValueError(f"{what} {str(path)!r}: {config.name} is not valid JSON ({err})") from err
    if not isinstance(settings, dict) or "model_type" not in settings:
        raise ValueError(f"{what} {str(path)!r}: {config.name} names no model_type; {needs}")
    if not [*path.glob("*.safetensors"), *path.glob("*.bin")]:
        raise ValueError(f"{what} {str(path)!r} holds no weights (*.safetensors); {needs}")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise ValueError(f"{what} {str(path)!r} holds no tokenizer (tokenizer.json); {needs}")
    try:
        return AutoConfig.from_pretrained(path)
    except (ValueError, OSError, KeyError) as err:
        first = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise ValueError(
            f"{what} {str(path)!r}: transformers cannot read its config ({first})"
        ) from err


def _offline() -> bool:
    """Whether the hub is off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``, now or at import)."""
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return huggingface_hub.constants.is_offline_mode() or any(
        str(flag).upper() in ("1", "ON", "YES", "TRUE") for flag in flags
    )


def ask_hub(name: str) -> None:
    """Raise if the hub does not answer that model ``name`` exists (``HfApi.model_info``, one
    request with a timeout, no retries)."""
    huggingface_hub.HfApi().model_info(name, timeout=HUB_TIMEOUT)


def check_hub_id(name: str, what: str = "--model") -> None:
    """A hub id that is neither in the local hub cache nor on a reachable hub is a ValueError
    naming it, at once: transformers would retry for about a minute. An id in the cache while
    the hub is unreachable is loaded from the cache (offline mode is turned on)."""
    cached = isinstance(huggingface_hub.try_to_load_from_cache(name, "config.json"), str)
    local = "or pass a local model directory"
    if _offline():
        if not cached:
            raise ValueError(
                f"{what} {name!r} is not a local directory and not in the hub cache, and "
                f"HF_HUB_OFFLINE is set; download it first (hf download {name}) {local}"
            )
        return
    try:
        ask_hub(name)
    except GatedRepoError:
        return  # it exists; loading it needs a token, which the load will ask for
    except RepositoryNotFoundError as err:
        raise ValueError(f"{what} {name!r}: no such model on the hub, {local}") from err
    except Exception as err:  # DNS, connection, timeout or server errors: the hub is not there
        if not cached:
            raise ValueError(
                f"{what} {name!r} is not in the hub cache and the hub cannot be reached "
                f"({type(err).__name__}); connect, {local}"
            ) from err
        os.environ["HF_HUB_OFFLINE"] = "1"  # the cached copy, without a minute of retries
        huggingface_hub.constants.HF_HUB_OFFLINE = True


def check_model(name: str | None, what: str = "--model") -> str | None:
    """``name`` if it is None, a model directory (``check_model_dir``) or a hub id that exists
    (``check_hub_id``); a path that does not exist (``./x``, ``/x``, ``x/y/z``, or ``runs/x``
    where ``runs/`` is a local directory), an empty name or one that is no hub id is an error
    naming it."""
    if name is None:
        return name
    if not name.strip():
        raise ValueError(f"{what} is empty; pass a model directory or a hub id 'org/name'")
    path = Path(name).expanduser()
    if path.is_dir():
        check_model_dir(path, what)
        return name
    local = Path(path.parts[0]).is_dir() if "/" in name else False
    if name.startswith((".", "/", "~")) or path.exists() or local or not HUB_ID.fullmatch(name):
        why = f" ({path.parts[0]}/ is a local directory)" if local else ""
        raise ValueError(
            f"{what} {name!r}: no such model directory{why}; pass a directory holding "
            "config.json and *.safetensors, or a hub id 'org/name'"
        )
    check_hub_id(name, what)
    return name


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


def _read_config_file(parser: TrlParser, args: list[str]) -> list[str]:
    """TRL's ``--config file.yaml``: its ``env`` mapping sets environment variables and every
    other key becomes the default of its argument (each of its field's type). Returns ``args``
    without the option."""
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


def parse_train(args: list[str]) -> tuple[TrainArguments, dict[str, Any]]:
    """The run's arguments, and the ``PSNGRPOConfig`` fields that were given (and only those:
    the others come from the profile and the arm)."""
    parser = make_parser([TrainArguments, PSNGRPOConfig], prog="python -m psnlib train")
    own = {f.name for f in fields(TrainArguments)}
    for action in parser._actions:
        if action.dest not in own:
            action.default = argparse.SUPPRESS  # absent from the namespace unless given
    given = vars(parser.parse_args(_read_config_file(parser, args)))
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
    script = EvalArguments(**vars(parser.parse_args(_read_config_file(parser, args))))
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
