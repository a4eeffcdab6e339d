"""Sampling: greedy equals ``generate``, sampled frequencies match the softmax, EOS and padding,
seeds, log-probs, bad input; vLLM when installed."""

from types import SimpleNamespace

import pytest
import torch
from torch import is_inference_mode_enabled as is_inference
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
)

from psnlib import decoder, sampling
from psnlib.replication.compute.pretrain import build_policy
from psnlib.replication.plan.profiles import get_profile
from psnlib.sampling import decode, generate_samples, sample_rows, sample_tokens

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = pytest.mark.floats

PROMPTS = ["7 3 5 4->22:", "1 2->3:", "12 11 10 9 8->99:", "6 6->36:", "10 2 3 5->60:"]


@pytest.fixture(params=["masked", "gathered"])
def prompt_attention(request, monkeypatch):
    """Both prompt-attention paths of a cohort: all prompts masked (few prompts), or each node's
    own prompt gathered (many prompts); forced here, whatever the cohorts' sizes."""
    monkeypatch.setattr(decoder, "MASKED_PROMPTS", 1000 if request.param == "masked" else 0)
    return request.param


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """The smoke base policy (2 layers, SFT for seconds): emits EOS, outputs vary by prompt."""
    torch.set_num_threads(1)
    model, tok, _ = build_policy(get_profile("smoke").base, root=tmp_path_factory.mktemp("p"))
    return model, tok


def gqa_llama(tok: PreTrainedTokenizerBase) -> LlamaForCausalLM:
    """A random Llama with grouped-query attention (4 heads, 2 KV heads), large init: varied."""
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        initializer_range=0.5,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def ids_of(tok: PreTrainedTokenizerBase, prompts: list[str]) -> list[list[int]]:
    return tok(prompts, add_special_tokens=False)["input_ids"]


def reference_greedy(model, tok, prompt: str, max_new: int) -> list[int]:
    """``generate``'s greedy tokens for one unpadded prompt, cut after the first EOS."""
    ids = torch.tensor([ids_of(tok, [prompt])[0]])
    out = model.generate(
        ids, max_new_tokens=max_new, do_sample=False, pad_token_id=0, eos_token_id=2
    )[0, ids.shape[1] :].tolist()
    return out[: out.index(2) + 1] if 2 in out else out


def rows(samples, i: int) -> list[list[int]]:
    return [
        samples.tokens[i, j, : samples.lengths[i, j]].tolist()
        for j in range(len(samples.tokens[i]))
    ]


@pytest.mark.parametrize("family", ["qwen2", "llama-gqa"])
def test_greedy_equals_generate_with_mixed_prompt_lengths(policy, prompt_attention, family):
    model, tok = policy
    model = model if family == "qwen2" else gqa_llama(tok)
    got = sample_tokens(
        model,
        ids_of(tok, PROMPTS),
        2,
        eos_token_id=2,
        temperature=0,
        max_new_tokens=24,
        batch_size=3,
        progress=False,
    )
    references = [reference_greedy(model, tok, p, 24) for p in PROMPTS]
    assert len({tuple(r) for r in references}) > 1  # the model does not ignore its prompt
    for i, want in enumerate(references):
        assert rows(got, i) == [want, want]


def test_sampled_next_tokens_follow_the_softmax(policy):
    """Chi-square tests on the first sampled token and, given the commonest first token, the
    second (a decode step through the KV cache), at temperatures 1 and 0.7."""
    chi2 = pytest.importorskip("scipy.stats").chisquare
    model, tok = policy
    prompt = ids_of(tok, ["7 3 5 4->22:"])[0]
    for temperature in (1.0, 0.7):
        s = sample_tokens(
            model,
            [prompt],
            6000,
            eos_token_id=2,
            temperature=temperature,
            max_new_tokens=2,
            seed=1,
            progress=False,
        )
        first = s.tokens[0, :, 0]
        top = int(first.mode().values)
        for context, drawn in ((prompt, first), (prompt + [top], s.tokens[0, first == top, 1])):
            with torch.no_grad():
                logits = model(torch.tensor([context])).logits[0, -1]
            p = torch.softmax(logits.double() / temperature, -1)
            expected = p * len(drawn)
            keep = expected >= 5  # pool the rare tokens into one cell
            observed = torch.bincount(drawn, minlength=len(p)).double()
            obs = torch.cat([observed[keep], observed[~keep].sum()[None]])
            exp = torch.cat([expected[keep], expected[~keep].sum()[None]])
            assert chi2(obs.numpy(), exp.numpy()).pvalue > 1e-3, (temperature, context)


