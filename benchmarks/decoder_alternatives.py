"""Alternatives to the evaluation decoder's kernels that issue 18 measured and did not adopt, each
as a ratio against what psnlib does, timed in the same run at one thread.

- ``precision``: the whole policy in bf16 against float32, sampling ``--problems`` countdown-l3
  problems x 512 with token statistics (as an evaluation does), CPU seconds.
- ``compile``: ``torch.compile(dynamic=True)`` of one decoder layer's dense part (input norm, q/k/v
  projections, rotary; then output projection, residual, norm, gated MLP) against eager, per
  call, at 300 / 500 / 900 / 1500 nodes (random activations, the policy's first layer); the
  compile time is printed too.
- ``attention``: attention scores over each node's own tokens, 300 nodes x 30 tokens, by the
  decoder's einsum against elementwise products, a node-first cache with ``matmul``, and
  ``scaled_dot_product_attention`` (scores and values), per call.
- ``batch``: sampling in batches of 4,096 rows against the evaluation's 2,048, CPU seconds, and
  whether the tokens are identical.

The policy is ``--policy`` or the cached cpu base policy (``sampling.load_model``).

    PSNLIB_DATA=<data> python benchmarks/decoder_alternatives.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from sampling import load_model  # benchmarks/sampling.py, beside this file

from psnlib.decoder import rms_norm, rotate
from psnlib.sampling import sample_prompts
from psnlib.tasks import load_benchmark


def per_call(f: Callable[[], object], reps: int = 100) -> float:
    """Microseconds per call of ``f``, after 5 warm-up calls."""
    for _ in range(5):
        f()
    start = time.perf_counter()
    for _ in range(reps):
        f()
    return (time.perf_counter() - start) / reps * 1e6


def sampled(model, tokenizer, prompts: list[str], batch_size: int = 2048) -> tuple[float, object]:
    """CPU seconds of sampling ``prompts`` x 512 with statistics, and the samples."""
    start = time.process_time()
    samples = sample_prompts(
        model, tokenizer, prompts, 512, with_stats=True, batch_size=batch_size, progress=False
    )
    return time.process_time() - start, samples


def precision(model, tokenizer, prompts: list[str]) -> None:
    fp32, _ = sampled(model, tokenizer, prompts)
    bf16, _ = sampled(model.to(torch.bfloat16), tokenizer, prompts)
    model.to(torch.float32)
    print(f"precision: bf16 / float32 sampling {bf16 / fp32:.2f} ({bf16:.2f} vs {fp32:.2f} CPU s)")


def dense_layer(model) -> tuple[Callable, Callable]:
    """The decoder's dense work of the first layer before and after attention."""
    layer = model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    H = model.config.num_attention_heads

    def before(h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = rms_norm(layer.input_layernorm, h)  # (N, C)
        qk = torch.cat([attn.q_proj(x), attn.k_proj(x)], -1).view(len(h), 2 * H, -1)
        q, k = rotate(qk, cos, sin).split([H, H], dim=1)  # (N, H, D) each
        return q * attn.scaling, k, attn.v_proj(x).view(len(h), H, -1)

    def after(h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = h + attn.o_proj(y.flatten(1))
        x = rms_norm(layer.post_attention_layernorm, h)
        return h + mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x))

    return before, after


def compiled(model) -> None:
    before, after = dense_layer(model)
    C, H = model.config.hidden_size, model.config.num_attention_heads
    D = C // H
    start = time.perf_counter()
    before_c, after_c = torch.compile(before, dynamic=True), torch.compile(after, dynamic=True)
    for m in (500, 900):  # compile once for dynamic shapes
        before_c(torch.randn(m, C), torch.randn(m, 1, D), torch.randn(m, 1, D))
        after_c(torch.randn(m, C), torch.randn(m, H, D))
    print(f"compile: {time.perf_counter() - start:.0f} s to compile; compiled / eager per call:")
    for m in (300, 500, 900, 1500):
        args = torch.randn(m, C), torch.randn(m, 1, D), torch.randn(m, 1, D), torch.randn(m, H, D)
        eager = per_call(lambda a=args: (before(*a[:3]), after(a[0], a[3])))
        fused = per_call(lambda a=args: (before_c(*a[:3]), after_c(a[0], a[3])))
        print(f"  {m:>5} nodes: {fused / eager:.2f} ({fused:.0f} vs {eager:.0f} us)")


def attention(model, m: int = 300, T: int = 30) -> None:
    H = model.config.num_attention_heads
    D = model.config.hidden_size // H
    keys = torch.randn(48, 2048, H, D)[:T, :m]  # the decoder's (T, m, H, D) cache slice
    values = torch.randn(48, 2048, H, D)[:T, :m]
    q = torch.randn(m, H, D)
    node_first = keys.permute(1, 2, 0, 3).contiguous()  # (m, H, T, D)
    einsum = per_call(lambda: torch.einsum("tmhd,mhd->mht", keys, q))
    print(f"attention scores, {m} nodes x {T} tokens, against the einsum's {einsum:.0f} us:")
    for name, f in (
        ("elementwise", lambda: (keys * q).sum(-1)),
        ("node-first matmul", lambda: torch.matmul(node_first, q[..., None])),
        (
            "sdpa (scores and values)",
            lambda: F.scaled_dot_product_attention(
                q[:, :, None], keys.permute(1, 2, 0, 3), values.permute(1, 2, 0, 3)
            ),
        ),
    ):
        us = per_call(f)
        print(f"  {name:<26} {us / einsum:.2f} ({us:.0f} us)")


def batch(model, tokenizer, prompts: list[str]) -> None:
    small, a = sampled(model, tokenizer, prompts, 2048)
    large, b = sampled(model, tokenizer, prompts, 4096)
    same = torch.equal(a.tokens, b.tokens)
    print(
        f"batch: 4096 / 2048 rows {large / small:.2f} ({large:.2f} vs {small:.2f} CPU s); "
        f"identical tokens: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=None, help="a saved policy directory")
    parser.add_argument("--problems", type=int, default=20, help="countdown-l3 problems")
    args = parser.parse_args()
    if args.problems < 1:
        raise SystemExit(f"--problems must be >= 1, got {args.problems}")
    torch.set_num_threads(1)
    args.random, args.max_new_tokens = False, 48  # what sampling.load_model reads
    model, tokenizer, name = load_model(args)
    prompts = list(load_benchmark("countdown-l3", args.problems, seed=0)["prompt"])
    print(f"{name}; 1 thread")
    with torch.inference_mode():
        precision(model, tokenizer, prompts)
        compiled(model)
        attention(model)
    batch(model, tokenizer, prompts)


if __name__ == "__main__":
    main()
