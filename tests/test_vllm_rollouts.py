"""PSN rollouts on vLLM (``psnlib.trainer.vllm_rollouts``). Without vLLM (this CPU machine) the sync
logic runs against a fake engine that TRL's own ``VLLMGeneration.sync_weights`` fills, as it fills
vLLM's model in colocate mode; the real engine is tested where vLLM and a GPU are present."""

from types import SimpleNamespace

import pytest
import torch
import trl.trainer.grpo_trainer as grpo_module
from accelerate import Accelerator
from datasets import Dataset
from trl.distributed import DistributedBackend
from trl.generation.vllm_generation import VLLMGeneration

from psnlib.models import build_tokenizer, save_policy, tiny_policy
from psnlib.noise import CLEAN, NoiseConfig, noise_indices, perturbed
from psnlib.tis import tis_weights
from psnlib.trainer import PSNGRPOConfig, PSNGRPOTrainer
from psnlib.trainer.vllm_rollouts import generate_noisy, noise_groups

PROMPTS = ["7 3 5 4->22:", "1 2 3 4->10:"]
G = 4
NOISE = NoiseConfig(sigma=0.05, targets="mlp", seed=0)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class FakeEngine:
    """vLLM's copy of the policy: ``load_weights`` fills it; each sync is recorded."""

    def __init__(self, model: torch.nn.Module) -> None:
        # Built from the config, not deep-copied: a copy would keep any forward that accelerate
        # patched onto the policy, which runs the policy's own weights.
        self.model = type(model)(model.config).eval()
        self.model.load_state_dict(model.state_dict())
        self.syncs: list[dict[str, torch.Tensor]] = []  # the weights each sync sent
        self._loading: dict[str, torch.Tensor] = {}

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor)
                self._loading[name] = tensor.detach().clone()

    def reset_prefix_cache(self) -> None:  # TRL calls it once at the end of every sync
        self.syncs.append(self._loading)
        self._loading = {}


class FakeGeneration(VLLMGeneration):
    """TRL's ``VLLMGeneration`` in colocate mode with the engine replaced by ``FakeEngine``:
    ``sync_weights`` is TRL's own; ``generate`` samples the engine's copy and records, per call,
    the prompts and the weights it sampled under."""

    def __init__(self, model, accelerator, processing_class, **settings) -> None:
        self.model, self.accelerator = model, accelerator
        self._dist = DistributedBackend(accelerator)
        self.mode, self.enable_sleep_mode = "colocate", False
        self.temperature = settings.get("temperature", 1.0)
        self.max_completion_length = settings.get("max_completion_length", 8)
        self.eos_token_id = processing_class.eos_token_id
        self.engine = FakeEngine(model)
        runner = SimpleNamespace(model=self.engine)
        executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        self.llm = SimpleNamespace(
            llm_engine=SimpleNamespace(model_executor=executor),
            reset_prefix_cache=self.engine.reset_prefix_cache,
        )
        self.calls: list[tuple[list[list[int]], dict[str, torch.Tensor]]] = []
        self.rng = torch.Generator().manual_seed(0)

    def generate(self, prompts, images, num_generations, profiler=None):
        weights = {n: p.detach().clone() for n, p in self.engine.model.named_parameters()}
        self.calls.append(([list(p) for p in prompts], weights))
        completions, logprobs = [], []
        for prompt in prompts:
            ids, lps = [], []
            for _ in range(self.max_completion_length):
                with torch.no_grad():
                    logits = self.engine.model(torch.tensor([list(prompt) + ids])).logits[0, -1]
                logp = torch.log_softmax(logits / self.temperature, dim=-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=self.rng))
                ids.append(token)
                lps.append([float(logp[token])])
                if token == self.eos_token_id:
                    break
            completions.append(ids)
            logprobs.append(lps)
        return prompts, completions, logprobs, None


def policy():
    tokenizer = build_tokenizer()
    return tiny_policy(size="smoke", tokenizer=tokenizer, seed=0), tokenizer


def weights_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def noisy_weights_of(
    model, step: int, index: int, sigma: float, config: NoiseConfig = NOISE
) -> dict[str, torch.Tensor]:
    """W + sigma * eps as psnlib.noise.perturbed makes it (the transformers path's noise)."""
    with perturbed(model, config, step, index, sigma):
        return weights_of(model)


