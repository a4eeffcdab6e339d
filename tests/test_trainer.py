import importlib.util
import json
from pathlib import Path

import pytest
import torch
from conftest import PROMPTS, G, distinct_chars, tiny_settings, tiny_trainer
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from psnlib.advantages import passk_advantages
from psnlib.models import build_tokenizer, tiny_policy
from psnlib.noise import noise_indices, perturbed
from psnlib.schedulers import DiversitySigma, KLTargetSigma, self_certainty
from psnlib.tis import tis_weights
from psnlib.trainer import SCHEDULER_STATE, PSNGRPOConfig, PSNGRPOTrainer

GENERATE = {"rollout_engine": "generate"}  # TRL's own sampler, for exact comparisons with TRL


def first_is_digit(completions: list[str], **kwargs) -> list[float]:
    """A binary reward, for Pass@k training."""
    return [float(c[:1].isdigit()) for c in completions]


# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.floats]  # tests/conftest.py


def generation_batch(prompts: list[str]) -> list[dict]:
    return [{"prompt": p} for p in prompts for _ in range(G)]  # prompt-major, as TRL's sampler


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def logits_of(model, prompt_ids, completion_ids) -> torch.Tensor:
    """Logits (C, V) of the distributions one unpadded completion was sampled from, by a forward."""
    ids = torch.cat([prompt_ids, completion_ids])[None]  # (1, P + C)
    with torch.no_grad():
        return model(ids).logits[0, len(prompt_ids) - 1 : -1].float()


