"""The released code's noise site, ``every_parameter``: ``W~ = W + sigma * eps`` on every
floating-point parameter (embeddings, attention, MLP, norms, head), once per step, the training
weights clean. On every model family of ``test_model_families``; "all" keeps its meaning."""

from __future__ import annotations

import math
from contextlib import contextmanager

import pytest
import torch
from conftest import PROMPTS, G, tiny_settings, tiny_trainer
from datasets import Dataset
from test_model_families import FAMILIES, TOKENIZER, forward_logps, tiny
from torch.optim.optimizer import register_optimizer_step_pre_hook

import psnlib.noise as noise_module
from psnlib.noise import (
    NoiseConfig,
    draw_noise,
    perturbed,
    perturbed_rows,
    target_parameters,
)
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.floats]  # tests/conftest.py

EVERY_PARAMETER = "every_parameter"  # the site, by its public name
SIGMA = 0.01
EVERY = NoiseConfig(sigma=SIGMA, targets=EVERY_PARAMETER, seed=3)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Bit-exact: the same names, and torch.equal tensors."""
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


def assert_noise_like(diff: torch.Tensor, sigma: float, name: str) -> None:
    """``diff`` looks like n draws of N(0, sigma^2): mean and std within 6 standard errors
    (sigma / sqrt(n) and, for the std, sigma / sqrt(2n))."""
    n = diff.numel()
    assert abs(diff.mean().item()) < 6 * sigma / math.sqrt(n), name
    assert diff.std().item() == pytest.approx(sigma, rel=6 / math.sqrt(2 * n)), name


# ----------------------------------------------------------------------------- the site


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_parameter_perturbs_every_float_parameter_once_and_restores(family):
    model = tiny(family)
    clean = snapshot(model)
    chosen = target_parameters(model, (EVERY_PARAMETER,))
    assert set(chosen) == set(clean)  # embeddings, norms, head (untied), attention, MLP
    assert any("embed_tokens" in n for n in chosen) and any("norm" in n for n in chosen)
    with perturbed(model, EVERY, step=5, index=0):
        for name, p in model.named_parameters():
            drawn = draw_noise(clean[name], name, EVERY, 5, 0, SIGMA)
            assert torch.equal(p, clean[name] + drawn), name  # W~ = W + sigma * eps
            assert_noise_like(p.detach() - clean[name], SIGMA, name)
        embedding = clean["model.embed_tokens.weight"]
        if model.config.tie_word_embeddings:  # one tensor: perturbed once, not once per use
            assert model.lm_head.weight is model.model.embed_tokens.weight
        head = model.lm_head.weight.detach() - clean.get("lm_head.weight", embedding)
        assert_noise_like(head, SIGMA, "lm_head.weight")
    assert_same(snapshot(model), clean)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_parameter_restores_bit_exactly_when_the_body_raises(family):
    model = tiny(family)
    clean = snapshot(model)
    with pytest.raises(RuntimeError, match="boom"), perturbed(model, EVERY, step=1):
        assert not torch.equal(model.model.embed_tokens.weight, clean["model.embed_tokens.weight"])
        raise RuntimeError("boom")
    assert_same(snapshot(model), clean)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_all_still_takes_only_the_decoder_blocks_linear_layers(family):
    model = tiny(family)
    clean = snapshot(model)
    chosen = set(target_parameters(model, ("all",)))
    assert chosen < set(target_parameters(model, (EVERY_PARAMETER,)))
    with perturbed(model, NoiseConfig(sigma=SIGMA, targets="all"), step=5):
        for name, p in model.named_parameters():
            assert torch.equal(p, clean[name]) == (name not in chosen), name
            if "embed" in name or "norm" in name or "lm_head" in name:
                assert name not in chosen
    assert_same(snapshot(model), clean)


# ----------------------------------------------------------------------------- bad input


def test_an_unknown_site_is_one_line_naming_it_and_the_sites():
    with pytest.raises(ValueError, match=r"'every_parameters' matches no parameter") as err:
        target_parameters(tiny("qwen2"), ("every_parameters",))
    assert "sites: mlp, attn, all, every_parameter;" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("scope", ["prompt", "rollout"])
def test_per_row_scopes_fail_at_config_time_naming_site_scope_and_what_is_allowed(tmp_path, scope):
    settings = tiny_settings(tmp_path, noise_targets=[EVERY_PARAMETER], noise_scope=scope)
    with pytest.raises(ValueError, match=rf"'every_parameter' with noise_scope='{scope}'") as err:
        PSNGRPOConfig(**settings)
    assert "allowed: noise_scope='step', or use_vllm=True" in str(err.value)
    assert "\n" not in str(err.value)
    config = PSNGRPOConfig(**tiny_settings(tmp_path, noise_targets=EVERY_PARAMETER))
    assert config.noise_config().targets == (EVERY_PARAMETER,)  # step scope: accepted
    if scope == "rollout":  # vLLM is sent whole noisy weights per noise sample
        PSNGRPOConfig(**{**settings, "use_vllm": True})


def test_per_row_noise_refuses_the_site_in_the_library_too():
    model = tiny("qwen2")
    with (
        pytest.raises(ValueError, match=r"nn.Linear layers only; 'model\.embed_tokens\.weight'"),
        perturbed_rows(model, EVERY, step=0, indices=torch.tensor([0, 1])),
    ):
        pass


# ----------------------------------------------------------------------------- trainer


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_step_rollouts_run_under_every_parameter_noise(tmp_path, family):
    """Behaviour log-probs are those of an independently perturbed copy (the one step draw);
    the training weights come back bit-exact (Gemma-2 samples with ``generate``)."""
    model = tiny(family)
    settings = tiny_settings(
        tmp_path, sigma=SIGMA, noise_targets=[EVERY_PARAMETER], temperature=0.8
    )
    trainer = PSNGRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [len(set(c)) / 10 for c in completions],
        args=PSNGRPOConfig(**settings),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS[:2]}),
        processing_class=TOKENIZER,
    )
    clean = snapshot(trainer.model)
    trainer.state.global_step = 2
    trainer.model.train()
    output = trainer._generate_and_score_completions(
        [{"prompt": p} for p in PROMPTS[:2] for _ in range(G)]
    )
    assert_same(snapshot(trainer.model), clean)
    twin = tiny(family)
    gaps = []
    for row in range(2 * G):
        prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
        length = int(output["completion_mask"][row].sum())
        completion = output["completion_ids"][row, :length].tolist()
        with perturbed(twin, trainer.noise, step=2, index=0):
            expected = forward_logps(twin, prompt, completion, temperature=0.8)
        behaviour = output["sampling_per_token_logps"][row, :length]
        torch.testing.assert_close(behaviour, expected, atol=3e-5, rtol=1e-4)
        gaps.append((expected - forward_logps(twin, prompt, completion, 0.8)).abs().max().item())
    assert max(gaps) > 1e-3  # the noise moved the log-probs: the check had teeth


def test_a_step_learns_on_the_clean_weights_with_no_noise_leaked(tmp_path, monkeypatch):
    """One step: the rollouts run inside one ``perturbed`` that noises every parameter; the loss
    forward and the optimizer step see the start weights bit-exactly; the weights after the step
    are the optimizer's update of those clean weights, replayed from its recorded gradients."""
    trainer = tiny_trainer(
        tmp_path, sigma=0.02, noise_targets=[EVERY_PARAMETER], noise_scope="step"
    )
    start = snapshot(trainer.model)
    original = noise_module.perturbed
    inside, after, at_loss, at_step = [], [], [], []

    @contextmanager
    def recorded(model, *args, **kwargs):
        with original(model, *args, **kwargs) as noisy:
            inside.append(snapshot(model))
            yield noisy
        after.append(snapshot(model))

    def compute_loss(model, *args, **kwargs):
        at_loss.append(snapshot(trainer.model))
        return PSNGRPOTrainer.compute_loss(trainer, model, *args, **kwargs)

    def before_step(optimizer, *_):
        names = {id(p): n for n, p in trainer.model.named_parameters()}
        groups = [
            {
                **{k: v for k, v in g.items() if k != "params"},
                "params": [names[id(p)] for p in g["params"]],
            }
            for g in optimizer.param_groups
        ]
        grads = {names[id(p)]: p.grad.clone() for g in optimizer.param_groups for p in g["params"]}
        at_step.append((type(optimizer), groups, grads, snapshot(trainer.model)))

    monkeypatch.setattr(noise_module, "perturbed", recorded)
    monkeypatch.setattr(trainer, "compute_loss", compute_loss)
    hook = register_optimizer_step_pre_hook(before_step)
    try:
        trainer.train()
    finally:
        hook.remove()

    assert len(inside) == len(after) == 1  # one draw for all rollouts of the step
    for name, noisy in inside[0].items():  # embeddings and norms too
        assert_noise_like(noisy - start[name], 0.02, name)
    assert_same(after[0], start)  # restored before anything else ran
    assert at_loss
    for weights in at_loss:  # every loss forward runs the clean weights
        assert_same(weights, start)
    log = trainer.state.log_history[0]
    assert log["psn/kl_proxy"] > 0  # the noise moved the rollout log-probs

    (optimizer_cls, groups, grads, before), *rest = at_step
    assert not rest
    assert_same(before, start)  # the optimizer updates the clean weights
    replica = {name: torch.nn.Parameter(w.clone()) for name, w in start.items()}
    for name, grad in grads.items():
        replica[name].grad = grad
    optimizer = optimizer_cls([{**g, "params": [replica[n] for n in g["params"]]} for g in groups])
    optimizer.step()
    final = snapshot(trainer.model)
    assert all(torch.isfinite(w).all() for w in final.values())
    assert any(not torch.equal(final[n], start[n]) for n in start)
    assert_same(final, {name: p.detach() for name, p in replica.items()})