def assert_same(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


def rollouts(model, tokenizer, noise: list[int], sigma: float = 0.05, step: int = 3):
    generation = FakeGeneration(model, Accelerator(cpu=True), tokenizer)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS for _ in range(G)]  # prompt-major
    completions, logps = generate_noisy(generation, model, NOISE, step, sigma, ids, noise)
    return generation, ids, completions, logps


# ----------------------------------------------------------------------------- sync logic


def test_step_scope_syncs_the_noisy_weights_once_before_generating():
    model, tokenizer = policy()
    clean = weights_of(model)
    noise = noise_indices(len(PROMPTS), G, "step").tolist()
    generation, ids, completions, logps = rollouts(model, tokenizer, noise)

    assert len(generation.engine.syncs) == 1 and len(generation.calls) == 1
    expected = noisy_weights_of(model, step=3, index=0, sigma=0.05)
    assert_same(generation.engine.syncs[0], expected)  # mlp weights noisy, the others clean
    assert any(not torch.equal(expected[n], clean[n]) for n in clean if ".mlp." in n)
    assert all(torch.equal(expected[n], clean[n]) for n in clean if ".mlp." not in n)
    prompts, sampled_under = generation.calls[0]
    assert prompts == ids
    assert_same(sampled_under, expected)  # generated after the sync, under the noisy weights
    assert_same(weights_of(model), clean)  # the training weights were only read: bit-exact
    assert [len(c) for c in completions] == [len(lp) for lp in logps]
    assert all(c for c in completions)


def test_rollout_scope_syncs_once_per_noise_sample_and_routes_each_row_to_its_own():
    model, tokenizer = policy()
    clean = weights_of(model)
    noise = noise_indices(len(PROMPTS), G, "rollout").tolist()  # rollout k of each group: k
    generation, ids, completions, _ = rollouts(model, tokenizer, noise)

    assert len(generation.engine.syncs) == G and len(generation.calls) == G
    for k, (sync, (prompts, sampled_under)) in enumerate(
        zip(generation.engine.syncs, generation.calls, strict=True)
    ):
        expected = noisy_weights_of(model, step=3, index=k, sigma=0.05)
        assert_same(sync, expected)
        assert_same(sampled_under, expected)
        assert prompts == [ids[r] for r, index in enumerate(noise) if index == k]
    assert_same(weights_of(model), clean)
    assert all(c for c in completions)  # every row got its completion back in place


@pytest.mark.parametrize("scope", ["step", "rollout"])
def test_every_parameter_site_syncs_every_weight_noisy(scope):
    """The released code's site: embeddings, norms and every other weight reach vLLM as
    ``W + sigma * eps``, drawn as ``perturbed`` draws them (the tied head: vLLM ties it)."""
    model, tokenizer = policy()
    clean = weights_of(model)
    every = NoiseConfig(sigma=0.05, targets="every_parameter", seed=0)
    generation = FakeGeneration(model, Accelerator(cpu=True), tokenizer)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS for _ in range(G)]
    noise = noise_indices(len(PROMPTS), G, scope).tolist()
    generate_noisy(generation, model, every, 3, 0.05, ids, noise)

    assert len(generation.engine.syncs) == len(set(noise))
    for k, sync in enumerate(generation.engine.syncs):
        assert_same(sync, noisy_weights_of(model, 3, k, 0.05, every))
        assert all(not torch.equal(sync[n], clean[n]) for n in clean)  # every weight, noisy
    assert any("embed_tokens" in n for n in clean) and any("norm" in n for n in clean)
    assert_same(weights_of(model), clean)


def test_clean_rows_and_zero_sigma_sync_the_clean_weights():
    model, tokenizer = policy()
    clean = weights_of(model)
    noise = [0] * (len(PROMPTS) * G - 2) + [CLEAN, CLEAN]  # e.g. the diversity scheduler's pairs
    generation, *_ = rollouts(model, tokenizer, noise)
    assert len(generation.engine.syncs) == 2
    assert_same(generation.engine.syncs[0], clean)  # CLEAN first, bit-exact
    assert_same(generation.engine.syncs[1], noisy_weights_of(model, 3, 0, 0.05))

    noise = noise_indices(len(PROMPTS), G, "rollout").tolist()
    generation, *_ = rollouts(model, tokenizer, noise, sigma=0.0)
    assert len(generation.engine.syncs) == 1  # sigma 0: every sample is the clean policy
    assert_same(generation.engine.syncs[0], clean)


