import os
import subprocess
import sys

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import psnlib.noise as noise_module
from psnlib.noise import (
    CLEAN,
    NoiseConfig,
    draw_noise,
    noise_indices,
    perturbed,
    perturbed_rows,
    target_parameters,
)

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float32) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return Qwen2ForCausalLM(config).to(dtype).eval()


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def assert_bit_exact(model: torch.nn.Module, saved: dict[str, torch.Tensor]) -> None:
    for name, p in model.named_parameters():
        assert torch.equal(p, saved[name]), name


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("sigma", [-0.1, float("nan"), float("inf")])
def test_bad_sigma_is_rejected(sigma):
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        NoiseConfig(sigma=sigma)


def test_unknown_scope_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"'trajectory'.*step, prompt, rollout"):
        NoiseConfig(scope="trajectory")


def test_bad_regex_and_empty_targets_are_rejected():
    with pytest.raises(ValueError, match="neither a site"):
        NoiseConfig(targets="mlp(")
    with pytest.raises(ValueError, match="at least one"):
        NoiseConfig(targets=())


def test_targets_string_becomes_tuple():
    assert NoiseConfig(targets="attn").targets == ("attn",)
    assert NoiseConfig(targets=["mlp", r"norm"]).targets == ("mlp", "norm")


# ----------------------------------------------------------------------------- targets


def test_sites_select_the_expected_parameters():
    model = tiny_model()
    mlp = target_parameters(model, ("mlp",))
    attn = target_parameters(model, ("attn",))
    every = target_parameters(model, ("all",))
    assert mlp and all(".mlp." in name for name in mlp)
    assert len(mlp) == 2 * 3  # gate / up / down in each of the 2 layers
    assert attn and all(".self_attn." in name for name in attn)
    assert set(every) == set(mlp) | set(attn)
    assert set(target_parameters(model, (r"layers\.0\.mlp\.up",))) == {
        "model.layers.0.mlp.up_proj.weight"
    }


def test_pattern_matching_nothing_lists_what_exists():
    with pytest.raises(ValueError, match=r"'conv'.*model\.layers\.N\.mlp\.up_proj\.weight"):
        target_parameters(tiny_model(), ("mlp", "conv"))


# ----------------------------------------------------------------------------- perturbed


def test_perturbed_adds_the_drawn_noise_to_targets_only():
    model = tiny_model()
    clean = snapshot(model)
    config = NoiseConfig(sigma=0.01, targets="mlp", seed=3)
    with perturbed(model, config, step=5, index=2):
        for name, p in model.named_parameters():
            if ".mlp." in name:
                expected = clean[name] + draw_noise(clean[name], name, config, 5, 2, 0.01)
                assert torch.equal(p, expected)
            else:
                assert torch.equal(p, clean[name])
    assert_bit_exact(model, clean)


def test_noise_statistics_absolute_and_relative():
    weight = torch.nn.Parameter(torch.randn(256, 256) * 0.05)
    absolute = draw_noise(weight, "w", NoiseConfig(sigma=0.01), 0, 0, 0.01)
    assert absolute.std().item() == pytest.approx(0.01, rel=0.02)
    relative = draw_noise(weight, "w", NoiseConfig(sigma=0.1, relative=True), 0, 0, 0.1)
    rms = weight.detach().pow(2).mean().sqrt().item()
    assert relative.std().item() == pytest.approx(0.1 * rms, rel=0.02)


def test_noise_is_drawn_in_fp32_then_cast():
    weight = torch.nn.Parameter(torch.zeros(64, 64, dtype=torch.bfloat16))
    config = NoiseConfig(sigma=0.003)
    drawn = draw_noise(weight, "w", config, 1, 0, 0.003)
    reference = draw_noise(weight.float(), "w", config, 1, 0, 0.003)  # the fp32 draw
    assert drawn.dtype == torch.bfloat16
    assert torch.equal(drawn, reference.to(torch.bfloat16))


