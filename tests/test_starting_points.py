"""The cpu profile's starting points come from git: loaded, never rebuilt, whatever the data
directory and the run ledger's folder, and their weights are the ones their fingerprints name."""

import json
import shutil

import pytest

from psnlib.replication import pretrain, starting_points
from psnlib.replication.prefixes import prefix_root
from psnlib.replication.profiles import get_profile
from psnlib.replication.store import weights_fingerprint

CPU = get_profile("cpu")


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """An empty data directory and ledger, as on a fresh machine with ``--out`` elsewhere."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PSNLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(pretrain, "_sft_policy", lambda *a: pytest.fail("SFT ran"))
    return tmp_path


@pytest.mark.parametrize("spec", starting_points.policies(CPU), ids=pretrain.policy_name)
def test_every_cpu_starting_policy_is_committed_with_its_fingerprint(spec, elsewhere, one_thread):
    committed = pretrain.committed_policy(spec)
    assert committed is not None and committed.is_relative_to(pretrain.ROOT / "results" / "start")
    model, _, path = pretrain.build_policy(spec)
    assert path == committed and pretrain.policy_dir(spec) == committed
    assert weights_fingerprint(model) == pretrain.starting_fingerprint(spec)
    assert not (elsewhere / "data").exists()  # nothing built, nothing cached


def test_the_plans_prefix_sets_are_committed_beside_them(elsewhere):
    root = prefix_root(CPU, "weak")
    assert root == pretrain.committed_root().parent / "prefixes"
    assert len(list(root.glob("*.json"))) == len(starting_points.prefix_sets(CPU))


def test_a_damaged_committed_policy_is_named_not_removed(elsewhere, tmp_path, monkeypatch):
    spec = CPU.weak
    copy = tmp_path / "start" / "policies"
    shutil.copytree(pretrain.committed_root(), copy)
    monkeypatch.setattr(pretrain, "committed_root", lambda: copy)
    (copy / pretrain.policy_name(spec) / pretrain.META_FILE).write_text("{")
    with pytest.raises(ValueError, match=r"committed starting policy .* is damaged .*git checkout"):
        pretrain.build_policy(spec)
    assert (copy / pretrain.policy_name(spec)).is_dir()  # tracked in git: never deleted
    json.loads((copy / pretrain.FINGERPRINTS).read_text())  # the rest untouched


def test_commit_then_rebuild_says_whether_the_fingerprints_match(tmp_path, monkeypatch, one_thread):
    """``--commit-start`` copies the built policies with their fingerprints; ``--rebuild`` runs
    their SFT again and sets the fingerprints side by side (smoke: seconds of SFT)."""
    from psnlib.replication import prefixes

    smoke = get_profile("smoke")
    root = tmp_path / "start" / "policies"
    for module in (pretrain, starting_points, prefixes):
        monkeypatch.setattr(module, "committed_root", lambda: root)
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    starting_points.commit(smoke)
    names = {pretrain.policy_name(spec) for spec in starting_points.policies(smoke)}
    known = json.loads((root / pretrain.FINGERPRINTS).read_text())
    assert set(known) == names and {p.name for p in root.iterdir() if p.is_dir()} == names
    assert all(pretrain.committed_policy(spec) for spec in starting_points.policies(smoke))
    table = starting_points.rebuild(smoke)
    assert set(table["policy"]) == names and table["same"].all()  # this machine, this recipe
    wrong = next(iter(names))
    (root / pretrain.FINGERPRINTS).write_text(json.dumps(known | {wrong: "0" * 16}))
    table = starting_points.rebuild(smoke).set_index("policy")
    assert not table.loc[wrong, "same"] and table.drop(index=wrong)["same"].all()