def logps_of(model, prompt_ids, completion_ids, temperature: float) -> torch.Tensor:
    """Log-probs of one unpadded completion after its prompt, by a plain forward pass."""
    logits = logits_of(model, prompt_ids, completion_ids)  # (C, V)
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, completion_ids[:, None])[:, 0]


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sigma": -0.001}, r"sigma must be a finite number >= 0.*-0.001"),
        ({"tis_cap": 0.0}, r"cap must be a finite number > 0.*got 0.0"),
        ({"tis_cap": -2.0}, r"cap must be a finite number > 0.*got -2.0"),
        ({"tis_level": "batch"}, r"'batch'; allowed: token, sequence"),
        ({"noise_scope": "token"}, r"'token'; allowed: step, prompt, rollout"),
        ({"noise_targets": ["mlp("]}, r"'mlp\(' is neither a site"),
        ({"advantage_mode": "rloo"}, r"'rloo'; allowed: grpo, passk"),
        ({"sigma_scheduler": "cosine"}, r"'cosine'; allowed: fixed, kl_target, diversity"),
        ({"sigma_scheduler": "kl_target", "kl_target": 0.0}, r"kl_target must be .* > 0"),
        ({"sigma_scheduler": "kl_target", "kl_factor": 1.0}, r"kl_factor must be .* > 1"),
        (
            {"sigma_scheduler": "kl_target", "sigma_min": 0.1, "sigma_max": 0.01},
            r"inverted: sigma_min=0.1 > sigma_max=0.01",
        ),
        ({"sigma_scheduler": "kl_target", "sigma": 0.0}, r"within \[sigma_min, sigma_max\]"),
        ({"sigma_scheduler": "diversity", "div_lam": 1.5}, r"div_lam .* \[0, 1\], got 1.5"),
        ({"sigma_scheduler": "diversity", "div_lam": -0.5}, r"div_lam .* \[0, 1\]"),
        ({"sigma_scheduler": "diversity", "div_beta": 1.0}, r"div_beta .* \(0, 1\), got 1.0"),
        ({"sigma_scheduler": "diversity", "div_beta": 0.0}, r"div_beta .* \(0, 1\)"),
        (
            {"sigma_scheduler": "diversity", "div_fraction": 0.0},
            r"div_fraction must be in \(0, 1\]",
        ),
        ({"sigma_scheduler": "diversity", "div_similarity": "bert"}, r"'bert'; allowed: auto"),
        (
            {"advantage_mode": "passk", "passk_k": G + 1},
            rf"passk_k must be between 1 and num_generations={G}.*got {G + 1}",
        ),
        (
            {"use_transformers_continuous_batching": True},
            r"set use_transformers_continuous_batching=False",
        ),
    ],
)
def test_bad_settings_fail_at_config_time(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        PSNGRPOConfig(**tiny_settings(tmp_path, **overrides))


def test_scheduler_settings_only_matter_for_their_scheduler(tmp_path):
    config = PSNGRPOConfig(**tiny_settings(tmp_path, sigma=0.0, div_beta=2.0, kl_target=-1.0))
    assert config.sigma_schedule().step() == 0.0  # fixed: bounds and targets are not read


def test_noise_targets_may_be_one_string(tmp_path):
    config = PSNGRPOConfig(**tiny_settings(tmp_path, noise_targets="attn"))
    assert config.noise_config().targets == ("attn",)


def test_passk_k_is_only_checked_in_passk_mode(tmp_path):
    assert PSNGRPOConfig(**tiny_settings(tmp_path, passk_k=G + 1)).advantage_mode == "grpo"


def test_target_matching_no_parameter_fails_when_the_trainer_is_built(tmp_path):
    with pytest.raises(ValueError, match=r"'conv_\.\*' matches no parameter.*mlp\.up_proj"):
        tiny_trainer(tmp_path, noise_targets=["mlp", "conv_.*"])


def test_diversity_scheduler_needs_linear_noise_targets(tmp_path):
    with pytest.raises(ValueError, match=r"nn.Linear layers only.*RMSNorm"):
        tiny_trainer(tmp_path, sigma_scheduler="diversity", noise_targets=["mlp", "norm"])
    with pytest.raises(ValueError, match=r"nn.Linear layers only.*RMSNorm"):
        tiny_trainer(tmp_path, noise_scope="rollout", noise_targets=["mlp", "norm"])


def test_psnlib_rollouts_need_a_llama_layout_model_and_plain_sampling(tmp_path):
    with pytest.raises(ValueError, match=r"got \{'top_p': 0.9\}; set rollout_engine='generate'"):
        PSNGRPOConfig(**tiny_settings(tmp_path, top_p=0.9))
    assert (
        PSNGRPOConfig(**tiny_settings(tmp_path, top_p=0.9, rollout_engine="generate")).top_p == 0.9
    )
    with pytest.raises(ValueError, match=r"unknown rollout_engine 'vllm'; allowed: psnlib"):
        PSNGRPOConfig(**tiny_settings(tmp_path, rollout_engine="vllm"))


# ----------------------------------------------------------------------------- equivalence


class GradientsBeforeTheStep(TrainerCallback):
    """Keeps the gradients the optimizer is about to apply (after clipping)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.grads = model, {}

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters()}


@pytest.mark.parametrize("groups", [1, 4])
def test_sigma0_without_tis_is_exactly_a_grpo_step(tmp_path, groups):
    """One loss group runs TRL's forward: the same arithmetic, so the loss, the gradients and the
    step equal TRL's bit for bit. Four (the default) run the loss forward without padding: other
    matmul shapes sum each gradient entry's n token rows in another order, so the gradients may
    differ by float32 rounding, at most about n * u (u = 2**-24) of the tensor's gradient scale;
    the loss, a mean of per-token terms of size O(1) (advantages scaled to unit spread, ratios 1
    at sigma 0), by about n * u. The step itself is then not compared: Adam divides a near-zero
    gradient entry by its own size, so rounding there moves a weight by up to lr."""
    runs = {}
    psn = {"sigma": 0.0, "use_tis": False, "loss_groups": groups, **GENERATE}
    for name, trainer_cls, config_cls, extra in [
        ("trl", GRPOTrainer, GRPOConfig, {}),
        ("psn", PSNGRPOTrainer, PSNGRPOConfig, psn),
    ]:
        trainer = tiny_trainer(tmp_path / name, trainer_cls, config_cls, **extra)
        grab = GradientsBeforeTheStep(trainer.model)
        trainer.add_callback(grab)
        before = params(trainer.model)
        torch.manual_seed(0)  # the same sampling randomness for both
        trainer.train()
        runs[name] = (trainer.state.log_history[0], before, grab.grads, params(trainer.model))
    (trl_log, trl_before, trl_grads, trl_after) = runs["trl"]
    (psn_log, psn_before, psn_grads, psn_after) = runs["psn"]
    assert psn_log["reward"] == trl_log["reward"]  # the same rollouts
    rows = len(PROMPTS[:2]) * G * (max(map(len, PROMPTS)) + 8)  # token rows: B x (prompt + 8)
    u = 2.0**-24
    for name in trl_after:
        torch.testing.assert_close(psn_before[name], trl_before[name], rtol=0, atol=0)
    if groups == 1:
        assert psn_log["loss"] == trl_log["loss"]
        for name in trl_after:
            assert torch.equal(psn_grads[name], trl_grads[name]), name
            assert torch.equal(psn_after[name], trl_after[name]), name
    else:
        assert psn_log["loss"] == pytest.approx(trl_log["loss"], rel=0, abs=rows * u)
        for name, want in trl_grads.items():
            scale = want.abs().max().item()
            torch.testing.assert_close(psn_grads[name], want, rtol=0, atol=rows * u * scale)
    moved = [name for name in trl_after if not torch.equal(trl_after[name], trl_before[name])]
    assert len(moved) == len(trl_after)  # the step really changed every weight


def test_psnlib_rollouts_train_exactly_like_trl_on_the_same_completions(tmp_path, monkeypatch):
    """The psnlib engine changes only who samples: TRL's step on its completions is the same."""
    psn = tiny_trainer(tmp_path / "psn", sigma=0.0, use_tis=False, loss_groups=1)
    sampled = []
    generate = psn._generate_single_turn
    monkeypatch.setattr(
        psn, "_generate_single_turn", lambda *a: sampled.append(generate(*a)) or sampled[-1]
    )
    before = params(psn.model)
    psn.train()
    trl = tiny_trainer(tmp_path / "trl", GRPOTrainer, GRPOConfig)
    monkeypatch.setattr(trl, "_generate_single_turn", lambda *a: (sampled[0][0], None))
    trl.train()
    psn_log, trl_log = psn.state.log_history[0], trl.state.log_history[0]
    assert psn_log["loss"] == pytest.approx(trl_log["loss"], abs=1e-7)
    assert psn_log["reward"] == trl_log["reward"]
    trl_after = params(trl.model)
    for name, p in psn.model.named_parameters():
        torch.testing.assert_close(p.detach(), trl_after[name], rtol=1e-6, atol=1e-7)
    assert all(not torch.equal(p, before[n]) for n, p in psn.model.named_parameters())


# ----------------------------------------------------------------------------- behaviour log-probs


@pytest.mark.parametrize("engine", ["psnlib", "generate"])
@pytest.mark.parametrize(
    ("scope", "scheduler"),
    [("step", "fixed"), ("prompt", "fixed"), ("rollout", "fixed")]
    + [("step", "diversity"), ("rollout", "diversity")],  # clean pairs share the rollout batch
)
def test_behaviour_logps_are_those_of_an_independently_perturbed_copy(
    tmp_path, scope, scheduler, engine
):
    trainer = tiny_trainer(
        tmp_path,
        sigma=0.05,
        noise_scope=scope,
        temperature=0.8,
        sigma_scheduler=scheduler,
        div_similarity="lexical",
        rollout_engine=engine,
    )
    model = trainer.model
    clean = params(model)
    reference = tiny_policy(size="smoke", tokenizer=build_tokenizer(), seed=0).eval()  # a twin
    trainer.state.global_step = 3
    model.train()
    output = trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
    for name, p in model.named_parameters():
        assert torch.equal(p, clean[name]), name  # the clean weights are back, bit-exact

    behaviour = output["sampling_per_token_logps"]  # (B, T)
    indices = noise_indices(2, G, scope)
    noisy_vs_clean = []
    for row, index in enumerate(indices.tolist()):
        prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()]
        length = int(output["completion_mask"][row].sum())
        completion = output["completion_ids"][row, :length]
        with perturbed(reference, trainer.noise, step=3, index=index):
            expected = logps_of(reference, prompt, completion, temperature=0.8)
        torch.testing.assert_close(behaviour[row, :length], expected, atol=2e-5, rtol=1e-4)
        clean_logps = logps_of(reference, prompt, completion, temperature=0.8)
        noisy_vs_clean.append((expected - clean_logps).abs().max().item())
    assert max(noisy_vs_clean) > 1e-3  # the noise was large enough to test something


