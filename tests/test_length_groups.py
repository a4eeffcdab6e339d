"""The loss forward in groups of similar completion length: the padded forward's numbers and
gradients up to rounding, in the batch's order, without computing the padding."""

import pytest
import torch

from psnlib.models import build_tokenizer, tiny_policy
from psnlib.trainer.length_groups import completion_widths, grouped_forward

# floats: compared along two code paths, also run at other CPU kernel levels (make test-floats)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.floats]  # tests/conftest.py
P, T = 5, 12  # prompt and completion widths of the batch
LENGTHS = [12, 3, 7, 0, 9, 5, 12, 1]  # completion tokens per row (0: a fully masked rollout)


def logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, compute_entropy=False):
    """What TRL's ``_get_per_token_logps_and_entropies`` returns, for a plain causal LM."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logits = logits[:, -logits_to_keep - 1 : -1]  # (b, T, V): the next-token predictions
    logp = logits.log_softmax(-1)
    chosen = logp.gather(-1, input_ids[:, -logits_to_keep:, None])[..., 0]  # (b, T)
    entropy = -(logp.exp() * logp).sum(-1) if compute_entropy else None
    return chosen, entropy, None


@pytest.fixture(scope="module")
def batch():
    tok = build_tokenizer()
    model = tiny_policy(size="smoke", tokenizer=tok, seed=0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, len(tok), (len(LENGTHS), P + T), generator=g)
    mask = torch.ones_like(ids)
    mask[:2, :2] = 0  # left padding of two prompts
    for r, n in enumerate(LENGTHS):
        mask[r, P + n :] = 0  # right padding of the completion
    return model, ids, mask


def test_widths_are_the_position_after_the_last_completion_token():
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
    assert completion_widths(mask).tolist() == [2, 0, 3, 4]


@pytest.mark.parametrize("groups", [1, 3, 8, 20])
def test_groups_give_the_padded_forwards_numbers_and_gradients(batch, groups):
    model, ids, mask = batch
    completion = mask[:, -T:].bool()

    def run(forward):
        model.zero_grad()
        lp, ent, _ = forward()
        ((lp * completion).sum() + (ent * completion).sum()).backward()
        return lp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]

    padded = run(lambda: logps_and_entropies(model, ids, mask, T, compute_entropy=True))
    grouped = run(
        lambda: grouped_forward(
            logps_and_entropies, model, ids, mask, T, groups, compute_entropy=True
        )
    )
    for want, got in zip(padded[:2], grouped[:2], strict=True):
        assert got.shape == (len(LENGTHS), T)
        torch.testing.assert_close(got[completion], want[completion], rtol=0, atol=1e-5)
    for want, got in zip(padded[2], grouped[2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_each_group_is_cut_to_its_longest_completion(batch):
    model, ids, mask = batch
    widths = []

    def spy(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        assert input_ids.shape[1] == P + logits_to_keep  # no column past the group's width
        widths.append((logits_to_keep, completion_widths(attention_mask[:, P:]).tolist()))
        return logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, **kwargs)

    lp, ent, _ = grouped_forward(spy, model, ids, mask, T, 4)
    assert ent is None
    # longest first, two rows a group; a fully masked row still gets one column
    assert widths == [(12, [12, 12]), (9, [9, 7]), (5, [5, 3]), (1, [1, 0])]
    assert (lp[1, 5:] == 0).all() and (lp[3, 1:] == 0).all()  # 0 past the group's width


def test_groups_must_be_positive(batch):
    model, ids, mask = batch
    with pytest.raises(ValueError, match="groups must be >= 1, got 0"):
        grouped_forward(logps_and_entropies, model, ids, mask, T, 0)
