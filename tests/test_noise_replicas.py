"""Per-replica noise draws (``noise_replicas``, R): in step scope the step's prompt groups are cut
into R contiguous slices, slice r sampled under its own draw ``(seed, step, index r, name)``, as
the released code samples on R vLLM replicas, each with its own draw. R = 1 is today's one draw."""

from __future__ import annotations

import pytest
import torch
import trl.trainer.grpo_trainer as grpo_module
from conftest import PROMPTS, G, tiny_settings, tiny_trainer
from test_every_parameter import assert_same, snapshot
from test_vllm_rollouts import FakeGeneration, make_trainer, noisy_weights_of, policy, weights_of
from test_vllm_rollouts import rollouts as vllm_rollouts

from psnlib.noise import NoiseConfig, draw_noise, noise_indices, perturbed
from psnlib.trainer import PSNGRPOConfig

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.floats]  # tests/conftest.py

EVERY_PARAMETER = "every_parameter"  # the released code's site
SIGMA, STEP, TEMPERATURE = 0.05, 3, 0.8
# A few weights whose values tell the draw apart: embedding, a norm, an MLP weight.
FINGERPRINT = (
    "model.embed_tokens.weight",
    "model.norm.weight",
    "model.layers.0.mlp.up_proj.weight",
)


def logps_of(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Log-probs (C,) of a completion after its prompt by one plain forward pass."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / TEMPERATURE
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None])[:, 0]


# ----------------------------------------------------------------------------- noise_indices


