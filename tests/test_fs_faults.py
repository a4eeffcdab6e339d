"""What psnlib.io does when the file system misbehaves: symbolic links where it writes, the
modes of what it writes, a full disk, and cache entries damaged in ways that still read."""

import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from psnlib import cache, io
from psnlib.cache import load_cached, load_json
from psnlib.io import atomic_directory, atomic_save, atomic_write_json, atomic_write_text
from psnlib.locks import exclusive, lock_path
from psnlib.paths import check_writable


def run_io(script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``script`` in a fresh Python with ``psnlib/io.py`` loaded by path as ``io`` (stdlib
    only: no torch to import), and return the JSON it prints last."""
    prelude = (
        "import importlib.util, json, os, sys\n"
        "spec = importlib.util.spec_from_file_location('psnio', sys.argv[1])\n"
        "io = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(io)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + script, io.__file__, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# Symbolic links: followed to read, never written through.


@pytest.mark.parametrize("target_exists", [True, False])
def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path, target_exists):
    victim = tmp_path / "victim"
    if target_exists:
        victim.write_text("precious\n" * 20)
    lock_path(tmp_path / "out").symlink_to(victim)
    ran = []
    with (
        pytest.raises(OSError, match=r"out\.lock: it is a symbolic link .*victim.*remove the link"),
        exclusive(tmp_path / "out", "x"),
    ):
        ran.append(True)
    assert ran == [] and lock_path(tmp_path / "out").is_symlink()
    if target_exists:
        assert victim.read_text() == "precious\n" * 20
    else:
        assert not victim.exists()  # not made through the dangling link either


def test_a_lock_file_that_is_a_directory_is_one_clear_error(tmp_path):
    lock_path(tmp_path / "out").mkdir()
    with (
        pytest.raises(OSError, match=r"out\.lock: is a directory; a directory is there; remove"),
        exclusive(tmp_path / "out", "x"),
    ):
        pytest.fail("the block ran")


def test_an_atomic_write_refuses_a_symlinked_file(tmp_path):
    target, link = tmp_path / "real.json", tmp_path / "m.json"
    target.write_text('{"x": 1}\n')
    link.symlink_to(target)
    with pytest.raises(OSError, match=r"m\.json: it is a symbolic link .*real\.json") as caught:
        atomic_write_json(link, {"x": 2})
    assert isinstance(caught.value, io.WriteFailed)
    assert link.is_symlink() and target.read_text() == '{"x": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "real.json"]
    assert load_json(link) == {"x": 1}  # read through it, as ever


@pytest.mark.parametrize("there", ["link", "file"])
def test_an_atomic_directory_refuses_a_link_or_a_file_before_the_block_runs(tmp_path, there):
    real = tmp_path / "real"
    real.mkdir()
    (real / "w.txt").write_text("v1")
    path = tmp_path / "policy"
    if there == "link":
        path.symlink_to(real)
        message = r"policy: it is a symbolic link .*real"
    else:
        path.write_text("not a directory")
        message = r"directory .*policy: a file is there; remove it"
    ran = []
    with pytest.raises(OSError, match=message) as caught:
        atomic_save(path, lambda tmp: ran.append((tmp / "w.txt").write_text("v2")))
    assert isinstance(caught.value, io.WriteFailed) and ran == []
    assert (real / "w.txt").read_text() == "v1"
    assert path.is_symlink() if there == "link" else path.read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy", "real"]


def test_a_damaged_cache_entry_that_is_a_symlink_is_refused_not_removed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "w.txt").write_text("finished work")
    (tmp_path / "entry").symlink_to(real)

    def load(p):
        raise cache.Damaged(f"{p / 'm.json'} is missing")

    with pytest.raises(OSError, match=r"refusing to remove the damaged cached run .*entry .*link"):
        load_cached(tmp_path / "entry", load, "cached run")
    assert (tmp_path / "entry").is_symlink() and (real / "w.txt").read_text() == "finished work"


def test_check_writable_names_a_dangling_symlink(tmp_path):
    (tmp_path / "data").symlink_to(tmp_path / "gone")
    with pytest.raises(ValueError, match=r"'.*data' is a symbolic link to '.*gone', which does"):
        check_writable(tmp_path / "data" / "runs", "PSNLIB_DATA")


# Modes: those of an ordinary open or mkdir, not tempfile's private 0600 and 0700.


@pytest.mark.parametrize("umask", [0o022, 0o002], ids=["022", "002"])
def test_what_psnlib_writes_gets_the_mode_an_ordinary_open_gives(tmp_path, umask):
    before = os.umask(umask)
    try:
        with open(tmp_path / "plain.txt", "w"):
            pass
        atomic_write_text(tmp_path / "atomic.txt", "x")
        with atomic_directory(tmp_path / "entry") as tmp:
            (tmp / "w.txt").write_text("x")
        with exclusive(tmp_path / "run", "x"):
            lock_mode = lock_path(tmp_path / "run").stat().st_mode & 0o777
    finally:
        os.umask(before)
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "atomic.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "entry").stat().st_mode & 0o777 == 0o777 & ~umask
    assert lock_mode == 0o666 & ~umask


# A full disk (and its kin): one clear line, nothing partial left, the old file kept.


@pytest.mark.parametrize(
    "code, cause",
    ids=["ENOSPC", "EDQUOT", "EROFS", "EACCES"],
    argvalues=[
        (errno.ENOSPC, "no space left on device; free some space on its disk"),
        (errno.EDQUOT, "disk quota exceeded; free some of your quota"),
        (errno.EROFS, "read-only file system; its file system is mounted read-only"),
        (errno.EACCES, "permission denied; this user may not write there"),
    ],
)
def test_a_failed_write_is_one_clear_line_and_leaves_the_old_file(
    tmp_path, monkeypatch, code, cause
):
    path = tmp_path / "m.json"
    path.write_text('{"x": 1}\n')

    def replace(src, dst):
        raise OSError(code, os.strerror(code), src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match=rf"^cannot write {path}: {cause}") as caught:
        atomic_write_json(path, {"x": 2})
    err = caught.value
    assert isinstance(err, io.WriteFailed) and err.errno == code and err.filename == str(path)
    assert "\n" not in str(err) and str(pickle.loads(pickle.dumps(err))) == str(err)
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]
    assert path.read_text() == '{"x": 1}\n'


def test_a_parent_that_is_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "runs").write_text("a file")
    with pytest.raises(OSError, match=r"runs/m\.json: .*a file stands where a directory above"):
        atomic_write_json(tmp_path / "runs" / "m.json", {"x": 1})


def test_a_parent_that_is_a_dangling_symlink_is_one_clear_error(tmp_path):
    (tmp_path / "data").symlink_to(tmp_path / "unmounted")  # a disk not mounted, say
    link = rf"{tmp_path}/data is a symbolic link to {tmp_path}/unmounted, which does not exist"
    with pytest.raises(OSError, match=rf"cannot write .*data/m\.json: file exists; {link}"):
        atomic_write_json(tmp_path / "data" / "m.json", {"x": 1})
    with pytest.raises(OSError, match=rf"cannot write .*data/policy: file exists; {link}"):
        atomic_save(tmp_path / "data" / "policy", lambda tmp: None)
    assert not (tmp_path / "unmounted").exists()


TOO_LARGE = """
import resource, signal
from pathlib import Path
out = Path(sys.argv[2])
(out / "m.json").write_text("old")
(out / "policy").mkdir()
(out / "policy" / "w.bin").write_text("old")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
seen = {}
try:
    io.atomic_write_text(out / "m.json", "x" * 5000)
except OSError as err:
    seen["file"] = [type(err).__name__, str(err)]
try:
    io.atomic_save(out / "policy", lambda tmp: (tmp / "w.bin").write_bytes(b"x" * 5000))
except OSError as err:
    seen["directory"] = [type(err).__name__, str(err)]
seen["left"] = sorted(p.name for p in out.iterdir())
seen["kept"] = [(out / "m.json").read_text(), (out / "policy" / "w.bin").read_text()]
print(json.dumps(seen))
"""


def test_a_real_write_past_the_file_size_limit_fails_cleanly(tmp_path):
    seen = run_io(TOO_LARGE, str(tmp_path))
    file, directory = seen["file"], seen["directory"]
    assert file[0] == "WriteFailed" and file[1].startswith(f"cannot write {tmp_path}/m.json: file")
    assert directory[0] == "WriteFailed"
    assert directory[1].startswith(f"cannot write {tmp_path}/policy: file too large")
    assert seen["left"] == ["m.json", "policy"] and seen["kept"] == ["old", "old"]


SAFETENSORS_FULL = RuntimeError(
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left '
    'on device" })'
)
TORCH_FULL = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 32")


@pytest.mark.parametrize(
    "error, free, message",
    ids=["safetensors", "torch"],
    argvalues=[
        (SAFETENSORS_FULL, 2**40, r"no space left on device \(RuntimeError: Error while serial"),
        (TORCH_FULL, 0, r"no space left on device \(0 bytes free; RuntimeError: \[enforce fail"),
    ],
)
def test_a_full_disk_that_a_saver_reports_otherwise_is_one_clear_line(
    tmp_path, monkeypatch, error, free, message
):
    path = tmp_path / "policy"
    path.mkdir()
    (path / "w.bin").write_text("old")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda where: usage._replace(free=free))

    def save(tmp):
        (tmp / "w.bin").write_text("half")
        raise error

    with pytest.raises(OSError, match=rf"^cannot write {path}: {message}") as caught:
        atomic_save(path, save)
    assert isinstance(caught.value, io.WriteFailed) and caught.value.errno == errno.ENOSPC
    assert "\n" not in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]
    assert (path / "w.bin").read_text() == "old"


def test_another_error_of_a_saver_propagates_as_it_is(tmp_path):
    def save(tmp):
        raise ValueError("a bug in the saver")

    with pytest.raises(ValueError, match="a bug in the saver"):
        atomic_save(tmp_path / "policy", save)
    assert list(tmp_path.iterdir()) == []


def test_a_kill_while_the_old_directory_goes_leaves_the_entry_whole(tmp_path, monkeypatch):
    path = tmp_path / "entry"
    path.mkdir()
    for name in ("a.txt", "b.txt"):
        (path / name).write_text("v1")
    real_rmtree = shutil.rmtree

    def killed_rmtree(directory, *args, **kwargs):  # removes one file, then the kill comes
        monkeypatch.setattr(shutil, "rmtree", real_rmtree)
        os.unlink(sorted(Path(directory).iterdir())[0])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), atomic_directory(path) as tmp:
        for name in ("a.txt", "b.txt"):
            (tmp / name).write_text("v2")
        monkeypatch.setattr(shutil, "rmtree", killed_rmtree)
    assert sorted(p.name for p in path.iterdir()) == ["a.txt", "b.txt"]
    assert {(path / name).read_text() for name in ("a.txt", "b.txt")} in ({"v1"}, {"v2"})


# Cache entries damaged in ways that still read: removed as damage, not an error every call.


def meta_loader(p: Path) -> dict:
    return load_json(p / "m.json")


def test_a_cache_entry_replaced_by_a_file_is_removed_as_damaged(tmp_path):
    path = tmp_path / "entry"
    path.write_text("not a directory")
    with pytest.warns(UserWarning, match=r"removing the damaged cached run .*entry .*not a dir"):
        assert load_cached(path, meta_loader, "cached run") is None
    assert not path.exists()
    atomic_write_json(path / "m.json", {"x": 1})  # recomputed by the caller
    assert load_cached(path, meta_loader, "cached run") == {"x": 1}


def open_weights(p: Path) -> bytes:
    return (p / "w.safetensors").read_bytes()


@pytest.mark.parametrize("loader, name", [(meta_loader, "m.json"), (open_weights, "w.safetensors")])
def test_a_directory_where_an_entry_holds_a_file_is_damage(tmp_path, loader, name):
    path = tmp_path / "entry"
    (path / name).mkdir(parents=True)
    with pytest.warns(UserWarning, match=rf"removing the damaged policy .*entry .*{name} is a dir"):
        assert load_cached(path, loader, "policy") is None
    assert not path.exists()


def test_a_directory_error_outside_the_entry_is_no_damage(tmp_path):
    path = tmp_path / "entry"
    path.mkdir()
    (path / "w.txt").write_text("finished work")
    with pytest.raises(IsADirectoryError):
        load_cached(path, lambda p: tmp_path.read_bytes(), "policy")
    assert (path / "w.txt").read_text() == "finished work"


ASCII_LOCALE = """
from pathlib import Path
from psnlib.cache import load_json
out = Path(sys.argv[2])
seen = {}
try:
    io.atomic_write_text(out / "results.md", "sigma \\u03c3 \\u2014 \\u00b1 0.1\\n")
    seen["written"] = (out / "results.md").read_bytes().decode("utf-8")
except Exception as err:
    seen["written"] = repr(err)
(out / "tokenizer_config.json").write_bytes('{"eos": "\\u00e9"}'.encode("utf-8"))
try:
    seen["read"] = load_json(out / "tokenizer_config.json")
except Exception as err:
    seen["read"] = repr(err)
print(json.dumps(seen))
"""


def test_text_is_utf8_whatever_the_locale(tmp_path):
    ascii_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    seen = run_io(ASCII_LOCALE, str(tmp_path), env=ascii_locale)
    assert seen == {"written": "sigma \u03c3 \u2014 \u00b1 0.1\n", "read": {"eos": "\u00e9"}}


def test_a_cached_run_that_is_a_symlink_is_read_not_retrained(tmp_path, monkeypatch, one_thread):
    """A finished run whose cache entry is a symbolic link (a cache moved to another disk) is
    followed for reading: loaded, never trained again; one that is damaged is named, and
    neither it nor its link's target is deleted."""
    from psnlib.replication.compute import runs
    from psnlib.replication.plan.runs import run_dir

    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    _, _, log = runs.train_policy("smoke", "grpo", 0, max_steps=1)
    path = run_dir(runs.get_profile("smoke"), "grpo", 0, {"max_steps": 1}, "countdown_dense_reward")
    moved = tmp_path / "elsewhere" / path.name
    moved.parent.mkdir()
    shutil.move(path, moved)
    path.symlink_to(moved, target_is_directory=True)
    monkeypatch.setattr(runs, "fit", lambda *a: pytest.fail("retrained a cached run"))
    _, _, again = runs.train_policy("smoke", "grpo", 0, max_steps=1)
    pd.testing.assert_frame_equal(again, log, check_like=True)  # the same steps, loaded
    (moved / "psnlib_meta.json").write_text("{")  # damaged, behind the link
    with pytest.raises(io.WriteFailed, match="symbolic link"):
        runs.train_policy("smoke", "grpo", 0, max_steps=1)
    assert path.is_symlink() and moved.is_dir()
