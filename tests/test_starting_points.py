"""The cpu profile's starting points come from git: loaded, never rebuilt, whatever the data
directory and the run ledger's folder, and their weights are the ones their fingerprints name;
damaged, they are named with the ``git checkout`` that restores them (issue 50), never trained
again."""

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from psnlib.replication import reproduce
from psnlib.replication.compute import pretrain, sitting, starting_points
from psnlib.replication.compute.prefixes import prefix_root
from psnlib.replication.compute.store import weights_fingerprint
from psnlib.replication.plan import policies
from psnlib.replication.plan.profiles import get_profile

CPU = get_profile("cpu")


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """An empty data directory and ledger, as on a fresh machine with ``--out`` elsewhere."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PSNLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(pretrain, "_sft_policy", lambda *a: pytest.fail("SFT ran"))
    return tmp_path


@pytest.mark.parametrize("spec", starting_points.policies(CPU), ids=policies.policy_name)
def test_every_cpu_starting_policy_is_committed_with_its_fingerprint(spec, elsewhere, one_thread):
    committed = policies.committed_policy(spec)
    assert committed is not None and committed.is_relative_to(policies.ROOT / "results" / "start")
    model, _, path = pretrain.build_policy(spec)
    assert path == committed and policies.policy_dir(spec) == committed
    assert weights_fingerprint(model) == policies.starting_fingerprint(spec)
    assert not (elsewhere / "data").exists()  # nothing built, nothing cached


def test_the_plans_prefix_sets_are_committed_beside_them(elsewhere):
    root = prefix_root(CPU, "weak")
    assert root == policies.committed_root().parent / "prefixes"
    assert len(list(root.glob("*.json"))) == len(starting_points.prefix_sets(CPU))


def test_a_damaged_committed_policy_is_named_not_removed(elsewhere, tmp_path, monkeypatch):
    spec = CPU.weak
    copy = tmp_path / "start" / "policies"
    shutil.copytree(policies.committed_root(), copy)
    monkeypatch.setattr(policies, "committed_root", lambda: copy)
    (copy / policies.policy_name(spec) / pretrain.META_FILE).write_text("{")
    with pytest.raises(ValueError, match=r"committed starting policy .* is damaged .*git checkout"):
        pretrain.build_policy(spec)
    assert (copy / policies.policy_name(spec)).is_dir()  # tracked in git: never deleted
    json.loads((copy / policies.FINGERPRINTS).read_text())  # the rest untouched


def test_commit_then_rebuild_says_whether_the_fingerprints_match(tmp_path, monkeypatch, one_thread):
    """``--commit-start`` copies the built policies with their fingerprints; ``--rebuild`` runs
    their SFT again and sets the fingerprints side by side (smoke: seconds of SFT)."""
    from psnlib.replication.compute import prefixes

    smoke = get_profile("smoke")
    root = tmp_path / "start" / "policies"
    for module in (policies, starting_points, prefixes):
        monkeypatch.setattr(module, "committed_root", lambda: root)
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    starting_points.commit(smoke)
    names = {policies.policy_name(spec) for spec in starting_points.policies(smoke)}
    known = json.loads((root / policies.FINGERPRINTS).read_text())
    assert set(known) == names and {p.name for p in root.iterdir() if p.is_dir()} == names
    assert all(policies.committed_policy(spec) for spec in starting_points.policies(smoke))
    table = starting_points.rebuild(smoke)
    assert set(table["policy"]) == names and table["same"].all()  # this machine, this recipe
    wrong = next(iter(names))
    (root / policies.FINGERPRINTS).write_text(json.dumps(known | {wrong: "0" * 16}))
    table = starting_points.rebuild(smoke).set_index("policy")
    assert not table.loc[wrong, "same"] and table.drop(index=wrong)["same"].all()


# ------------------------------------------------------------ issue 50: damage is named


@pytest.fixture
def committed_copy(elsewhere, tmp_path, monkeypatch) -> Path:
    """A copy of the committed starting policies, standing in for them (to damage); nothing may
    be trained or computed."""
    copy = tmp_path / "start" / "policies"
    shutil.copytree(policies.committed_root(), copy)
    monkeypatch.setattr(policies, "committed_root", lambda: copy)
    for name in ("prepare", "starting", "run_notebook"):
        monkeypatch.setattr(reproduce, name, lambda *a, **k: pytest.fail("did work"))
    return copy


def _fingerprints_damaged(copy: Path) -> tuple[Path, str]:
    (copy / policies.FINGERPRINTS).write_text('{"llama-weak')
    return copy / policies.FINGERPRINTS, "the committed starting points' fingerprints are damaged"


def _fingerprints_a_list(copy: Path) -> tuple[Path, str]:
    (copy / policies.FINGERPRINTS).write_text("[]")
    return copy / policies.FINGERPRINTS, "fingerprints .* are damaged \\(not a mapping"


def _a_file_for_a_policy(copy: Path) -> tuple[Path, str]:
    path = copy / policies.policy_name(CPU.base)
    shutil.rmtree(path)
    path.write_text("")
    return path, f"the committed starting policy {path} is not a directory"


def _a_policy_without_fingerprint(copy: Path) -> tuple[Path, str]:
    known = json.loads((copy / policies.FINGERPRINTS).read_text())
    del known[policies.policy_name(CPU.weak)]
    (copy / policies.FINGERPRINTS).write_text(json.dumps(known))
    return copy / policies.FINGERPRINTS, "has no fingerprint in"


@pytest.mark.parametrize(
    "damage",
    [
        _fingerprints_damaged,
        _fingerprints_a_list,
        _a_file_for_a_policy,
        _a_policy_without_fingerprint,
    ],
)
@pytest.mark.parametrize("sitting", [["--status"], ["--workers", "1"]], ids=["status", "sitting"])
def test_a_damaged_committed_starting_point_is_named_with_the_git_checkout_that_restores_it(
    damage, sitting, committed_copy, tmp_path, capsys
):
    """A damaged fingerprints.json was a ValueError traceback; a file in place of a committed
    policy went unseen: --status counted every record done, a sitting started its SFT."""
    restored, message = damage(committed_copy)
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(["--profile", "cpu", "--out", str(tmp_path / "out"), *sitting])
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert text.startswith("psnlib.replication.reproduce: error: ") and re.search(message, text)
    assert text.endswith(f"`git -C {policies.ROOT} checkout -- {restored}`") or (
        f"`git -C {policies.ROOT} checkout -- {restored}` (trained again here" in text
    ), text
    assert capsys.readouterr().out == ""


def test_the_cli_names_a_damaged_committed_starting_point_too(committed_copy, tmp_path, capsys):
    from psnlib.replication.compute import cli

    _a_file_for_a_policy(committed_copy)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--profile", "cpu", "--output_dir", str(tmp_path / "run")])
    assert re.search(
        r"^psnlib train: error: the committed starting policy .* is not a dir",
        str(exit_.value.code),
    )


def test_the_restore_command_restores_a_file_put_in_place_of_a_directory(tmp_path):
    """The command the messages give, on a repository of its own."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    policy = tmp_path / "results" / "start" / "policies" / "p"
    policy.mkdir(parents=True)
    (policy / "model.safetensors").write_text("weights")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    shutil.rmtree(policy)
    policy.write_text("")
    command = sitting.restore(policy).strip("`").replace(str(policies.ROOT), str(tmp_path))
    subprocess.run(shlex.split(command), check=True)
    assert (policy / "model.safetensors").read_text() == "weights"
