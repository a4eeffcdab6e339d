"""SFT pre-training: labels, determinism, caching, atomic writes, and that it actually learns."""

import shutil

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from psnlib.cache import Damaged
from psnlib.models import META_FILE, build_tokenizer
from psnlib.replication.compute import pretrain
from psnlib.replication.compute.pretrain import (
    BUILT_META_KEYS,
    IGNORE,
    build_policy,
    encode_sft,
    lr_at,
    policy_meta,
)
from psnlib.replication.plan import policies
from psnlib.replication.plan.policies import policy_dir
from psnlib.replication.plan.profiles import PolicySpec, get_profile

# The smoke base spec: a 2-layer d=32 model, 60 SFT steps of 32 examples (seconds on a CPU).
SMOKE = get_profile("smoke").base


def test_labels_cover_completion_and_eos_only():
    tok = build_tokenizer()
    ids, labels = encode_sft(["3 4->7:", "1 2 3->6:"], ["3+4=7", "1+2=3,3+3=6"], tok)
    assert ids.shape == labels.shape == (2, len("1 2 3->6:1+2=3,3+3=6") + 1)
    assert (labels[0, : len("3 4->7:")] == IGNORE).all()
    assert tok.decode(labels[0][labels[0] != IGNORE]) == "3+4=7<eos>"
    assert labels[0, len("3 4->7:3+4=7")] == tok.eos_token_id
    assert (labels[0, len("3 4->7:3+4=7") + 1 :] == IGNORE).all()  # right padding
    assert (ids[0, len("3 4->7:3+4=7") + 1 :] == tok.pad_token_id).all()


def test_lr_schedule_warms_up_then_decays():
    lrs = [lr_at(s, 100, 1.0) for s in range(100)]
    assert lrs[0] < lrs[4] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1, abs=0.01)
    assert all(a >= b for a, b in zip(lrs[5:], lrs[6:], strict=False))


def test_build_is_deterministic_cached_and_learns(tmp_path, monkeypatch):
    model, tok, path = build_policy(SMOKE, root=tmp_path / "a")
    meta = policy_meta(path)
    assert meta["final_loss"] < 0.8 * meta["loss_curve"][0]  # SFT reduced the loss
    untrained = pretrain.tiny_policy(SMOKE.family, SMOKE.size, tok, seed=SMOKE.seed)
    changed = [
        not torch.equal(p, q)
        for p, q in zip(model.parameters(), untrained.parameters(), strict=True)
    ]
    assert all(changed)
    again, _, path_b = build_policy(SMOKE, root=tmp_path / "b")  # same spec, fresh cache
    assert all(
        torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters(), strict=True)
    )
    # A second call loads from the cache without training.
    monkeypatch.setattr(pretrain, "sft_train", lambda *a, **k: pytest.fail("retrained"))
    cached, _, path_c = build_policy(SMOKE, root=tmp_path / "a")
    assert path_c == path
    assert all(
        torch.equal(p, q) for p, q in zip(model.parameters(), cached.parameters(), strict=True)
    )
    assert [p.name for p in (tmp_path / "a").iterdir()] == [path.name]  # no temp dirs left