@pytest.mark.parametrize("num_prompts", [1, 2, 3, 4, 7, 8, 16])
@pytest.mark.parametrize("num_generations", [1, 4])
@pytest.mark.parametrize("replicas", [1, 2, 3, 8])
def test_replicas_are_contiguous_near_equal_slices_of_whole_groups(
    num_prompts, num_generations, replicas
):
    if replicas > num_prompts:
        with pytest.raises(ValueError, match=rf"replicas={replicas} exceeds the {num_prompts}"):
            noise_indices(num_prompts, num_generations, "step", replicas)
        return
    indices = noise_indices(num_prompts, num_generations, "step", replicas)  # (P * G,)
    assert indices.shape == (num_prompts * num_generations,)
    groups = indices.view(num_prompts, num_generations)  # (P, G)
    assert (groups == groups[:, :1]).all()  # whole groups: a group's G rows share one draw
    per_prompt = groups[:, 0]  # (P,)
    assert per_prompt.tolist() == [p * replicas // num_prompts for p in range(num_prompts)]
    assert (per_prompt.diff() >= 0).all()  # contiguous: non-decreasing, so each a single run
    sizes = torch.bincount(per_prompt, minlength=replicas)  # (R,) prompts per replica
    assert len(sizes) == replicas and (sizes >= 1).all()  # each index 0..R-1 present
    assert sizes.max() - sizes.min() <= 1  # near-equal


def test_one_replica_is_todays_single_draw_and_other_scopes_are_unchanged():
    assert torch.equal(noise_indices(4, G, "step", 1), torch.zeros(4 * G, dtype=torch.long))
    assert torch.equal(noise_indices(4, G, "step"), noise_indices(4, G, "step", 1))
    rows = torch.arange(4 * G)
    assert torch.equal(noise_indices(4, G, "prompt", 1), rows // G)
    assert torch.equal(noise_indices(4, G, "rollout", 1), rows % G)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2", None])
def test_a_replica_count_that_is_not_an_integer_from_1_is_refused(tmp_path, value):
    with pytest.raises(ValueError, match=rf"noise_replicas must be an integer >= 1.*{value!r}"):
        PSNGRPOConfig(**tiny_settings(tmp_path, noise_replicas=value))
    with pytest.raises(ValueError, match=rf"^replicas must be an integer >= 1.*{value!r}"):
        NoiseConfig(replicas=value)
    with pytest.raises(ValueError, match=rf"replicas must be an integer >= 1.*{value!r}"):
        noise_indices(4, G, "step", value)


@pytest.mark.parametrize("scope", ["prompt", "rollout"])
def test_replicas_need_step_scope(tmp_path, scope):
    settings = tiny_settings(tmp_path, noise_replicas=2, noise_scope=scope)
    with pytest.raises(ValueError, match=r"noise_replicas=2 needs noise scope 'step'") as err:
        PSNGRPOConfig(**settings)
    assert f"got scope {scope!r}" in str(err.value) and "allowed: noise_replicas=1" in str(
        err.value
    )
    with pytest.raises(ValueError, match=rf"replicas=2 needs noise scope 'step'.*{scope!r}"):
        NoiseConfig(scope=scope, replicas=2)
    with pytest.raises(ValueError, match=r"replicas=2 needs noise scope 'step'"):
        noise_indices(4, G, scope, 2)
    PSNGRPOConfig(**tiny_settings(tmp_path, noise_replicas=1, noise_scope=scope))  # R = 1: fine


def test_replicas_may_not_exceed_the_prompts_of_a_generation_batch(tmp_path):
    # per_device_train_batch_size 2 * G on one process: 2 prompt groups per step
    with pytest.raises(ValueError, match=r"noise_replicas=3 exceeds the 2 prompts") as err:
        PSNGRPOConfig(**tiny_settings(tmp_path, noise_replicas=3))
    assert "allowed: 1..2" in str(err.value) and "\n" not in str(err.value)
    config = PSNGRPOConfig(**tiny_settings(tmp_path, noise_replicas=2))
    assert config.noise_config().replicas == 2  # the config hands R to the noise
    steps = PSNGRPOConfig(**tiny_settings(tmp_path, noise_replicas=4, steps_per_generation=2))
    assert steps.noise_config().replicas == 4  # a generation batch of 2 steps: 4 prompts


# ----------------------------------------------------------------------------- sampling


def replica_trainer(tmp_path, replicas: int, targets: str, engine: str = "psnlib"):
    """A trainer of 4 prompt groups per step, noise drawn per replica."""
    return tiny_trainer(
        tmp_path,
        per_device_train_batch_size=len(PROMPTS) * G,
        sigma=SIGMA,
        noise_targets=[targets],
        noise_replicas=replicas,
        temperature=TEMPERATURE,
        rollout_engine=engine,
    )


def fingerprints(model, config: NoiseConfig, replicas: int) -> dict[str, dict[str, torch.Tensor]]:
    """The FINGERPRINT weights, clean and under each replica's draw ``W + sigma * eps_r``."""
    params = dict(model.named_parameters())
    clean = {n: params[n].detach().clone() for n in FINGERPRINT}
    states = {"clean": clean}
    for r in range(replicas):
        states[f"r{r}"] = {
            n: clean[n] + draw_noise(clean[n], n, config, STEP, r, SIGMA) for n in FINGERPRINT
        }
    return states


def record_weights(model, states: dict[str, dict[str, torch.Tensor]], raise_at: str | None = None):
    """A forward pre-hook: the label of the weights each forward runs (an unknown state fails);
    ``raise_at``: raise in the first forward under that state, mid-slice."""
    params = dict(model.named_parameters())
    seen: list[str] = []

    def hook(module, args):
        label = next(
            (k for k, s in states.items() if all(torch.equal(params[n], s[n]) for n in s)), None
        )
        assert label is not None, "a forward ran under weights of no replica's draw"
        if not seen or seen[-1] != label:
            seen.append(label)
        if label == raise_at:
            raise RuntimeError(f"sampling failed under {label}")

    return model.register_forward_pre_hook(hook), seen


@pytest.mark.parametrize("engine", ["psnlib", "generate"])
def test_every_parameter_replicas_sample_each_slice_under_its_own_draw(tmp_path, engine):
    """R = 3 on 4 prompt groups (slices of 2, 1 and 1 groups): each slice's rollouts run under
    ``W + sigma * eps(seed, step, r, name)`` on every parameter, one slice after the other; the
    behaviour log-probs are those of a twin under ``perturbed(index=r)``; the weights come back
    bit-exact."""
    replicas = 3
    trainer = replica_trainer(tmp_path, replicas, EVERY_PARAMETER, engine)
    model = trainer.model
    clean = snapshot(model)
    states = fingerprints(model, trainer.noise, replicas)
    assert len({s["model.norm.weight"].sum().item() for s in states.values()}) == replicas + 1
    handle, seen = record_weights(model, states)
    trainer.state.global_step = STEP
    model.train()
    try:
        output = trainer._generate_and_score_completions(
            [{"prompt": p} for p in PROMPTS for _ in range(G)]
        )
    finally:
        handle.remove()
    assert_same(snapshot(model), clean)
    # Sampling: each replica's draw in turn, then only the clean weights (TRL's own forwards).
    assert seen[:replicas] == ["r0", "r1", "r2"] and set(seen[replicas:]) <= {"clean"}

    twin = type(model)(model.config).eval()
    twin.load_state_dict(model.state_dict())  # the clean weights, back
    replica_of_row = noise_indices(len(PROMPTS), G, "step", replicas).tolist()  # (P * G,)
    assert replica_of_row == [0] * 2 * G + [1] * G + [2] * G
    gaps = []
    for row, r in enumerate(replica_of_row):
        prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
        length = int(output["completion_mask"][row].sum())
        completion = output["completion_ids"][row, :length].tolist()
        behaviour = output["sampling_per_token_logps"][row, :length]
        with perturbed(twin, trainer.noise, step=STEP, index=r):
            expected = logps_of(twin, prompt, completion)
        with perturbed(twin, trainer.noise, step=STEP, index=(r + 1) % replicas):
            other = logps_of(twin, prompt, completion)
        # Sampler vs plain forward, fp32: tolerance of test_every_parameter's same comparison.
        torch.testing.assert_close(behaviour, expected, atol=3e-5, rtol=1e-4)
        gaps.append((expected - other).abs().max().item())
    assert min(gaps) > 1e-3  # another replica's draw gives other log-probs: the check has teeth


def test_weights_are_restored_bit_exactly_when_sampling_raises_mid_slice(tmp_path):
    trainer = replica_trainer(tmp_path, 2, EVERY_PARAMETER)
    model = trainer.model
    clean = snapshot(model)
    handle, seen = record_weights(model, fingerprints(model, trainer.noise, 2), raise_at="r1")
    trainer.state.global_step = STEP
    model.train()
    try:
        with pytest.raises(RuntimeError, match="sampling failed under r1"):
            trainer._generate_and_score_completions(
                [{"prompt": p} for p in PROMPTS for _ in range(G)]
            )
    finally:
        handle.remove()
    assert seen == ["r0", "r1"]  # slice 0 was sampled, slice 1 had begun
    assert_same(snapshot(model), clean)


def test_linear_target_replicas_run_in_one_batched_per_row_forward(tmp_path):
    """On nn.Linear targets the replicas' draws share one batched forward (``perturbed_rows``):
    the behaviour log-probs are still those of ``perturbed(index=r)``."""
    trainer = replica_trainer(tmp_path, 2, "mlp")
    assert trainer._noise_slices([0, 0, 1, 1]) == [("rollouts", [0, 1, 2, 3])]  # one pass
    model = trainer.model
    clean = snapshot(model)
    trainer.state.global_step = STEP
    model.train()
    output = trainer._generate_and_score_completions(
        [{"prompt": p} for p in PROMPTS for _ in range(G)]
    )
    assert_same(snapshot(model), clean)
    twin = type(model)(model.config).eval()
    twin.load_state_dict(model.state_dict())  # the clean weights, back
    for row, r in enumerate(noise_indices(len(PROMPTS), G, "step", 2).tolist()):
        prompt = output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist()
        length = int(output["completion_mask"][row].sum())
        completion = output["completion_ids"][row, :length].tolist()
        with perturbed(twin, trainer.noise, step=STEP, index=r):
            expected = logps_of(twin, prompt, completion)
        # Batched per-row matmuls vs a plain forward: test_trainer's tolerance for the same.
        behaviour = output["sampling_per_token_logps"][row, :length]
        torch.testing.assert_close(behaviour, expected, atol=2e-5, rtol=1e-4)


# ----------------------------------------------------------------------------- vLLM


def test_vllm_syncs_each_replicas_draw_and_generates_its_slice():
    """``generate_noisy`` already groups rows by noise index: R syncs, slice r under draw r."""
    model, tokenizer = policy()
    clean = weights_of(model)
    noise = noise_indices(2, G, "step", 2).tolist()  # test_vllm_rollouts' 2 prompts
    generation, ids, completions, _ = vllm_rollouts(model, tokenizer, noise, SIGMA, STEP)
    assert len(generation.engine.syncs) == len(generation.calls) == 2
    for r, (sync, (prompts, sampled_under)) in enumerate(
        zip(generation.engine.syncs, generation.calls, strict=True)
    ):
        expected = noisy_weights_of(model, step=STEP, index=r, sigma=SIGMA)
        assert_same(sync, expected)
        assert_same(sampled_under, expected)
        assert prompts == ids[r * G : (r + 1) * G]  # replica r's slice: prompt group r
    assert_same(weights_of(model), clean)
    assert all(completions)


def test_a_vllm_training_generation_with_replicas_syncs_once_per_replica(tmp_path, monkeypatch):
    monkeypatch.setattr(grpo_module, "VLLMGeneration", FakeGeneration)
    trainer = make_trainer(tmp_path, noise_replicas=2, noise_targets=[EVERY_PARAMETER])
    assert not trainer._by_slice  # vLLM is sent whole noisy weights per draw
    trainer.model.train()
    engine = trainer.vllm_generation.engine
    prompt_ids = [ids for ids in ([5, 6, 7], [8, 9, 10]) for _ in range(G)]  # 2 groups
    trainer._generate_single_turn(prompt_ids, None, {}, G)
    assert len(engine.syncs) == 2
    for r, sync in enumerate(engine.syncs):
        assert_same(sync, noisy_weights_of(trainer.model, 0, r, SIGMA, trainer.noise))
    calls = trainer.vllm_generation.calls
    assert [prompts for prompts, _ in calls] == [prompt_ids[:G], prompt_ids[G:]]