def test_tis_weights_multiply_the_per_token_loss(tmp_path):
    trainer = tiny_trainer(tmp_path, sigma=0.05, noise_scope="rollout", tis_cap=1.1)
    trainer.model.train()
    inputs = trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
    mask = inputs["completion_mask"]
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention = torch.cat([inputs["prompt_mask"], mask], dim=1)
    with torch.no_grad():
        clean, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, attention, mask.size(1)
        )
    weights = tis_weights(clean, inputs["sampling_per_token_logps"], mask, cap=1.1)
    assert (weights == 1.1).any() and (weights < 1.0).any()  # both the cap and the ratio act
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop otherwise
    per_token = -inputs["advantages"][:, None] * weights  # the clipped ratio is 1 on-policy
    expected = (per_token * mask).sum() / mask.sum()  # TRL's default loss_type "dapo"
    loss = trainer.compute_loss(trainer.model, inputs)
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-5)

    trainer.args.use_tis = False
    untouched = trainer.compute_loss(trainer.model, inputs)
    expected = (-inputs["advantages"][:, None] * mask).sum() / mask.sum()
    torch.testing.assert_close(untouched, expected, atol=1e-6, rtol=1e-5)


def test_off_policy_updates_fold_tis_into_the_advantages(tmp_path):
    # Two optimizer steps per generation batch: TRL keeps rollout-time clean log-probs.
    trainer = tiny_trainer(tmp_path, sigma=0.05, num_iterations=2, tis_cap=2.0)
    assert trainer.off_policy_mask_threshold is None  # no TIS in the loss on this path
    trainer.model.train()
    output = trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
    mask = output["completion_mask"]
    weights = tis_weights(
        output["old_per_token_logps"], output["sampling_per_token_logps"], mask, cap=2.0
    )
    assert output["advantages"].shape == mask.shape
    rewards = trainer._rewards_per_func[:, 0]
    grouped = rewards.view(-1, G)
    base = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    torch.testing.assert_close(output["advantages"], base.view(-1, 1) * weights)


