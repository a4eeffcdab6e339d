"""Every model family the profiles plan to train, as tiny stand-ins built from ``transformers``
configs (no hub): Qwen2.5 (``qwen2``), Qwen3 (per-head ``q_norm`` / ``k_norm``), Llama-3.x
(``llama3`` rope scaling, grouped-query attention) and Gemma-2 (the psnlib decoder does not run
it: the trainer falls back to ``generate``). Each is sampled, noised and trained at every noise
scope, and every (profile, arm, model) the experiments plan builds its trainer."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from datasets import Dataset
from torch import nn
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from psnlib.decoder import decodable
from psnlib.models import build_tokenizer
from psnlib.noise import SCOPES, noise_indices, perturbed, target_parameters
from psnlib.replication.plan.profiles import PROFILES, get_profile
from psnlib.replication.plan.runs import rl_config
from psnlib.replication.plan.schedule import planned_work
from psnlib.sampling import sample_tokens
from psnlib.trainer import PSNGRPOTrainer

PROMPTS = ["7 3 5 4->22:", "1 2 3 4->10:"]
G = 4
TOKENIZER = build_tokenizer()
SHAPE = dict(
    vocab_size=len(TOKENIZER),
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention, as in every planned model
    max_position_embeddings=128,
    pad_token_id=TOKENIZER.pad_token_id,
    bos_token_id=TOKENIZER.bos_token_id,
    eos_token_id=TOKENIZER.eos_token_id,
)
FAMILIES = {
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**SHAPE, tie_word_embeddings=True)),
    # Qwen3: head_dim is its own setting (16 here, not hidden / heads = 8), q_norm / k_norm
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(**SHAPE, head_dim=16, tie_word_embeddings=True)),
    "llama": (
        LlamaForCausalLM,
        LlamaConfig(
            **SHAPE,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),
    ),
    "gemma2": (Gemma2ForCausalLM, Gemma2Config(**SHAPE, head_dim=8, sliding_window=64)),
}
# The family of every model a profile names (its base, weak and other policies); a model
# missing here fails test_every_planned_run_builds_its_trainer, so a new one gets a stand-in.
HUB_FAMILIES = {
    "Qwen/Qwen2.5-Math-1.5B": "qwen2",
    "Qwen/Qwen2.5-Math-7B": "qwen2",
    "Qwen/Qwen2.5-7B": "qwen2",
    "Qwen/Qwen3-1.7B-Base": "qwen3",
    "Qwen/Qwen3-4B-Base": "qwen3",
    "meta-llama/Llama-3.1-8B": "llama",
    "meta-llama/Llama-3.2-1B-Instruct": "llama",
}
ROLES = {
    "mlp": {"gate_proj", "up_proj", "down_proj"},
    "attn": {"q_proj", "k_proj", "v_proj", "o_proj"},
}

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.floats]  # tests/conftest.py


def tiny(family: str, seed: int = 0) -> nn.Module:
    model_cls, config = FAMILIES[family]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
        with torch.no_grad():  # random norm gains, so a norm wrongly skipped or applied shows
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.add_(torch.randn_like(p) * 0.3)
    model.generation_config.pad_token_id = TOKENIZER.pad_token_id
    model.generation_config.eos_token_id = TOKENIZER.eos_token_id
    return model.eval()


def forward_logps(model, prompt: list[int], completion: list[int], temperature: float = 1.0):
    """Log-probs of a completion after its prompt by one plain forward pass (C,)."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None])[:, 0]


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_decoder_runs_the_family_like_a_forward_pass(family):
    model = tiny(family)
    assert decodable(model)
    prompts = [TOKENIZER(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    samples = sample_tokens(
        model, prompts, 3, eos_token_id=TOKENIZER.eos_token_id, max_new_tokens=10,
        with_stats=True, progress=False,
    )  # fmt: skip
    for i, prompt in enumerate(prompts):
        for j in range(3):
            length = int(samples.lengths[i, j])
            completion = samples.tokens[i, j, :length].tolist()
            expected = forward_logps(model, prompt, completion)
            torch.testing.assert_close(samples.logprobs[i, j, :length], expected, atol=1e-5, rtol=0)


def test_gemma2_is_not_decodable():
    assert not decodable(tiny("gemma2"))


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("site", ["mlp", "attn", "all"])
def test_noise_sites_take_linear_layers_by_role(family, site):
    model = tiny(family)
    chosen = target_parameters(model, (site,))
    modules = dict(model.named_modules())
    layers = {name.rpartition(".")[0] for name in chosen}
    linears = {
        name
        for name, m in modules.items()
        if isinstance(m, nn.Linear) and re.search(r"layers\.\d+\.", name)
    }
    roles = ROLES.get(site, ROLES["mlp"] | ROLES["attn"])
    assert layers == {name for name in linears if name.rpartition(".")[2] in roles}
    assert all(isinstance(modules[name], nn.Linear) for name in layers)
    # each layer's own parameters, bias included where it has one (Qwen2's q/k/v)
    assert set(chosen) == {
        f"{layer}.{kind}" for layer in layers for kind, _ in modules[layer].named_parameters()
    }
    assert not any("norm" in name or "embed" in name or "lm_head" in name for name in chosen)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("scope", SCOPES)
def test_psn_rollouts_on_every_family_and_scope(tmp_path, family, scope, caplog):
    """Behaviour log-probs are those of an independently perturbed copy (all sites at once);
    the clean weights come back bit-exact; Gemma-2 falls back to ``generate`` with a log line."""
    model = tiny(family)
    config = rl_config(
        get_profile("smoke"), "psn", 0, tmp_path,
        sigma=0.05, noise_scope=scope, noise_targets=["all"], temperature=0.8,
        per_device_train_batch_size=2 * G, num_generations=G, max_completion_length=8,
        gradient_checkpointing=False, use_cpu=True, save_strategy="no",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="psnlib.trainer"):
        trainer = PSNGRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **_: [len(set(c)) / 10 for c in completions],
            args=config,
            train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
            processing_class=TOKENIZER,
        )
    fallback = "rollout_engine='generate'" in caplog.text
    assert trainer.rollout_engine == ("generate" if family == "gemma2" else "psnlib")
    assert fallback == (family == "gemma2")
    if fallback:
        assert "'gemma2'" in caplog.text
    clean = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.state.global_step = 2
    trainer.model.train()
    output = trainer._generate_and_score_completions(
        [{"prompt": p} for p in PROMPTS for _ in range(G)]
    )
    for name, p in trainer.model.named_parameters():
        assert torch.equal(p, clean[name]), name
    twin = tiny(family)
    gaps = []
    for row, index in enumerate(noise_indices(len(PROMPTS), G, scope).tolist()):
        prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
        length = int(output["completion_mask"][row].sum())
        completion = output["completion_ids"][row, :length].tolist()
        with perturbed(twin, trainer.noise, step=2, index=index):
            expected = forward_logps(twin, prompt, completion, temperature=0.8)
        behaviour = output["sampling_per_token_logps"][row, :length]
        torch.testing.assert_close(behaviour, expected, atol=3e-5, rtol=1e-4)
        gaps.append((expected - forward_logps(twin, prompt, completion, 0.8)).abs().max().item())
    assert max(gaps) > 1e-3  # the noise moved the log-probs: the check had teeth


def _family(spec) -> str:
    return spec.family if spec.name_or_path is None else HUB_FAMILIES[spec.name_or_path]


def _planned(profile: str) -> list[tuple[str, dict, str, object]]:
    """(arm, settings, family, profile the run trains under) of every planned RL run, one per
    distinct (arm, settings, family)."""
    runs = {}
    for variant, _, _ in planned_work(profile):
        if variant.arm.name == "base":
            continue
        under = variant.profile(get_profile(profile))
        family = _family(under.base)
        key = (variant.arm.name, repr(sorted(variant.settings.items())), family)
        runs.setdefault(key, (variant.arm.name, variant.settings, family, under))
    return list(runs.values())


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_planned_run_builds_its_trainer(tmp_path, profile):
    """Each run the experiments plan, under its profile's full config, builds ``PSNGRPOTrainer``
    on a tiny stand-in of its model's family; its rollout engine runs that family."""
    p = PROFILES[profile]
    assert {_family(s) for s in (p.base, p.weak, *p.other_policies)} <= set(FAMILIES)
    runs = _planned(profile)
    assert runs
    data = Dataset.from_dict({"prompt": PROMPTS, "weak_prefix": ["7*3=21,", ""]})
    saved = {}  # as from the hub, from a directory: TRL loads the reference model (beta) there
    for arm, settings, family, under in runs:
        if family not in saved:
            saved[family] = tmp_path / family
            tiny(family).save_pretrained(saved[family])
        config = rl_config(under, arm, 0, tmp_path / arm, **settings)
        model_cls = FAMILIES[family][0]
        trainer = PSNGRPOTrainer(
            model=model_cls.from_pretrained(saved[family]),
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            args=config,
            train_dataset=data,
            processing_class=TOKENIZER,
        )
        assert decodable(trainer.model), (arm, family)  # the psnlib rollout engine runs it