def test_logprobs_and_entropies_match_teacher_forcing(policy, prompt_attention):
    """Every row's log-probs and entropies equal a fresh forward over its prompt and tokens: its
    history survived joining, node splits and packing (a small batch forces all of them)."""
    model, tok = policy
    prompts = ids_of(tok, PROMPTS[:3])
    n, T = 24, 0.8
    s = sample_tokens(
        model,
        prompts,
        n,
        eos_token_id=2,
        temperature=T,
        max_new_tokens=20,
        with_stats=True,
        batch_size=16,
        progress=False,
    )
    for i, prompt in enumerate(prompts):
        rows = [prompt + s.tokens[i, j, : s.lengths[i, j]].tolist() for j in range(n)]
        ids = torch.tensor([r + [0] * (len(prompt) + 20 - len(r)) for r in rows])  # right pad
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[:, len(prompt) - 1 : -1] / T, -1)
        inside = torch.arange(20) < s.lengths[i, :, None]  # (n, 20)
        want = logp.gather(-1, ids[:, len(prompt) :, None])[..., 0] * inside
        torch.testing.assert_close(s.logprobs[i], want, atol=1e-4, rtol=0)
        entropy = -(logp.exp() * logp).sum(-1) * inside
        torch.testing.assert_close(s.entropies[i], entropy, atol=1e-4, rtol=0)
    assert len({tuple(r) for r in s.tokens[0].tolist()}) > n // 2  # the samples did split


def test_rows_sharing_a_history_are_decoded_once(policy, monkeypatch):
    """Greedy samples of a prompt never diverge, so each step decodes one node per prompt."""
    model, tok = policy
    sizes = []
    step = decoder.TreeDecoder.step
    monkeypatch.setattr(
        decoder.TreeDecoder, "step", lambda self, t: sizes.append(len(t)) or step(self, t)
    )
    s = sample_tokens(
        model,
        ids_of(tok, PROMPTS[:3]),
        8,
        eos_token_id=2,
        temperature=0,
        max_new_tokens=12,
        progress=False,
    )
    assert max(sizes) <= 3 and (s.tokens == s.tokens[:, :1]).all()


def test_rows_stop_at_eos_or_the_token_budget(policy):
    model, tok = policy
    s = sample_tokens(
        model,
        ids_of(tok, PROMPTS),
        40,
        eos_token_id=2,
        pad_token_id=0,
        max_new_tokens=12,
        batch_size=64,
        progress=False,
    )
    ended = s.tokens == 2  # (P, n, L)
    assert 0 < ended.any(-1).float().mean() < 1  # some rows ended, some hit the budget
    for i in range(len(PROMPTS)):
        for j in range(40):
            L, row = int(s.lengths[i, j]), s.tokens[i, j].tolist()
            assert 2 not in row[: L - 1] and all(t == 0 for t in row[L:])
            assert row[L - 1] == 2 or L == 12


def test_samples_depend_on_seed_prompt_and_index_only(policy):
    """Batch size, other prompts and their order never change a prompt's samples."""
    model, tok = policy
    ids = ids_of(tok, PROMPTS)
    kwargs = dict(eos_token_id=2, max_new_tokens=16, progress=False)
    a = sample_tokens(model, ids, 8, batch_size=1000, **kwargs)
    b = sample_tokens(model, ids, 8, batch_size=5, **kwargs)
    assert torch.equal(a.tokens, b.tokens)
    alone = sample_tokens(model, [ids[2]] + ids[:2], 8, batch_size=7, **kwargs)
    assert not torch.equal(alone.tokens[0], a.tokens[2])  # prompt index 0 != 2: another stream
    swapped = sample_tokens(model, [ids[1], ids[0], ids[2]], 8, **kwargs)
    assert torch.equal(swapped.tokens[2], a.tokens[2])  # index 2 in both calls, other order
    other_seed = sample_tokens(model, ids, 8, seed=1, **kwargs)
    assert not torch.equal(other_seed.tokens, a.tokens)
    assert len({tuple(r) for r in rows(a, 0)}) > 1  # samples of one prompt differ