# ----------------------------------------------------------------------------- training


def test_a_noisy_training_step_logs_psn_metrics(tmp_path):
    trainer = tiny_trainer(tmp_path, sigma=0.05, noise_scope="rollout")
    before = params(trainer.model)
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["psn/sigma"] == 0.05
    assert log["psn/kl_proxy"] != 0  # a Monte-Carlo estimate from 64 tokens: either sign
    assert 0 < log["tis/ess"] <= 1 and log["tis/max"] <= 10.0
    assert {"tis/mean", "tis/frac_capped", "reward", "entropy", "loss"} <= set(log)
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())


def test_evaluation_samples_the_clean_policy(tmp_path):
    trainer = tiny_trainer(tmp_path, sigma=0.05)
    trainer.model.eval()
    prompt_ids = [build_tokenizer()(p)["input_ids"] for p in PROMPTS[:2] for _ in range(G)]
    _, logprobs = trainer._generate_single_turn(prompt_ids, None, {}, G)
    assert logprobs is None  # TRL's own path: no noise, no behaviour log-probs


def test_passk_mode_replaces_the_advantages(tmp_path):
    trainer = tiny_trainer(tmp_path, advantage_mode="passk", passk_k=2, reward=first_is_digit)
    trainer.model.train()
    output = trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
    rewards = trainer._rewards_per_func[:, 0]
    expected = passk_advantages(rewards.view(-1, G), 2).view(-1)
    assert torch.equal(output["advantages"], expected)


