"""The command line: ``python -m psnlib train ...`` and ``python -m psnlib eval ...``.

``train`` runs one RL run the way the notebooks do, through
``psnlib.replication.compute.runs.train_run``: the profile's sizes, then the arm's settings, then
every ``PSNGRPOConfig`` field given on the command line or in a ``--config`` YAML file (TRL's
``TrlParser``; the command line wins), then ``PSNGRPOTrainer``. ``--model`` (a directory or hub id)
replaces the profile's base policy and ``--dataset`` its training set (``countdown``, judged by
``countdown_reward``, or a real one, judged by ``math_reward``). Checkpoints go to ``--output_dir``,
the trained policy to ``<output_dir>/policy``; an interrupted run resumes from its last checkpoint.
Launch it with
``accelerate launch --config_file configs/accelerate/<setup>.yaml -m psnlib train ...`` for several
GPUs or DeepSpeed (``docs/scale_out.md``).

``eval`` evaluates a saved policy on the profile's benchmarks (or ``--benchmarks``) through
``psnlib.replication.compute.evaluation.evaluate_benchmarks`` (stored under ``data/results``) and
prints pass@k. With ``--use_vllm`` (the default at profiles whose ``eval_engine`` is vLLM:
``paper``) a ``vllm.LLM`` of the policy samples (``psnlib.sampling._sample_vllm``) instead of the
psnlib decoder.

Bad input fails before any model is loaded, in one line naming the value and what is allowed
(``psnlib.replication.compute.cli_checks``, ``model_checks``): unknown profiles, arms, datasets,
benchmarks or noise targets; a value of the wrong type (in a ``--config`` file too) or out of range,
TRL's and transformers' settings that the built trainer would refuse included
(``check_trainer_settings``); a missing or damaged model directory (truncated weights too), or a hub
id or real data set that is not cached when the hub cannot be reached (or ``HF_HUB_OFFLINE`` is
set); an output directory that cannot be written, and a data directory (``PSNLIB_DATA``) that cannot
be written where the command writes there (``eval``'s results, a ``train`` whose base policy is not
built yet: ``data_dir_needs``); a ``--run_key`` that is not a plain name; options that psnlib
accepts from TRL but does not honour (``UNSUPPORTED``); a TRL whose methods the trainer overrides
have changed; a damaged committed starting point (named with the ``git checkout`` that restores it,
never trained again), or a stored result part or weak-prefix set that is a directory. ``eval``
refuses a policy with a non-finite weight once it is loaded, before sampling. A full disk, or a file
system that refuses a write, ends a run in one line too.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from accelerate import PartialState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from psnlib import sampling
from psnlib.cache import read_json
from psnlib.io import WriteFailed
from psnlib.locks import Busy, exclusive
from psnlib.models import check_finite, load_policy
from psnlib.paths import check_data_dir, check_writable, data_dir
from psnlib.replication.compute.cli_checks import (
    check_benchmarks,
    check_deepspeed,
    check_eval_engine,
    check_eval_model,
    check_eval_values,
    check_noise_targets,
    check_not_overwritten,
    check_run_inputs,
    check_supported,
    check_train_data_dir,
    check_trainer_settings,
    check_trl,
    check_vllm,
    one_line,
    write_error,
)
from psnlib.replication.compute.cli_config import (
    EvalArguments,
    TrainArguments,
    make_parser,
    read_config_file,
)
from psnlib.replication.compute.evaluation import evaluate_benchmarks
from psnlib.replication.compute.model_checks import check_data_set, check_model
from psnlib.replication.compute.runs import train_run
from psnlib.replication.compute.sitting import check_parts
from psnlib.replication.compute.store import NAME
from psnlib.replication.plan.profiles import PolicySpec, Profile, get_profile
from psnlib.replication.plan.runs import RUN_FILE, Run
from psnlib.tasks import check_dataset
from psnlib.trainer import PSNGRPOConfig
from psnlib.trainer.checkpoints import CheckpointError

COMMANDS = ("train", "eval")


def parse_train(args: list[str]) -> tuple[TrainArguments, dict[str, Any]]:
    """The run's arguments, and the ``PSNGRPOConfig`` fields that were given (and only those:
    the others come from the profile and the arm)."""
    parser = make_parser([TrainArguments, PSNGRPOConfig], prog="python -m psnlib train")
    own = {f.name for f in fields(TrainArguments)}
    for action in parser._actions:
        if action.dest not in own:
            action.default = argparse.SUPPRESS  # absent from the namespace unless given
    given = vars(parser.parse_args(read_config_file(parser, args)))
    check_supported(given)
    script = TrainArguments(**{name: given.pop(name) for name in own})
    return script, given


@dataclass
class TrainCommand:
    """A checked ``train`` command: the run (its profile with ``--model`` and ``--dataset``
    applied), the trainer config it resolves to (checkpoints in ``--output_dir``), whether to
    start afresh (``--overwrite_output_dir``), and what names its training set in errors."""

    run: Run
    config: PSNGRPOConfig
    overwrite: bool = False
    dataset_what: str = "--dataset"

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
    check_trl()
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
    check_deepspeed(overrides)
    run = Run(profile, script.arm, seed, overrides)
    try:
        config = run.config(output_dir)
    except ImportError as err:  # a package a setting needs (TrainingArguments checks them)
        raise ValueError(f"{one_line(err)}; install it, or leave out the setting") from err
    what = "--dataset" if script.dataset is not None else f"profile {profile.name!r}'s rl_dataset"
    command = TrainCommand(run, config, script.overwrite_output_dir, what)
    check_vllm(config)
    check_run_inputs(run)
    check_trainer_settings(config, profile)
    check_noise_targets(profile, config)
    check_writable(command.output_dir, "--output_dir")
    if command.overwrite:
        what = "--model" if script.model is not None else "base policy"
        check_not_overwritten(profile, command.output_dir, what)
    check_train_data_dir(config, profile)
    check_output_dir(command)
    return command


def check_train_data(command: TrainCommand) -> None:
    """The run's training set, where it is a real data set, must be in the ``datasets`` cache or
    on a hub that answers (``check_data_set``); checked after ``plan_train``, as it may ask the
    hub."""
    check_data_set(command.run.profile.rl_dataset, command.dataset_what)


def clear_output_dir(command: TrainCommand) -> None:
    """``--overwrite_output_dir``: delete the policy and the checkpoints that ``--output_dir``
    holds (an interrupted run has checkpoints and no policy yet), under its lock (``Busy`` if
    another process holds it), by the main process of a launch."""
    out, processes = command.output_dir, PartialState()
    if processes.is_main_process and out.is_dir():
        with exclusive(out, f"clearing {out} for a fresh run"):
            for path in [out / "policy", *out.glob(f"{PREFIX_CHECKPOINT_DIR}-*")]:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
    processes.wait_for_everyone()


def train(command: TrainCommand) -> Path:
    """Train the command's run into ``<output_dir>/policy`` (``runs.train_run``: checkpoints in
    ``--output_dir``, its lock held, so a second ``train`` into it is refused with
    ``psnlib.locks.Busy``, the run's record in ``RUN_FILE`` once training starts); a finished run is
    left as it is; ``--overwrite_output_dir`` first clears it (``clear_output_dir``). Returns the
    policy's directory."""
    policy = command.output_dir / "policy"
    if command.overwrite:
        clear_output_dir(command)
    if train_run(command.run, command.config, policy) is None:
        print(f"finished already: {policy}")
    return policy