def test_a_target_missing_from_the_sync_stream_is_an_error(monkeypatch):
    model, tokenizer = policy()
    stream = VLLMGeneration._iter_named_params

    def without_mlp(self):  # as if TRL sent the targeted weights under other names
        return ((n, p) for n, p in stream(self) if ".mlp." not in n)

    monkeypatch.setattr(FakeGeneration, "_iter_named_params", without_mlp)
    with pytest.raises(RuntimeError, match=r"never sent the noise targets \['model\.layers"):
        rollouts(model, tokenizer, [0] * (len(PROMPTS) * G))


def test_noise_groups_are_sorted_with_clean_first():
    assert noise_groups([1, 0, CLEAN, 1, 0]) == {CLEAN: [2], 0: [1, 4], 1: [0, 3]}


# ----------------------------------------------------------------------------- config


def config(tmp_path, **overrides) -> PSNGRPOConfig:
    settings = {
        "output_dir": str(tmp_path),
        "per_device_train_batch_size": len(PROMPTS) * G,
        "num_generations": G,
        "max_completion_length": 8,
        "max_steps": 1,
        "learning_rate": 1e-2,
        "report_to": "none",
        "save_strategy": "no",
        "bf16": False,
        "gradient_checkpointing": False,
        "use_cpu": True,
        "use_vllm": True,
        "sigma": 0.05,
        **overrides,
    }
    return PSNGRPOConfig(**settings)


def test_use_vllm_maps_tis_onto_trls_vllm_importance_sampling(tmp_path):
    c = config(tmp_path, tis_cap=7.0)
    assert c.vllm_importance_sampling_correction is True
    assert c.vllm_importance_sampling_mode == "token_truncate"
    assert (c.vllm_importance_sampling_clip_max, c.vllm_importance_sampling_clip_min) == (7.0, None)
    assert config(tmp_path, tis_level="sequence").vllm_importance_sampling_mode == (
        "sequence_truncate"
    )
    # masked sequence-level IS (psnlib.tis, Eq. MIS) is TRL's sequence_mask over [1/C, C]
    masked = config(tmp_path, tis_level="sequence_mask", tis_cap=4.0)
    assert masked.vllm_importance_sampling_mode == "sequence_mask"
    assert (masked.vllm_importance_sampling_clip_min, masked.vllm_importance_sampling_clip_max) == (
        0.25,
        4.0,
    )
    assert config(tmp_path, use_tis=False).vllm_importance_sampling_correction is False
    plain = config(tmp_path, use_vllm=False, tis_cap=7.0)  # TRL's own defaults stay
    assert plain.vllm_importance_sampling_clip_max != 7.0


def test_vllm_settings_that_cannot_work_fail_at_config_time(tmp_path):
    with pytest.raises(ValueError, match="noise_scope='prompt' with use_vllm"):
        config(tmp_path, noise_scope="prompt")
    c = config(tmp_path, noise_scope="rollout")
    c.per_device_train_batch_size = 2  # as on one of 4 processes: half a group each
    with pytest.raises(ValueError, match=r"must hold whole groups of num_generations=4"):
        c.use_vllm_tis()


@pytest.mark.parametrize(
    "setting",
    [
        {"top_p": 0.9},
        {"top_k": 50},
        {"min_p": 0.05},
        {"generation_kwargs": {"top_p": 0.95}},
    ],
    ids=["top_p", "top_k", "min_p", "generation_kwargs"],
)
def test_tis_on_vllm_refuses_a_truncated_sampler(tmp_path, setting):
    """TRL 1.16's vLLM importance-sampling weight is biased unless top_p=1, top_k in (0, -1) and
    min_p=0 (issue 50, item 10): with PSN's TIS on, another setting is one line naming it."""
    name = next(iter(setting.get("generation_kwargs", setting)))
    with pytest.raises(ValueError, match=rf"use_tis with use_vllm: .*'{name}'.*set top_p=1"):
        config(tmp_path, **setting)
    config(tmp_path, use_tis=False, **setting)  # without the TIS nothing is weighted
    config(tmp_path, top_k=-1, min_p=0.0)  # vLLM's spellings of "no truncation"


# ----------------------------------------------------------------------------- trainer


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.setattr(grpo_module, "VLLMGeneration", FakeGeneration)


