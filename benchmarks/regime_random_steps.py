"""How often random valid steps leave a Countdown problem solvable (issue 16): the goal-blind
baseline of a policy's "alive before the last step" (benchmarks/regime_probe.py).

For 100 problems of each level and 64 draws each, take one and then two random valid steps (a
random pair of available values, a random op of + - *) and check with
``psnlib.tasks.prefix_quality.finish_attempt`` whether the values left can still reach the target.

    python benchmarks/regime_random_steps.py
"""

from __future__ import annotations

import random

from psnlib.tasks import load_benchmark
from psnlib.tasks.countdown import Problem, apply_op
from psnlib.tasks.prefix_quality import finish_attempt


def random_step(pool: list[int], rng: random.Random) -> tuple[list[int], str]:
    """The values left after one random valid step, and the step as written."""
    while True:
        i, j = rng.sample(range(len(pool)), 2)
        a, b, op = pool[i], pool[j], rng.choice("+-*")
        a, b = (b, a) if op == "-" and a < b else (a, b)
        c = apply_op(a, op, b)
        if c is not None:
            return [v for k, v in enumerate(pool) if k not in (i, j)] + [c], f"{a}{op}{b}={c}"


def main() -> None:
    rng = random.Random(0)
    for name in ("countdown-l1", "countdown-l3", "countdown-l5"):
        alive, draws = {1: 0, 2: 0}, 0
        for row in load_benchmark(name, 100, seed=0):
            problem = Problem(tuple(row["numbers"]), row["target"])
            for _ in range(64):
                pool, steps = list(problem.numbers), []
                for depth in (1, 2):
                    pool, step = random_step(pool, rng)
                    steps.append(step)
                    alive[depth] += finish_attempt(problem, ",".join(steps) + ",") is not None
                draws += 1
        print(name, {f"alive after {d}": round(v / draws, 4) for d, v in alive.items()})


if __name__ == "__main__":
    main()