def _bare(args: list[str], i: int, flags: tuple[str, ...]) -> bool:
    """Whether ``args[i]`` is one of ``flags`` without a value after it."""
    return args[i] in flags and (i + 1 == len(args) or args[i + 1].startswith("-"))


def default_run_key(model: str) -> str:
    """The name of a policy's results: its directory's name where that is a file-safe name
    (``NAME``), else made one (each run of other characters, a space say, becomes ``_``)."""
    name = Path(model).resolve().name
    if NAME.fullmatch(name):
        return name
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", name).lstrip("_.+-") or "policy"


def plan_eval(args: list[str]) -> tuple[EvalArguments, Profile, tuple[str, ...]]:
    """Parse and check an ``eval`` command line: its arguments, profile, benchmarks, policy
    directory, run key (``default_run_key`` where none is given) and sampling settings, and
    that its results can be stored."""
    parser = make_parser([EvalArguments], prog="python -m psnlib eval")
    # a bare --use_vllm means true (its default, None, is "the profile's", so argparse wants a
    # value)
    flags = ("--use_vllm", "--use-vllm")
    args = [x for i, a in enumerate(args) for x in ([a, "true"] if _bare(args, i, flags) else [a])]
    script = EvalArguments(**vars(parser.parse_args(read_config_file(parser, args))))
    profile = get_profile(script.profile)
    benchmarks = check_benchmarks(profile, script.benchmarks)
    check_eval_model(script.model)
    check_eval_values(
        script.seed,
        script.vllm_gpu_memory_utilization,
        script.vllm_tensor_parallel_size,
        script.run_key,
    )
    script.run_key = script.run_key or default_run_key(script.model)
    check_parts(profile, script.run_key)
    check_data_dir()
    if script.use_vllm is None:
        script.use_vllm = profile.eval_engine == "vllm"
    check_eval_engine(script.use_vllm, profile, script.vllm_tensor_parallel_size)
    return script, profile, benchmarks