def make_trainer(tmp_path, **overrides) -> PSNGRPOTrainer:
    model, tokenizer = policy()
    return PSNGRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [len(set(c)) / 10 for c in completions],
        args=config(tmp_path, **overrides),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tokenizer,
    )


@pytest.mark.parametrize(("scope", "syncs"), [("step", 1), ("rollout", G)])
def test_a_training_step_syncs_per_noise_sample_and_evaluation_resyncs_clean(
    tmp_path, fake_vllm, scope, syncs
):
    trainer = make_trainer(tmp_path, noise_scope=scope)
    before = weights_of(trainer.model)
    trainer.train()
    engine = trainer.vllm_generation.engine
    assert len(engine.syncs) == syncs
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())
    logged = trainer.state.log_history[0]
    assert "tis/mean" in logged and logged["psn/kl_proxy"] > 0

    trainer.model.eval()  # evaluation: vLLM was left noisy, so TRL re-syncs the clean weights
    prompt_ids = [build_tokenizer()(p)["input_ids"] for p in PROMPTS]
    trainer._generate_single_turn(prompt_ids, None, {}, 1)
    assert len(engine.syncs) == syncs + 1
    assert_same(engine.syncs[-1], weights_of(trainer.model))


def test_clean_generation_after_noisy_rollouts_of_the_same_step_resyncs(tmp_path, fake_vllm):
    trainer = make_trainer(tmp_path)
    engine = trainer.vllm_generation.engine
    prompt_ids = [build_tokenizer()(p)["input_ids"] for p in PROMPTS for _ in range(G)]
    clean = weights_of(trainer.model)
    for mode, syncs in (("eval", 1), ("train", 2), ("eval", 3)):  # all at step 0
        getattr(trainer.model, mode)()
        trainer._generate_single_turn(prompt_ids, None, {}, G)
        assert len(engine.syncs) == syncs
    assert_same(engine.syncs[0], clean)
    assert_same(engine.syncs[1], noisy_weights_of(trainer.model, 0, 0, 0.05, trainer.noise))
    assert_same(engine.syncs[2], clean)  # TRL alone would have kept the noisy copy


def test_tis_is_trls_vllm_correction_applied_once(tmp_path, fake_vllm):
    trainer = make_trainer(tmp_path, tis_cap=1.1)
    trainer.model.train()
    batch = [{"prompt": p} for p in PROMPTS for _ in range(G)]
    output = trainer._generate_and_score_completions(batch)
    clean, behaviour = output["old_per_token_logps"], output["sampling_per_token_logps"]
    mask = output["completion_mask"]
    expected = tis_weights(clean, behaviour, mask, 1.1, "token")
    ratio = output["importance_sampling_ratio"]  # TRL's, multiplied into its loss
    torch.testing.assert_close(ratio * mask, expected * mask)
    assert ((expected - 1).abs() * mask).max() > 0.05  # vLLM sampled the noisy policy
    assert (expected * mask).max() == 1.1  # the cap bites, so the test compares something
    assert output["advantages"].dim() == 1  # psnlib did not weight the advantages again
    assert trainer.off_policy_mask_threshold is None  # nor the loss (get_off_policy_mask)


# ----------------------------------------------------------------------------- real vLLM


def test_noisy_rollouts_on_a_real_vllm_engine(tmp_path):
    pytest.importorskip(
        "vllm", reason="vLLM is not installed: the real vLLM path needs vLLM and a CUDA GPU"
    )
    if not torch.cuda.is_available():
        pytest.skip("vLLM colocate mode needs a CUDA GPU")
    model, tokenizer = policy()
    save_policy(model, tokenizer, tmp_path / "policy")
    model.name_or_path = str(tmp_path / "policy")  # colocate vLLM loads the model from here
    before = weights_of(model)
    trainer = PSNGRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [len(set(c)) / 10 for c in completions],
        args=config(
            tmp_path / "out",
            use_cpu=False,
            noise_scope="rollout",
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=0.2,
            vllm_max_model_length=64,
        ),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tokenizer,
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["psn/kl_proxy"] > 0  # the rollouts' log-probs are the noisy policy's
    assert "sampling/importance_sampling_ratio/mean" in logged
    moved = [not torch.equal(p.cpu(), before[n]) for n, p in trainer.model.named_parameters()]
    assert any(moved)