def test_noise_is_a_function_of_seed_step_index_and_name():
    weight = torch.zeros(8, 8)
    config = NoiseConfig(sigma=1.0, seed=0)
    base = draw_noise(weight, "a", config, 1, 0, 1.0)
    assert torch.equal(base, draw_noise(weight, "a", config, 1, 0, 1.0))
    for other in (
        draw_noise(weight, "b", config, 1, 0, 1.0),
        draw_noise(weight, "a", config, 2, 0, 1.0),
        draw_noise(weight, "a", config, 1, 1, 1.0),
        draw_noise(weight, "a", NoiseConfig(sigma=1.0, seed=1), 1, 0, 1.0),
    ):
        assert not torch.equal(base, other)


def test_noise_is_identical_across_processes():
    # Another interpreter with another str-hash seed; psnlib.noise is loaded from its file alone,
    # which keeps the subprocess light (torch only).
    code = (
        "import importlib.util, sys, torch;"
        "spec = importlib.util.spec_from_file_location('noise', sys.argv[1]);"
        "noise = sys.modules['noise'] = importlib.util.module_from_spec(spec);"
        "spec.loader.exec_module(noise);"
        "print(noise.draw_noise(torch.zeros(4), 'model.layers.0.mlp.up_proj.weight',"
        " noise.NoiseConfig(sigma=1.0, seed=7), 11, 3, 1.0).tolist())"
    )
    there = subprocess.run(
        [sys.executable, "-c", code, noise_module.__file__],
        env={**os.environ, "PYTHONHASHSEED": str(hash("salt") % 1000 + 1)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    here = draw_noise(
        torch.zeros(4),
        "model.layers.0.mlp.up_proj.weight",
        NoiseConfig(sigma=1.0, seed=7),
        11,
        3,
        1.0,
    )
    assert there == f"{here.tolist()}\n"


def test_sigma_zero_is_an_exact_no_op():
    model = tiny_model()
    clean = snapshot(model)
    with perturbed(model, NoiseConfig(sigma=0.0)):
        assert_bit_exact(model, clean)
    with perturbed(model, NoiseConfig(sigma=0.5), sigma=0.0):
        assert_bit_exact(model, clean)


def test_sigma_override():
    model = tiny_model()
    name = "model.layers.1.mlp.down_proj.weight"
    clean = snapshot(model)[name]
    config = NoiseConfig(sigma=0.5)
    with perturbed(model, config, step=1, sigma=0.002):
        delta = model.get_parameter(name).detach() - clean
        assert torch.allclose(delta, draw_noise(clean, name, config, 1, 0, 0.002))
    with pytest.raises(ValueError, match="sigma"), perturbed(model, config, sigma=-1.0):
        pass


def test_restore_is_bit_exact_after_thousands_of_cycles():
    model = tiny_model()
    clean = snapshot(model)
    config = NoiseConfig(sigma=0.01, targets="all", scope="rollout", relative=True)
    for step in range(2000):
        with perturbed(model, config, step=step, index=step % 8):
            pass
    assert_bit_exact(model, clean)


def test_restore_is_bit_exact_after_an_exception():
    model = tiny_model()
    clean = snapshot(model)
    name = "model.layers.0.mlp.up_proj.weight"
    noisy = perturbed(model, NoiseConfig(sigma=0.1, targets="all"), step=1)
    with pytest.raises(RuntimeError, match="boom"), noisy:
        assert not torch.equal(model.get_parameter(name), clean[name])
        raise RuntimeError("boom")
    assert_bit_exact(model, clean)


def test_restore_is_bit_exact_in_bf16():
    model = tiny_model(dtype=torch.bfloat16)
    clean = snapshot(model)
    for step in range(50):
        with perturbed(model, NoiseConfig(sigma=0.003), step=step):
            pass
    assert_bit_exact(model, clean)


# ----------------------------------------------------------------------------- rows


def test_noise_indices_per_scope():
    assert noise_indices(2, 3, "step").tolist() == [0, 0, 0, 0, 0, 0]
    assert noise_indices(2, 3, "prompt").tolist() == [0, 0, 0, 1, 1, 1]
    assert noise_indices(2, 3, "rollout").tolist() == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="allowed"):
        noise_indices(2, 3, "token")


@pytest.mark.parametrize("scope", ["prompt", "rollout"])
@pytest.mark.parametrize("targets", ["mlp", "all"])
def test_each_row_sees_its_own_noise_sample(scope, targets):
    model = tiny_model()
    clean = snapshot(model)
    config = NoiseConfig(sigma=0.05, targets=targets, scope=scope)
    indices = noise_indices(3, 4, scope)  # 3 prompts x G = 4
    input_ids = torch.randint(0, 32, (12, 7))
    with torch.no_grad(), perturbed_rows(model, config, 9, indices):
        logits = model(input_ids).logits  # (B, T, V)
    assert_bit_exact(model, clean)
    for row, index in enumerate(indices.tolist()):
        with torch.no_grad(), perturbed(model, config, step=9, index=index):
            reference = model(input_ids[row : row + 1]).logits[0]
        torch.testing.assert_close(logits[row], reference, atol=1e-5, rtol=1e-4)
    with torch.no_grad():
        assert not torch.allclose(model(input_ids).logits, logits, atol=1e-3)  # clean again
    assert all("forward" not in vars(module) for module in model.modules())


def test_one_distinct_index_swaps_the_weights_exactly():
    model = tiny_model()
    config = NoiseConfig(sigma=0.05)
    input_ids = torch.randint(0, 32, (4, 5))
    with torch.no_grad(), perturbed_rows(model, config, 2, torch.zeros(4, dtype=torch.long)):
        rows = model(input_ids).logits
    with torch.no_grad(), perturbed(model, config, step=2):
        swapped = model(input_ids).logits
    assert torch.equal(rows, swapped)


def test_uneven_rows_and_clean_rows_can_be_routed_between_forwards():
    """Any number of rows per index, in any order, CLEAN rows on the clean weights; ``route``
    re-assigns them between forwards (a decoder's batch shrinks as rows finish)."""
    model = tiny_model()
    clean = snapshot(model)
    config = NoiseConfig(sigma=0.05, targets="all")
    first = torch.tensor([2, CLEAN, 0, 2, 2, 0])
    later = torch.tensor([0, 0, 0, CLEAN])  # fewer rows, index 2 gone
    input_ids = torch.randint(0, 32, (6, 5))
    with torch.no_grad(), perturbed_rows(model, config, 4, first) as rows:
        logits = [model(input_ids).logits]
        rows.route(later)
        logits.append(model(input_ids[:4]).logits)
        with pytest.raises(ValueError, match=r"indices \[1\] were not set up; .* \[-1, 0, 2\]"):
            rows.route(torch.tensor([1, 0]))
    assert_bit_exact(model, clean)
    for out, indices in zip(logits, (first, later), strict=True):
        for row, index in enumerate(indices.tolist()):
            sigma = 0.0 if index == CLEAN else 0.05
            with torch.no_grad(), perturbed(model, config, step=4, index=index, sigma=sigma):
                reference = model(input_ids[row : row + 1]).logits[0]
            torch.testing.assert_close(out[row], reference, atol=1e-5, rtol=1e-4)


def test_per_row_noise_rejects_what_it_cannot_batch():
    model = tiny_model()
    norms = perturbed_rows(model, NoiseConfig(targets="norm"), 0, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="nn.Linear layers only.*RMSNorm"), norms:
        pass
    two_rows = perturbed_rows(model, NoiseConfig(), 0, torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="routed for 2 rows"), torch.no_grad(), two_rows:
        model(torch.zeros(3, 4, dtype=torch.long))