def check_eval_data(script: EvalArguments, profile: Profile, benchmarks: tuple[str, ...]) -> None:
    """Each real benchmark to evaluate on must be in the ``datasets`` cache or on a hub that
    answers (``check_data_set``), but one whose results are stored under the run key (a part in
    ``<data>/results/<profile>/<run_key>-*/``), which may need no loading; checked after
    ``plan_eval``, as it may ask the hub."""
    results = data_dir() / "results" / profile.name
    stored = {part.stem for part in results.glob(f"{script.run_key}-*/*.json")}
    what = "--benchmarks" if script.benchmarks else f"profile {profile.name!r}'s benchmark"
    for name in benchmarks:
        if name not in stored:
            check_data_set(name, what)


def evaluate(script: EvalArguments, profile: Profile, benchmarks: tuple[str, ...]) -> dict:
    """Evaluate the policy (results stored by ``evaluate_benchmarks``), print pass@k per
    benchmark and k, and return the tables. A policy with a NaN or infinite weight is refused
    (a ValueError naming it) before any sampling: it would score 0 as if it had been
    evaluated."""
    model, tokenizer = load_policy(script.model)  # on the CPU: for the weights' fingerprint
    check_finite(model, f"--model {script.model!r} cannot be evaluated")
    engine = None
    if script.use_vllm:
        engine = sampling.vllm.LLM(
            model=script.model,
            dtype="auto",
            seed=script.seed,
            gpu_memory_utilization=script.vllm_gpu_memory_utilization,
            tensor_parallel_size=script.vllm_tensor_parallel_size,
        )
    run_key = script.run_key or default_run_key(script.model)
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
    before anything is loaded; a full disk, an unreachable hub or a refused policy, with one
    once it is found."""
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m psnlib {{{','.join(COMMANDS)}}} [--help] [options]"
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{usage}\n\n{__doc__.strip()}")
        return
    if not argv or argv[0] not in COMMANDS:
        sys.exit(usage)
    command, args = argv[0], argv[1:]
    error = f"psnlib {command}: error:"
    try:
        if command == "train":
            checked = plan_train(args)
            check_train_data(checked)
        else:
            checked = plan_eval(args)
            check_eval_data(*checked)
    except ValueError as err:
        sys.exit(f"{error} {one_line(err)}")
    try:
        if command == "train":
            policy = train(checked)
            print(f"trained policy: {policy}")
        else:
            evaluate(*checked)
    except Busy as err:
        sys.exit(f"{error} {err}; wait for it to finish, or pass another --output_dir")
    except (ValueError, FloatingPointError, CheckpointError) as err:
        # settings only the built trainer can judge (a hub model's noise targets), a run that
        # went non-finite, a policy with a non-finite weight, a checkpoint that cannot be written
        # or resumed: one line each
        sys.exit(f"{error} {one_line(err)}")
    except WriteFailed as err:  # psnlib.io's one line: the path, the cause, what to do
        sys.exit(f"{error} {one_line(err)}")
    except ConnectionError as err:  # the hub went away after the checks
        sys.exit(f"{error} {one_line(err)}; connect, or run again once the hub can be reached")
    except Exception as err:
        message = write_error(err, command)
        if message is None:
            raise
        sys.exit(f"{error} {message}")