# ----------------------------------------------------------------------------- sigma schedulers


def test_kl_target_scheduler_updates_sigma_from_each_steps_kl_proxy(tmp_path):
    trainer = tiny_trainer(
        tmp_path,
        sigma=0.05,
        sigma_scheduler="kl_target",
        kl_target=0.01,
        kl_factor=1.5,
        max_steps=3,
    )
    trainer.train()
    log = trainer.state.log_history[:3]
    reference = KLTargetSigma(0.05, kl_target=0.01, kl_factor=1.5)
    for row, next_row in zip(log, log[1:], strict=False):
        assert next_row["psn/sigma"] == pytest.approx(reference.step(row["psn/kl_proxy"]))
    assert trainer.sigma == pytest.approx(reference.step(log[-1]["psn/kl_proxy"]))
    assert len({row["psn/sigma"] for row in log}) > 1  # the test saw sigma move


def test_diversity_scheduler_samples_clean_pairs_and_logs_every_signal(tmp_path, monkeypatch):
    trainer = tiny_trainer(
        tmp_path,
        sigma=0.05,
        noise_scope="rollout",
        sigma_scheduler="diversity",
        div_similarity="lexical",
        div_fraction=0.5,
        max_steps=3,
    )
    sampled = []  # every row's completion and log-probs, clean pairs included
    sample = trainer._sample
    monkeypatch.setattr(trainer, "_sample", lambda *a: sampled.append(sample(*a)) or sampled[-1])
    clean = tiny_policy(size="smoke", tokenizer=build_tokenizer(), seed=0).eval()  # a twin
    trainer.state.global_step = 0
    trainer.model.train()
    trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
    assert len(sampled[0][0]) == 2 * G  # the rollouts, then the pairs on their own stream
    completions, logps = sampled[1]
    assert len(completions) == 2  # half of the two prompts, answered twice
    prompt = torch.tensor(build_tokenizer()(PROMPTS[0])["input_ids"])
    certainties = []
    for ids, row_logps in zip(completions[-2:], logps[-2:], strict=True):
        logits = logits_of(clean, prompt, torch.tensor(ids))  # the clean policy's, not noisy
        want = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(row_logps), want, atol=2e-5, rtol=1e-4)
        certainties.append(self_certainty(logits).mean().item())
    assert trainer._signals["sc"][0] == pytest.approx(sum(certainties) / 2, abs=1e-5)

    trainer._signals.clear()
    trainer._metrics["train"].clear()
    trainer.train()
    log = trainer.state.log_history[:3]
    signals = {"psn/sigma", "psn/d_sem", "psn/sc", "psn/sc_norm", "psn/ind", "psn/ind_mean"}
    assert all(signals <= set(row) for row in log)
    reference = DiversitySigma(0.05)
    for row, next_row in zip(log, log[1:], strict=False):
        reference.step(d_sem=row["psn/d_sem"], sc=row["psn/sc"])
        assert row["psn/ind"] == pytest.approx(reference.metrics["ind"])
        assert next_row["psn/sigma"] == pytest.approx(reference.sigma)


@pytest.mark.parametrize("engine", ["psnlib", "generate"])
def test_variant_ii_pairs_leave_the_rollouts_unchanged(tmp_path, engine):
    """Common random numbers: Variant II's clean pairs come after the rollouts, from a stream of
    their own, so its rollouts are those of the fixed-sigma arm at the same sigma (the smallest an
    adaptive scheduler starts from: it only multiplies sigma, so 0 is not allowed)."""
    rollouts = []
    for scheduler in ("fixed", "diversity"):
        trainer = tiny_trainer(
            tmp_path / scheduler,
            sigma=1e-6,
            sigma_scheduler=scheduler,
            div_similarity="lexical",
            div_fraction=1.0,
            rollout_engine=engine,
        )
        trainer.state.global_step = 2
        trainer.model.train()
        output = trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))
        rollouts.append((output["completion_ids"], output["sampling_per_token_logps"]))
        if scheduler == "diversity":
            assert trainer._signals["d_sem"], "the pairs were sampled"
    assert torch.equal(rollouts[0][0], rollouts[1][0])
    torch.testing.assert_close(rollouts[0][1], rollouts[1][1], rtol=0, atol=0)