def test_generate_samples_decodes_text(policy):
    model, tok = policy
    out = generate_samples(
        model, tok, PROMPTS[:2], 3, temperature=0, max_new_tokens=24, progress=False
    )
    assert [len(texts) for texts in out] == [3, 3]
    assert out[0][0] == tok.decode(reference_greedy(model, tok, PROMPTS[0], 24)[:-1])
    s = sample_tokens(model, ids_of(tok, PROMPTS[:1]), 2, eos_token_id=2, progress=False)
    assert all("<" not in text for text in decode(tok, s)[0])  # special tokens dropped


def test_decode_gives_each_row_its_own_text_when_rows_repeat(policy):
    """Repeated completions are decoded once; every row still gets exactly its own text. The
    samples are built by hand (repeats within and across prompts, the same tokens cut at other
    lengths, padding past each end), not left to what the model happens to sample."""
    _, tok = policy
    chains = ["7*3=21,21+5=26", "1+2=3", "6*6=36", ""]
    ids = [tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for text in chains]
    L = max(map(len, ids)) + 2
    rows = [ids[0], ids[1], ids[0], ids[0][:4], ids[2], ids[1], ids[3], ids[0]]  # (P * n,) rows
    tokens = torch.full((len(rows), L), tok.pad_token_id, dtype=torch.long)
    for r, row in enumerate(rows):
        tokens[r, : len(row)] = torch.tensor(row)
    tokens[3, 4:] = tokens[0, 4:]  # past its length, a row holds what another row goes on with
    lengths = torch.tensor([len(row) for row in rows])
    samples = sampling.Samples(tokens.view(2, 4, L), lengths.view(2, 4))
    texts = decode(tok, samples)
    want = [tok.decode(row, skip_special_tokens=True) for row in rows]
    assert texts == [want[:4], want[4:]]
    assert texts[0][0] == texts[0][2] == texts[1][3] == chains[0] != texts[0][3]


def test_batch_decode_is_the_tokenizers_own_in_one_backend_call(policy, monkeypatch):
    """A fast tokenizer without space clean-up is decoded by one backend call, to the strings of
    its own ``batch_decode``; with clean-up on, by its ``batch_decode``."""
    _, tok = policy
    rows = [[5, 6, 2, 7], [], [9, 9, 9, 0, 1], [2]]  # special tokens (EOS 2, pad 0) included
    want = tok.batch_decode(rows, skip_special_tokens=True)
    backend, calls = tok.backend_tokenizer, []

    def decode_batch(ids, **kwargs):
        calls.append(len(ids))
        return backend.decode_batch(ids, **kwargs)

    monkeypatch.setattr(tok, "_tokenizer", SimpleNamespace(decode_batch=decode_batch))
    assert sampling.batch_decode(tok, rows) == want
    assert calls == [len(rows)]
    monkeypatch.setattr(tok, "_tokenizer", backend)
    monkeypatch.setattr(tok, "clean_up_tokenization_spaces", True)
    monkeypatch.setattr(tok, "batch_decode", lambda ids, **kw: ["cleaned"] * len(ids))
    assert sampling.batch_decode(tok, rows) == ["cleaned"] * len(rows)


def test_sample_rows_takes_a_count_per_prompt(policy):
    model, tok = policy
    ids = ids_of(tok, PROMPTS[:3])
    kwargs = dict(eos_token_id=2, max_new_tokens=10, progress=False)
    s = sample_rows(model, ids, [3, 0, 2], temperature=0, **kwargs)
    assert s.tokens.shape == (5, 10) and s.lengths.shape == (5,)
    for r, prompt in enumerate([0, 0, 0, 2, 2]):  # prompt-major rows, none for prompt 1
        want = reference_greedy(model, tok, PROMPTS[prompt], 10)
        assert s.tokens[r, : s.lengths[r]].tolist() == want
    same = sample_rows(model, ids, [4, 4, 4], **kwargs)
    assert torch.equal(same.tokens.view(3, 4, 10), sample_tokens(model, ids, 4, **kwargs).tokens)


