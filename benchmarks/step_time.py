"""Step time of GRPO against PSN-GRPO (``step`` and ``rollout`` noise scope, fixed sigma), of the
diversity sigma scheduler (Variant II, ``rollout`` scope) against fixed sigma, and of GRPO with
psnlib's rollout sampler against TRL's ``GRPOTrainer`` sampling with ``generate``.

``grpo`` is ``PSNGRPOTrainer`` at sigma 0 without TIS: TRL's GRPO step on rollouts from
``psnlib.sampling`` (tests/test_trainer.py checks the step equals ``GRPOTrainer``'s on the same
completions), so the PSN ratios measure the cost of the noise alone; ``trl-grpo`` is the stock
``GRPOTrainer``. All trainers run the same tiny policy on the same Countdown prompts, with
full-length rollouts (the diversity scheduler's two clean answers per prompt too). They take
turns (a few steps each, the order rotating every round), so drift in machine load hits all of
them alike.
Each step is timed from ``on_step_begin`` to ``on_step_end`` (generation, loss, backward,
optimizer step and the sigma update), in wall time and in the process's CPU time (the steadier
of the two when other jobs share the cores). A ratio is the median over rounds of the two
trainers' mean step times in that round: turns of one round run minutes apart at most, so a
change of machine load between rounds cancels out.

    python benchmarks/step_time.py                         # the cpu batch: ~8 minutes
    python benchmarks/step_time.py --prompts 8 --rounds 3  # quicker, noisier
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.replication.plan.profiles import get_profile
from psnlib.tasks import countdown_reward, rl_train_set
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

NAMES = ("trl-grpo", "grpo", "psn-step", "psn-rollout", "psn-div")
# Acceptance: median step time over that of a reference trainer (the paper reports an 8%
# throughput cost for Variant II).
BOUNDS = {
    "psn-step": ("grpo", 1.10),
    "psn-rollout": ("grpo", 1.30),
    "psn-div": ("psn-rollout", 1.15),
}


class StepTimer(TrainerCallback):
    """Wall and CPU time of every optimizer step, generation included."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self.start = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs) -> None:
        self.wall.append(time.perf_counter() - self.start[0])
        self.cpu.append(time.process_time() - self.start[1])


def make_trainer(
    name: str, args: argparse.Namespace, output_dir: str
) -> tuple[GRPOTrainer, StepTimer]:
    settings = dict(
        output_dir=output_dir,
        per_device_train_batch_size=args.prompts * args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps_per_turn,  # per `train()` call, so the trainers can take turns
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        seed=0,
    )
    if name == "trl-grpo":
        full_length = {"min_new_tokens": args.max_completion_length}  # the same work for all
        config, trainer_cls = GRPOConfig(**settings, generation_kwargs=full_length), GRPOTrainer
    elif name == "grpo":
        config, trainer_cls = PSNGRPOConfig(**settings, sigma=0.0, use_tis=False), PSNGRPOTrainer
    elif (
        name == "psn-div"
    ):  # Variant II as the testbed runs it (psnlib.replication.compute.runs.ARMS["psn_div"])
        config = PSNGRPOConfig(
            **settings,
            sigma=args.sigma,
            noise_scope="rollout",
            sigma_scheduler="diversity",
            div_similarity="lexical",
            div_fraction=args.div_fraction,
        )
        trainer_cls = PSNGRPOTrainer
    else:
        scope = name.removeprefix("psn-")
        config = PSNGRPOConfig(**settings, sigma=args.sigma, noise_scope=scope)
        trainer_cls = PSNGRPOTrainer
    tokenizer = build_tokenizer()
    trainer = trainer_cls(
        model=tiny_policy(size=args.size, tokenizer=tokenizer, seed=0),
        reward_funcs=countdown_reward,
        args=config,
        train_dataset=rl_train_set(args.prompts, seed=0),
        processing_class=tokenizer,
    )
    trainer.remove_callback(PrinterCallback)  # no log line per step
    if trainer_cls is PSNGRPOTrainer:  # full-length rollouts: no token ends a row
        trainer.eos_token_ids = [len(tokenizer)]
    timer = StepTimer()
    trainer.add_callback(timer)
    return trainer, timer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cpu = get_profile("cpu")  # the defaults: the cpu profile's training batch
    parser.add_argument("--rounds", type=int, default=4, help="turns of each trainer")
    parser.add_argument("--steps-per-turn", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=cpu.rl_prompts_per_step)
    parser.add_argument("--generations", type=int, default=cpu.num_generations, help="G")
    parser.add_argument("--max-completion-length", type=int, default=cpu.max_completion_length)
    parser.add_argument("--size", default="base", help="tiny policy size (psnlib.models)")
    parser.add_argument("--sigma", type=float, default=0.003)
    parser.add_argument(
        "--div-fraction", type=float, default=0.5, help="psn-div: share of prompts with clean pairs"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads: 1 suits a 1M-parameter model and resists other load on the cores",
    )
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Mean ``wall`` and ``cpu`` seconds per step of each trainer in ``NAMES``, one per round."""
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {name: make_trainer(name, args, f"{tmp}/{name}") for name in NAMES}
        for trainer, timer in runs.values():  # a warm-up turn, not timed
            trainer.train()
            timer.reset()
        for round_ in range(args.rounds):
            turn = round_ % len(NAMES)
            for name in NAMES[turn:] + NAMES[:turn]:
                runs[name][0].train()
    per_turn = args.steps_per_turn
    return {
        name: {
            clock: [
                statistics.mean(times[i : i + per_turn]) for i in range(0, len(times), per_turn)
            ]
            for clock, times in (("wall", timer.wall), ("cpu", timer.cpu))
        }
        for name, (_, timer) in runs.items()
    }


def ratio(times: dict[str, dict[str, list[float]]], name: str, reference: str, clock: str) -> float:
    """Median over rounds of ``name``'s step time over ``reference``'s in the same round."""
    pairs = zip(times[name][clock], times[reference][clock], strict=True)
    return statistics.median(t / t_ref for t, t_ref in pairs)


def main() -> None:
    args = parse_args()
    times = measure(args)
    print(
        f"tiny {args.size} policy, {args.prompts} prompts x G={args.generations}, "
        f"{args.max_completion_length} tokens, sigma={args.sigma}, "
        f"{args.rounds} rounds x {args.steps_per_turn} steps, {torch.get_num_threads()} threads"
    )
    print(
        f"{'trainer':<12} {'wall s':>7} {'ratio':>6} {'cpu s':>7} {'ratio':>6} "
        f"{'bound':>6}  ratios vs"
    )
    for name, clocks in times.items():
        reference, bound = BOUNDS.get(name, ("trl-grpo" if name == "grpo" else "grpo", None))
        columns = [
            f"{statistics.median(clocks[clock]):>7.3f} {ratio(times, name, reference, clock):>6.3f}"
            for clock in ("wall", "cpu")
        ]
        print(
            f"{name:<12} {' '.join(columns)} {'' if bound is None else f'{bound:.2f}':>6}  "
            f"{reference}"
        )


if __name__ == "__main__":
    main()