def test_similarity_is_pluggable(tmp_path):
    trainer = tiny_trainer(
        tmp_path, sigma_scheduler="diversity", similarity=lambda a, b: [0.25] * len(a)
    )
    trainer.train()
    assert trainer.state.log_history[0]["psn/d_sem"] == 0.25


def test_scheduler_state_is_checkpointed_and_restored(tmp_path):
    schedule = {
        "sigma": 0.05,
        "sigma_scheduler": "kl_target",
        "kl_target": 10.0,  # far above any KL proxy here: sigma rises every step
        "max_steps": 2,
    }
    trainer = tiny_trainer(tmp_path, **schedule, save_strategy="steps", save_steps=1)
    trainer.train()
    assert trainer.sigma == pytest.approx(0.05 * 1.01**2)
    saved = json.loads((tmp_path / "checkpoint-1" / SCHEDULER_STATE).read_text())
    assert saved == {"sigma": pytest.approx(0.05 * 1.01)}
    resumed = tiny_trainer(tmp_path / "resumed", **schedule)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))  # runs step 2 only
    step2 = next(row for row in resumed.state.log_history if row.get("step") == 2)
    assert step2["psn/sigma"] == pytest.approx(0.05 * 1.01)
    assert resumed.sigma == trainer.sigma


@pytest.mark.slow
def test_step_time_overhead_is_within_bounds():
    path = Path(__file__).parents[1] / "benchmarks" / "step_time.py"
    spec = importlib.util.spec_from_file_location("step_time", path)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    times = benchmark.measure(benchmark.parse_args([]))  # the defaults (the cpu batch), ~8 minutes
    ratios = {
        name: (benchmark.ratio(times, name, reference, "cpu"), reference, bound)  # CPU time:
        for name, (reference, bound) in benchmark.BOUNDS.items()  # robust to other load
    }
    over = [f"{n}: {r:.3f} x {ref}, bound {b}" for n, (r, ref, b) in ratios.items() if r > b]
    assert not over, f"step time over its bound: {over}; all: {ratios}"


# ----------------------------------------------------------------------------- weak prefixes

WEAK = ["7*3=21,", "", "9*2=18,", "5+6=11,"]  # one weak prefix per PROMPTS row; "" = none


def prefixed_trainer(tmp_path, **overrides):
    dataset = Dataset.from_dict({"prompt": PROMPTS, "weak_prefix": WEAK})
    return tiny_trainer(tmp_path, train_dataset=dataset, **overrides)


def prefix_batch(prompts: list[str], prefixes: list[str]) -> list[dict]:
    return [
        {"prompt": p, "weak_prefix": w}
        for p, w in zip(prompts, prefixes, strict=True)
        for _ in range(G)
    ]


def test_prefix_probability_is_checked_at_config_time(tmp_path):
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=rf"prefix_prob must be in \[0, 1\], got {p}"):
            PSNGRPOConfig(**tiny_settings(tmp_path, prefix_prob=p))


def test_prefix_branch_needs_the_weak_prefix_column(tmp_path):
    with pytest.raises(
        ValueError, match=r"prefix_prob=0.5 needs a 'weak_prefix' column .*'prompt'"
    ):
        tiny_trainer(tmp_path, prefix_prob=0.5)  # when the trainer is built, before training
    trainer = tiny_trainer(tmp_path, prefix_prob=0.0)
    trainer.args.prefix_prob = 0.5  # rows without a prefix string still fail at the step
    trainer.model.train()
    with pytest.raises(ValueError, match="string column 'weak_prefix'"):
        trainer._generate_and_score_completions(generation_batch(PROMPTS[:2]))