def test_decoding_keeps_no_autograd_state_and_returns_plain_tensors(policy):
    """Every forward runs under inference mode (no autograd bookkeeping), with the numbers of a
    no_grad decode, bit for bit; the samples come back as ordinary tensors."""
    model, tok = policy
    ids = ids_of(tok, PROMPTS[:3])
    kwargs = dict(eos_token_id=2, max_new_tokens=12, batch_size=8, seed=3, with_stats=True)
    modes = []
    s = sample_rows(
        model,
        ids,
        [6, 3, 5],
        progress=False,
        route=lambda _: modes.append(is_inference()),
        **kwargs,
    )
    assert modes and all(modes)
    with torch.no_grad():
        want = sampling._decode(
            model,
            ids,
            [6, 3, 5],
            pad_token_id=2,
            temperature=1.0,
            progress=False,
            route=None,
            **{**kwargs, "eos_token_id": [2]},
        )
    for got, expected in zip(
        (s.tokens, s.lengths, s.logprobs, s.entropies),
        (want.tokens, want.lengths, want.logprobs, want.entropies),
        strict=True,
    ):
        assert not got.is_inference() and torch.equal(got, expected)
    s.tokens[0, 0] = 1  # ordinary tensors: in-place updates are allowed


def test_route_sees_the_prompt_of_every_row_of_every_forward(policy, prompt_attention):
    """A route that pushes prompt i towards token 5 + i: every sample then follows its prompt,
    through prefill, node splits, cohorts joining and rows leaving."""
    model, tok = policy
    ids = ids_of(tok, PROMPTS[:3])
    routed = {}

    def push(head, args, output):  # the head's rows are the routed rows
        bonus = torch.zeros_like(output)
        bonus[torch.arange(len(output)), ..., 5 + routed["prompt"]] = 100.0
        return output + bonus

    handle = model.lm_head.register_forward_hook(push)
    try:
        s = sample_rows(
            model,
            ids,
            [5, 2, 7],
            eos_token_id=2,
            max_new_tokens=6,
            batch_size=4,  # several cohorts
            progress=False,
            route=lambda prompt: routed.update(prompt=prompt),
        )
    finally:
        handle.remove()
    for r, prompt in enumerate([0] * 5 + [1] * 2 + [2] * 7):
        assert s.tokens[r].tolist() == [5 + prompt] * 6


def test_bad_input_names_the_value(policy):
    model, tok = policy
    ids = ids_of(tok, PROMPTS[:1])
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        sample_tokens(model, ids, 0, eos_token_id=2)
    with pytest.raises(ValueError, match="got 0, 48"):
        sample_tokens(model, ids, 1, eos_token_id=2, batch_size=0)
    with pytest.raises(ValueError, match=r"one count >= 0 per prompt \(1\), got \[2, 2\]"):
        sample_rows(model, ids, [2, 2], eos_token_id=2)
    with pytest.raises(ValueError, match="temperature must be >= 0, got -1"):
        sample_tokens(model, ids, 1, eos_token_id=2, temperature=-1)
    with pytest.raises(ValueError, match=r"empty prompt\(s\) at \[1\]"):
        sample_tokens(model, [ids[0], []], 1, eos_token_id=2)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2))
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        sample_tokens(gpt2, ids, 1, eos_token_id=2)


def test_vllm_engine_samples_like_the_api_says(tmp_path, policy):
    if sampling.vllm is None:
        pytest.skip("vllm is not installed (GPU-only engine); the torch decoder is tested above")
    if not torch.cuda.is_available():
        pytest.skip("vllm is installed but no CUDA device is available")
    model, tok = policy
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    llm = sampling.vllm.LLM(str(tmp_path), dtype="float32", gpu_memory_utilization=0.2)
    ids = ids_of(tok, PROMPTS)
    s = sample_tokens(
        llm, ids, 4, eos_token_id=2, pad_token_id=0, max_new_tokens=16, with_stats=True
    )
    assert s.tokens.shape == (len(PROMPTS), 4, 16) and s.entropies is None
    assert ((s.lengths >= 1) & (s.lengths <= 16)).all()
    greedy = sample_tokens(llm, ids, 1, eos_token_id=2, temperature=0, max_new_tokens=16)
    torch_greedy = sample_tokens(
        model, ids, 1, eos_token_id=2, temperature=0, max_new_tokens=16, progress=False
    )
    assert torch.equal(greedy.tokens, torch_greedy.tokens)
