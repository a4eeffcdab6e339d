"""Per-response metrics on the Countdown testbed: diversity, step-level consistency, entropy.

- Solution diversity, exact: the distinct correct solutions among a problem's samples (distinct
  ``canonical_form``: same expression tree up to commutativity and step order), against the
  number the problem has (``distinct_solutions`` over all four ops, which the verifier accepts).
- Pairwise diversity: one minus the mean similarity of random pairs of responses, with the
  ``psnlib.schedulers`` similarities (``lexical_similarity``; ``SemanticSimilarity`` with the
  ``semantic`` extra).
- Step-level self-consistency in the spirit of ReCEval (Prasad et al. 2023), exact here: the
  share of written steps whose arithmetic is right and whose operands are available (original
  numbers or earlier results), and the first failing step.
- Informativeness: how much each step raises the log-probability of the final answer. The
  answer is the chain's last step (``a op b=result``, then EOS), scored by the policy after the
  prompt and the first i steps, i = 0 .. m-1; step i's informativeness is the rise from i-1 to i.
- Mean token entropy of the responses (from ``psnlib.sampling``'s per-token entropies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from psnlib.similarity import lexical_similarity
from psnlib.tasks.countdown import (
    ALL_OPS,
    MAX_ENUMERATED_NUMBERS,
    Problem,
    Verdict,
    canonical_form,
    distinct_solutions,
    final_attempt,
    verify,
)


def distinct_forms(correct: Sequence[str]) -> int:
    """The number of distinct solutions (canonical forms) among correct completions, each read
    at its judged part (``final_attempt``: the last attempt, as ``verify`` judges it)."""
    return len({canonical_form(final_attempt(c)) for c in correct})


def distinct_correct(problem: Problem, completions: Sequence[str]) -> int:
    """The number of distinct correct solutions (canonical forms) among ``completions``."""
    return distinct_forms([c for c in completions if verify(problem, c).correct])


def solution_count(problem: Problem) -> int | None:
    """The problem's distinct correct solutions (all four ops); None above 4 numbers, where
    enumeration is out of reach."""
    if len(problem.numbers) > MAX_ENUMERATED_NUMBERS:
        return None
    return distinct_solutions(problem, ALL_OPS)


def pairwise_diversity(
    texts: Sequence[str],
    similarity: Callable[[list[str], list[str]], list[float]] = lexical_similarity,
    pairs: int = 64,
    seed: int = 0,
) -> float:
    """One minus the mean similarity of ``pairs`` random pairs of distinct responses (all pairs
    when there are fewer); NaN for fewer than two responses."""
    n = len(texts)
    if n < 2:
        return float("nan")
    rng = np.random.default_rng(seed)
    if n * (n - 1) // 2 <= pairs:
        i, j = np.triu_indices(n, k=1)
    else:
        i = rng.integers(0, n, pairs)
        j = (i + rng.integers(1, n, pairs)) % n  # uniform over the other responses
    return 1.0 - float(np.mean(similarity([texts[a] for a in i], [texts[b] for b in j])))


@dataclass(frozen=True)
class StepScore:
    """Step-level consistency of one response."""

    steps: int  # steps written (comma-separated pieces, malformed ones included)
    valid: int  # steps with right arithmetic on available operands
    first_error: int | None  # index of the first failing or malformed step

    @property
    def valid_fraction(self) -> float:
        return self.valid / self.steps if self.steps else float("nan")


def step_score(problem: Problem, completion: str, verdict: Verdict | None = None) -> StepScore:
    """ReCEval-style consistency of ``completion``, exact (``verify``'s step checks; pass its
    ``verdict`` if you have it)."""
    verdict = verify(problem, completion) if verdict is None else verdict
    text = completion.strip()
    return StepScore(
        len(text.split(",")) if text else 0, verdict.n_valid_steps, verdict.first_error
    )


@torch.no_grad()
def answer_logprobs(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contexts: list[str],
    answers: list[str],
    batch_size: int = 512,
) -> np.ndarray:
    """``log p(answer + EOS | context)`` under ``model`` for each pair, teacher-forced: (N,)."""
    if not contexts:
        return np.zeros(0)
    ctx = tokenizer(contexts, add_special_tokens=False)["input_ids"]
    ans = tokenizer(answers, add_special_tokens=False)["input_ids"]
    rows = [c + a + [tokenizer.eos_token_id] for c, a in zip(ctx, ans, strict=True)]
    out = np.zeros(len(rows))
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        ids = torch.full((len(batch), max(map(len, batch))), tokenizer.pad_token_id)  # (B, T)
        scored = torch.zeros(ids.shape, dtype=torch.bool)  # (B, T): answer and EOS tokens
        for r, row in enumerate(batch):
            ids[r, : len(row)] = torch.tensor(row)
            scored[r, len(ctx[start + r]) : len(row)] = True
        logits = model(input_ids=ids.to(model.device)).logits[:, :-1].float().cpu()  # right pad
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)
        out[start : start + len(batch)] = torch.where(scored[:, 1:], logp, 0.0).sum(-1).numpy()
    return out


def informativeness(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: Sequence[tuple[Problem, str]],
    batch_size: int = 512,
) -> list[np.ndarray]:
    """Per response (problem, completion): the rise in log p(final step) from each step, one
    value for each step but the last (which states the answer); empty below two steps. Only
    the steps parsed before any malformed piece count; the last of them is the answer."""
    contexts, answers, owner = [], [], []
    for r, (problem, completion) in enumerate(items):
        steps = [str(s) for s in verify(problem, completion).steps]
        for i in range(len(steps) if len(steps) >= 2 else 0):
            contexts.append(problem.prompt + "".join(s + "," for s in steps[:i]))
            answers.append(steps[-1])
            owner.append(r)
    logp = answer_logprobs(model, tokenizer, contexts, answers, batch_size)
    owner = np.asarray(owner, dtype=np.int64)
    return [np.diff(logp[owner == r]) for r in range(len(items))]


def mean_token_entropy(entropies: torch.Tensor, lengths: torch.Tensor) -> np.ndarray:
    """Per prompt, the mean over its responses of their mean token entropy (over their first
    ``lengths`` tokens): (P, n, L) and (P, n) -> (P,)."""
    if entropies.shape[:2] != lengths.shape or (lengths < 1).any():
        raise ValueError(
            f"entropies (P, n, L) and lengths (P, n) >= 1 must match, got shapes "
            f"{tuple(entropies.shape)} and {tuple(lengths.shape)}"
        )
    inside = torch.arange(entropies.shape[-1]) < lengths[..., None]  # (P, n, L)
    return ((entropies * inside).sum(-1) / lengths).mean(-1).double().numpy()