def test_with_p0_a_step_is_the_plain_trainers_step(tmp_path):
    runs = []
    for name, make in (("plain", tiny_trainer), ("p0", prefixed_trainer)):
        trainer = make(tmp_path / name, sigma=0.05, prefix_prob=0.0)
        trainer.train()
        runs.append((trainer.state.log_history[0], params(trainer.model)))
    (plain_log, plain), (p0_log, p0) = runs
    assert p0_log["loss"] == plain_log["loss"] and p0_log["reward"] == plain_log["reward"]
    assert all(torch.equal(plain[name], p0[name]) for name in plain)


def test_prefixed_groups_continue_the_prefix_and_the_reward_sees_it(tmp_path):
    seen = []

    def reward(completions, prefix, **kwargs):
        seen.extend(zip(kwargs["prompts"], prefix, strict=True))
        return distinct_chars(completions)

    trainer = prefixed_trainer(tmp_path, prefix_prob=1.0, reward=reward)
    trainer.model.train()
    output = trainer._generate_and_score_completions(prefix_batch(PROMPTS[:2], WEAK[:2]))
    tok = build_tokenizer()
    for row in range(2 * G):
        prompt, prefix = PROMPTS[row // G], WEAK[row // G]
        ids = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
        assert ids == tok(prompt + prefix)["input_ids"]  # the prefix ends the prompt
        assert seen[row] == (prompt + prefix, prefix)  # the reward judges prefix + completion
    metrics = trainer._metrics["train"]
    assert metrics["prefix/fraction"] == [1.0]
    assert metrics["prefix/tokens"] == [len("7*3=21,")]  # the second prompt's prefix is ""
    assert metrics["prefix/reward_prefixed"] and "prefix/reward_plain" not in metrics


def test_prefix_tokens_get_exactly_zero_gradient_and_completion_tokens_do_not(tmp_path):
    """The final hidden state at position j feeds only the log-prob of token j + 1: its gradient
    is zero exactly where token j + 1 is a prompt or prefix token."""
    # one loss forward over the batch (loss_groups=1), so the hook sees every row at once
    trainer = prefixed_trainer(tmp_path, sigma=0.05, prefix_prob=1.0, loss_groups=1)
    model = trainer.model.train()
    inputs = trainer._generate_and_score_completions(prefix_batch(PROMPTS[:1], WEAK[:1]))
    assert inputs["advantages"].abs().sum() > 0  # rewards differ, so the loss has a gradient
    hidden = []

    def keep(module, args, out):  # returns None: the output is unchanged
        out.retain_grad()
        hidden.append(out)

    handle = model.model.norm.register_forward_hook(keep)
    trainer.current_gradient_accumulation_steps = 1
    trainer.compute_loss(model, inputs).backward()
    handle.remove()
    grad = hidden[0].grad.abs().sum(-1)  # (B, T): prompt width + completion width
    width, prefix = inputs["prompt_ids"].size(1), len(WEAK[0])
    mask = inputs["completion_mask"].bool()
    for row in range(G):
        assert torch.all(grad[row, width - prefix - 1 : width - 1] == 0)  # predicting the prefix
        predicting = grad[row, width - 1 : width - 1 + mask.size(1)][mask[row]]
        assert torch.all(predicting > 0)  # every completion token is learned from


def test_prefixes_work_with_passk_advantages(tmp_path):
    trainer = prefixed_trainer(
        tmp_path, prefix_prob=1.0, advantage_mode="passk", passk_k=2, reward=first_is_digit
    )
    trainer.model.train()
    output = trainer._generate_and_score_completions(prefix_batch(PROMPTS[:2], WEAK[:2]))
    rewards = trainer._rewards_per_func[:, 0]
    assert torch.equal(output["advantages"], passk_advantages(rewards.view(-1, G), 2).view(-1))
    assert trainer._metrics["train"]["prefix/fraction"] == [1.0]
