"""A GPU check of PSN-GRPO that needs no hub: small Qwen2 and Qwen3 policies built from configs.

On CUDA, for each family (bf16) and each rollout engine found (psnlib's decoder, TRL's
``generate``, and vLLM in colocate mode where ``import vllm`` works), it checks:

- ``behaviour``: the behaviour log-probs recorded while sampling under noise (``step`` and
  ``rollout`` scope) are those of an independently perturbed copy of the policy, scored by a
  plain forward pass: much closer to it than to the clean policy;
- ``restore``: after the noisy rollouts the training weights are back, bit for bit;
- ``tis``: a training step logs finite TIS diagnostics and the KL proxy, ``tis/mean`` in (0, C];
- ``sigma0``: at sigma 0 without TIS, a step equals ``trl.GRPOTrainer``'s (same loss, reward
  and weights after the step);
- ``timing``: the mean step time of PSN-GRPO (rollout scope) over GRPO's, on the same rollouts
  sizes (reported, not judged).

vLLM runs one PSN step (colocate, sleep mode off) and the ``tis`` check on its log-probs; without
vLLM the script says so and skips it. The run ends with one line per check, PASS / FAIL / SKIP,
and exits 1 if any failed.

What it needs besides psnlib's checkout: torch (CUDA), transformers, accelerate, trl 1.16 and
datasets (with pyarrow and pandas), numpy, pyyaml, tqdm; vLLM is optional. A missing module is
reported, with the wheels to carry, before anything runs (exit 2). psnlib is imported without its
package ``__init__`` (which pulls the notebooks' scipy and plotting stack); nothing is
downloaded.

    python benchmarks/gpu_check.py              # CUDA, bf16: expected a few minutes on one H200
    python benchmarks/gpu_check.py --dry-run    # CPU, tiny fp32 models (tests/test_gpu_check.py)
    python benchmarks/gpu_check.py --out gpu_check.json   # also write the results as JSON
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# import name -> what to install (pip name and version) when it is missing
NEEDS = {
    "torch": "torch (with CUDA)",
    "transformers": "transformers>=5.10.4,<5.18",
    "accelerate": "accelerate>=1.10.1",
    "trl": "trl==1.16.0",
    "datasets": "datasets>=4.7.0",
    "pyarrow": "pyarrow>=21.0.0 (datasets)",
    "pandas": "pandas>=2.1.1 (trl, datasets)",
    "dill": "dill (datasets)",
    "multiprocess": "multiprocess (datasets)",
    "xxhash": "xxhash (datasets)",
    "fsspec": "fsspec (datasets)",
    "numpy": "numpy",
    "yaml": "pyyaml",
    "tqdm": "tqdm",
}
PROMPTS = ["7 3 5 4->22:", "1 2 3 4->10:", "9 9 1 2->18:", "5 6 7 8->3:"]


def missing_modules() -> list[str]:
    """What to install for the modules this check imports and this Python lacks."""
    return [pip for name, pip in NEEDS.items() if importlib.util.find_spec(name) is None]


def import_psnlib() -> None:
    """Make ``import psnlib.<module>`` read this checkout without running ``psnlib/__init__``."""
    if "psnlib" not in sys.modules:
        package = types.ModuleType("psnlib")
        package.__path__ = [str(ROOT / "psnlib")]
        sys.modules["psnlib"] = package


# ----------------------------------------------------------------------------- the policies


def build_policy(family: str, args: argparse.Namespace, tokenizer, dtype):
    """A randomly initialised Qwen2 or Qwen3 (per-head q_norm / k_norm) of the check's size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    shape = dict(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 3,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=max(1, args.heads // 2),  # grouped-query attention
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    }[family]
    extra = {"head_dim": 2 * args.hidden // args.heads} if family == "qwen3" else {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_cls(config_cls(**shape, **extra))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.to(dtype)


class Check:
    """Runs the checks of one policy; records one result per (check, family, engine)."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        import torch

        from psnlib.models import build_tokenizer

        self.args, self.work = args, work
        self.cuda = torch.cuda.is_available() and not args.dry_run
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        self.device = "cuda" if self.cuda else "cpu"
        self.tokenizer = build_tokenizer()
        self.results: list[dict] = []

    def record(self, check: str, family: str, engine: str, status: str, **values) -> None:
        row = {"check": check, "family": family, "engine": engine, "status": status, **values}
        self.results.append(row)
        shown = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
        )
        print(f"[gpu_check] {status:4} {check:9} {family:5} {engine:8} {shown}", flush=True)

    def policy(self, family: str):
        return build_policy(family, self.args, self.tokenizer, self.dtype).to(self.device)

    def trainer(self, family: str, engine: str, trainer_cls=None, config_cls=None, **settings):
        """A trainer of a fresh policy (saved first: vLLM and TRL's reference read a path)."""
        from datasets import Dataset
        from transformers import AutoModelForCausalLM
        from transformers.trainer_callback import PrinterCallback

        from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

        trainer_cls, config_cls = trainer_cls or PSNGRPOTrainer, config_cls or PSNGRPOConfig
        path = self.work / family
        if not path.exists():
            self.policy(family).save_pretrained(path)
            self.tokenizer.save_pretrained(path)  # vLLM loads the tokenizer from there
        model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
        a = self.args
        config = dict(
            output_dir=str(self.work / "out"),
            per_device_train_batch_size=a.prompts * a.generations,
            num_generations=a.generations,
            max_completion_length=a.tokens,
            max_steps=a.steps,
            learning_rate=1e-4,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            bf16=self.cuda,
            use_cpu=not self.cuda,
            gradient_checkpointing=False,
            disable_tqdm=True,
            seed=0,
            **settings,
        )
        if trainer_cls is PSNGRPOTrainer:
            config["rollout_engine"] = "psnlib" if engine == "psnlib" else "generate"
            if engine == "vllm":
                config.update(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=False)
                config.update(vllm_gpu_memory_utilization=0.3)
        reward = lambda completions, **_: [len(set(c)) / 10 for c in completions]  # noqa: E731
        prompts = (PROMPTS * a.prompts)[: a.prompts * max(1, a.steps)]
        trainer = trainer_cls(
            model=model,
            reward_funcs=reward,
            args=config_cls(**config),
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=self.tokenizer,
        )
        trainer.remove_callback(PrinterCallback)  # the results print one line per check
        return trainer

    def run(self, name: str, family: str, engine: str, *args) -> None:
        """One check; an exception is its FAIL, with the error, and the next check runs."""
        try:
            getattr(self, name)(family, *args)
        except Exception as err:  # a one-shot run reports every check
            self.record(name, family, engine, "FAIL", error=f"{type(err).__name__}: {err}"[:300])

    # ------------------------------------------------------------------------- the checks

    def behaviour_and_restore(self, family: str, engine: str, scope: str) -> None:
        import torch

        from psnlib.noise import noise_indices, perturbed

        trainer = self.trainer(family, engine, sigma=self.args.sigma, noise_scope=scope)
        model = trainer.model
        clean = {n: p.detach().clone() for n, p in model.named_parameters()}
        twin = self.policy(family).eval()
        twin.load_state_dict(model.state_dict())
        trainer.state.global_step = 1
        model.train()
        G = self.args.generations
        out = trainer._generate_and_score_completions(
            [{"prompt": p} for p in PROMPTS[: self.args.prompts] for _ in range(G)]
        )
        exact = all(torch.equal(p, clean[n]) for n, p in model.named_parameters())
        self.record("restore", family, f"{engine}/{scope}", "PASS" if exact else "FAIL")
        to_noisy, to_clean = [], []
        T = self.args.temperature
        for row, index in enumerate(noise_indices(self.args.prompts, G, scope).tolist()):
            prompt = out["prompt_ids"][row][out["prompt_mask"][row].bool()]
            length = int(out["completion_mask"][row].sum())
            ids = torch.cat([prompt, out["completion_ids"][row, :length]])[None]
            behaviour = out["sampling_per_token_logps"][row, :length].float()
            for sink, noisy in ((to_noisy, True), (to_clean, False)):
                sigma = None if noisy else 0.0
                with perturbed(twin, trainer.noise, 1, index, sigma), torch.no_grad():
                    logits = twin(ids).logits[0, len(prompt) - 1 : -1].float() / T
                logps = logits.log_softmax(-1).gather(1, ids[0, len(prompt) :, None])[:, 0]
                sink.append((behaviour - logps).abs())
        d_noisy = torch.cat(to_noisy).mean().item()
        d_clean = torch.cat(to_clean).mean().item()
        # bf16: the sampler's and the forward's roundings differ; the behaviour log-probs must
        # still be much nearer the noisy copy than the clean one
        ok = d_noisy < 0.25 * d_clean if self.cuda else d_noisy < 1e-4 < d_clean
        self.record(
            "behaviour", family, f"{engine}/{scope}", "PASS" if ok else "FAIL",
            to_noisy_copy=d_noisy, to_clean=d_clean,
        )  # fmt: skip

    def tis(self, family: str, engine: str) -> None:
        trainer = self.trainer(family, engine, sigma=self.args.sigma, noise_scope="rollout")
        trainer.train()
        log = trainer.state.log_history[0]
        keys = ("psn/kl_proxy", "tis/mean", "tis/max", "tis/frac_capped", "tis/ess")
        values = {k: float(log.get(k, math.nan)) for k in keys}
        ok = all(math.isfinite(v) for v in values.values()) and 0 < values["tis/mean"] <= 10
        shown = {k.replace("/", "_"): v for k, v in values.items()}
        self.record("tis", family, engine, "PASS" if ok else "FAIL", **shown)

    def sigma0(self, family: str) -> None:
        import torch
        from trl import GRPOConfig, GRPOTrainer

        runs = []
        for cls, config_cls, extra in (
            (GRPOTrainer, GRPOConfig, {}),
            (None, None, {"sigma": 0.0, "use_tis": False}),
        ):
            trainer = self.trainer(family, "generate", cls, config_cls, **extra)
            torch.manual_seed(0)  # the same sampling randomness for both
            trainer.train()
            after = {n: p.detach().float().clone() for n, p in trainer.model.named_parameters()}
            runs.append((trainer.state.log_history[0], after))
        (trl_log, trl), (psn_log, psn) = runs
        gap = max((psn[n] - trl[n]).abs().max().item() for n in trl)
        ok = psn_log["reward"] == trl_log["reward"] and gap <= (1e-2 if self.cuda else 1e-6)
        loss_gap = abs(psn_log["loss"] - trl_log["loss"])
        self.record(
            "sigma0", family, "generate", "PASS" if ok else "FAIL", weights=gap, loss=loss_gap
        )

    def timing(self, family: str) -> None:
        import torch

        times = {}
        for name, extra in (("grpo", {"sigma": 0.0, "use_tis": False}), ("psn", {})):
            trainer = self.trainer(
                family, "psnlib", sigma=extra.get("sigma", self.args.sigma),
                use_tis=extra.get("use_tis", True), noise_scope="rollout",
            )  # fmt: skip
            trainer.args.max_steps = self.args.steps + 1
            if self.cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            trainer.train()
            if self.cuda:
                torch.cuda.synchronize()
            times[name] = (time.perf_counter() - start) / trainer.state.global_step
        ratio = times["psn"] / times["grpo"]
        self.record("timing", family, "psnlib", "INFO", psn_s=times["psn"], grpo_s=times["grpo"],
                    ratio=ratio)  # fmt: skip


def engines(cuda: bool) -> tuple[list[str], str | None]:
    """The rollout engines to run, and why vLLM is not among them (None if it is)."""
    found = ["psnlib", "generate"]
    if importlib.util.find_spec("vllm") is None:
        return found, "vLLM is not importable here (pip install 'psnlib[gpu]' for it)"
    if not cuda:
        return found, "vLLM needs CUDA (dry run or no GPU)"
    return [*found, "vllm"], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny fp32 models")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    missing = missing_modules()
    if missing:
        wheels = "carried wheels: pip install --no-index --find-links WHEELS ..."
        print(
            f"[gpu_check] missing modules; install ({wheels}): {'; '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    import_psnlib()
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    cuda = torch.cuda.is_available() and not args.dry_run
    sizes = (
        dict(hidden=512, layers=8, heads=8, prompts=8, generations=8, tokens=128, steps=2)
        if cuda
        else dict(hidden=32, layers=2, heads=4, prompts=2, generations=4, tokens=8, steps=1)
    )
    vars(args).update(sizes, sigma=0.01 if cuda else 0.05, temperature=1.0)
    if not cuda and not args.dry_run:
        print("[gpu_check] no CUDA device: running the CPU dry run", flush=True)
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    print(f"[gpu_check] {device}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, sizes {sizes}", flush=True)  # fmt: skip
    found, no_vllm = engines(cuda)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        check = Check(args, Path(work))
        for family in ("qwen2", "qwen3"):
            for engine in found:
                if engine != "vllm":  # vLLM's log-probs are TRL's correction's; see tis
                    for scope in ("step", "rollout"):
                        check.run("behaviour_and_restore", family, engine, engine, scope)
                check.run("tis", family, engine, engine)
            check.run("sigma0", family, "generate")
            check.run("timing", family, "psnlib")
            if no_vllm:
                check.record("vllm", family, "vllm", "SKIP", reason=no_vllm)
    seconds = time.perf_counter() - start
    failed = [r for r in check.results if r["status"] == "FAIL"]
    print(f"[gpu_check] {len(check.results)} results, {len(failed)} failed, {seconds:.0f} s")
    if args.out:
        summary = {"device": device, "seconds": seconds, "results": check.results}
        args.out.write_text(json.dumps(summary, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