def test_interrupted_save_leaves_nothing(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):  # the weights are written, the tokenizer is not
        raise KeyboardInterrupt

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_policy(SMOKE, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_settings_change_the_cache_key():
    other = PolicySpec(**{**SMOKE.__dict__, "sft_steps": SMOKE.sft_steps + 1})
    assert policy_dir(other) != policy_dir(SMOKE)


def test_bad_specs_fail_before_work(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "sft_corpus", lambda *a, **k: pytest.fail("did work"))
    with pytest.raises(ValueError, match="unknown model family 'gpt'"):
        build_policy(PolicySpec(family="gpt", sft_steps=1), root=tmp_path)
    with pytest.raises(ValueError, match="sft_steps"):
        build_policy(PolicySpec(sft_steps=0), root=tmp_path)


def test_on_step_sees_every_step_and_leaves_training_as_it_was():
    """A callback that evaluates along the way (benchmarks/regime_probe.py) changes nothing."""
    from psnlib.models import tiny_policy
    from psnlib.replication.compute.pretrain import sft_train
    from psnlib.tasks import sft_corpus

    tokenizer = build_tokenizer()
    corpus = sft_corpus(64, seed=0)
    ids, labels = encode_sft(list(corpus["prompt"]), list(corpus["completion"]), tokenizer)
    seen = []

    def evaluate(step, losses):
        seen.append((step, len(losses), model.training))
        model.eval()  # as an evaluation would

    runs = []
    for callback in (None, evaluate):
        model = tiny_policy(size="smoke", tokenizer=tokenizer, seed=0)
        kwargs = dict(steps=5, batch_size=8, lr=1e-2, seed=0, on_step=callback)
        runs.append((sft_train(model, ids, labels, **kwargs), model.state_dict()))
    assert seen == [(s, s, True) for s in range(1, 6)]  # training mode back after each call
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        assert torch.equal(value, runs[1][1][name]), name


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The smoke base policy, built once: ``(root, path, weights)``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("built")
    model, _, path = build_policy(SMOKE, root=root)
    torch.set_num_threads(threads)
    return root, path, {k: v.clone() for k, v in model.state_dict().items()}


def copy_of(built, tmp_path):
    root, path, _ = built
    shutil.copytree(root, tmp_path / "root")
    return tmp_path / "root", tmp_path / "root" / path.name


def cut(file, keep):
    file.write_bytes(file.read_bytes()[:keep])


DAMAGE = {
    "truncated meta": lambda p: cut(p / META_FILE, 40),
    "meta a JSON list": lambda p: (p / META_FILE).write_text("[1, 2]"),
    "meta without its keys": lambda p: (p / META_FILE).write_text('{"spec": {}}'),
    "meta missing": lambda p: (p / META_FILE).unlink(),
    "truncated weights": lambda p: cut(p / "model.safetensors", 1000),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cached_policy_is_removed_with_a_warning_and_rebuilt(
    built, tmp_path, one_thread, damage
):
    root, path = copy_of(built, tmp_path)
    DAMAGE[damage](path)
    with pytest.warns(UserWarning, match=f"removing the damaged policy {path} "):
        model, _, again = build_policy(SMOKE, root=root)
    assert again == path and set(policy_meta(path)) >= set(BUILT_META_KEYS)
    for name, value in model.state_dict().items():  # the same SFT on the same machine
        assert torch.equal(value, built[2][name]), name


def test_policy_meta_calls_a_damaged_record_damaged(built, tmp_path):
    _, path = copy_of(built, tmp_path)
    cut(path / META_FILE, 40)
    with pytest.raises(Damaged, match=f"{META_FILE} does not parse"):
        policy_meta(path)
    (path / META_FILE).write_text("[]")
    with pytest.raises(Damaged, match=f"{META_FILE} holds a JSON list, not an object"):
        policy_meta(path)


def test_a_transient_error_while_loading_a_cached_policy_removes_nothing(
    built, tmp_path, monkeypatch
):
    root, path = copy_of(built, tmp_path)

    def no_threads(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(pretrain, "load_saved_policy", no_threads)
    monkeypatch.setattr(pretrain, "sft_train", lambda *a, **k: pytest.fail("rebuilt"))
    with pytest.raises(RuntimeError, match="can't start new thread"):
        build_policy(SMOKE, root=root)
    assert sorted(p.name for p in path.iterdir()) == sorted(p.name for p in built[1].iterdir())


def test_a_policy_with_a_non_finite_weight_is_not_cached(tmp_path, monkeypatch, one_thread):
    def diverged(model, *args, **kwargs):
        with torch.no_grad():
            next(model.parameters())[0, 0] = float("nan")
        return [float("nan")]

    monkeypatch.setattr(pretrain, "sft_train", diverged)
    with pytest.raises(ValueError, match=f"refusing to save the policy .*{policy_dir(SMOKE).name}"):
        build_policy(SMOKE, root=tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the policy nor its lock


@pytest.mark.parametrize("damage", ["a file", "a symbolic link"])
def test_a_file_in_place_of_a_committed_policy_is_damage_never_retrained(
    tmp_path, monkeypatch, damage
):
    """issue 50, item 8: a file (or a link) where a committed policy's directory is must not be
    taken for "not committed" (which would start the ~37-minute SFT, whose weights need not
    match the records'): it is one line naming it and the git checkout that restores it."""
    monkeypatch.setattr(policies, "committed_root", lambda: tmp_path / "policies")
    spec = get_profile("cpu").base
    path = tmp_path / "policies" / policies.policy_name(spec)
    path.parent.mkdir()
    if damage == "a file":
        path.write_text("not a policy")
    else:
        (tmp_path / "elsewhere").mkdir()
        path.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(pretrain, "_sft_policy", lambda *a: pytest.fail("retrained"))
    for call in (policies.committed_policy, policies.policy_dir, pretrain.base_policy):
        with pytest.raises(ValueError, match=rf"{path} is .*restore it with `git -C .* checkout"):
            call(spec if call is not pretrain.base_policy else get_profile("cpu"))
