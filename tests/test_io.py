import errno
import json
import os
import socket
import subprocess
import sys

import pytest

from psnlib.cache import Damaged, load_cached, load_json, read_json
from psnlib.io import atomic_directory, atomic_write_json
from psnlib.locks import Busy, exclusive, lock_path


def test_atomic_json_roundtrip_leaves_no_temp_files(tmp_path):
    path = atomic_write_json(tmp_path / "a" / "m.json", {"x": 1})
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["m.json"]


def test_atomic_directory_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_directory(target) as tmp:
        (tmp / "w.txt").write_text("v1")
    with pytest.raises(RuntimeError), atomic_directory(target) as tmp:
        (tmp / "w.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert (target / "w.txt").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def entry(tmp_path):
    path = tmp_path / "entry"
    path.mkdir()
    (path / "w.txt").write_text("finished work")
    return path


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("can't start new thread"),
        MemoryError(),
        OSError(errno.EMFILE, "Too many open files"),
        PermissionError(errno.EACCES, "Permission denied"),
    ],
)
def test_a_transient_error_while_loading_propagates_and_removes_nothing(tmp_path, error):
    path = entry(tmp_path)

    def load(p):
        raise error

    with pytest.raises(type(error)):
        load_cached(path, load, "cached run")
    assert (path / "w.txt").read_text() == "finished work"


def test_a_damaged_entry_is_removed_with_a_warning(tmp_path):
    path = entry(tmp_path)

    def load(p):
        raise Damaged(f"{p / 'w.txt'} is truncated")

    with pytest.warns(UserWarning, match=r"removing the damaged cached run .*entry .*truncated"):
        assert load_cached(path, load, "cached run") is None
    assert not path.exists()


def test_load_json_calls_a_missing_or_unparsable_file_damaged(tmp_path):
    with pytest.raises(Damaged, match="m.json is missing"):
        load_json(tmp_path / "m.json")
    (tmp_path / "m.json").write_text('{"log": [')
    with pytest.raises(Damaged, match="m.json does not parse"):
        load_json(tmp_path / "m.json")


def test_read_json_lets_an_error_that_is_no_damage_propagate(tmp_path):
    (tmp_path / "d.json").mkdir()  # unreadable as a file: IsADirectoryError, an OSError
    with pytest.raises(IsADirectoryError):
        read_json(tmp_path / "d.json")
    (tmp_path / "t.json").write_text('{"a": ')
    with pytest.warns(UserWarning, match="ignoring the damaged cache entry .*t.json"):
        assert read_json(tmp_path / "t.json") is None


def test_exclusive_refuses_a_second_holder_naming_the_first(tmp_path):
    run = tmp_path / "run"
    assert lock_path(run) == tmp_path / "run.lock"
    with exclusive(run, "training run A"):
        record = json.loads(lock_path(run).read_text())
        assert record["pid"] == os.getpid() and record["what"] == "training run A"
        assert record["host"] == socket.gethostname() and record["started"]
        owner = rf"run.lock is held by pid {os.getpid()} .*training run A"
        with pytest.raises(Busy, match=owner), exclusive(run, "training run B"):
            pytest.fail("two holders")
        # Waiting for itself would never end: refused too.
        with pytest.raises(Busy, match="held by this process"), exclusive(run, "B", wait=True):
            pytest.fail("two holders")
    assert not lock_path(run).exists()  # removed when the block ends
    with exclusive(run, "training run B"):  # free again
        pass


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_warning(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is no longer running; it holds no flock either
    run = tmp_path / "run"
    record = {"pid": dead.pid, "host": socket.gethostname(), "what": "killed run"}
    lock_path(run).write_text(json.dumps(record))
    old_owner = rf"taking over the stale lock .*pid {dead.pid} .*killed run"
    with pytest.warns(UserWarning, match=old_owner), exclusive(run, "new run"):
        assert json.loads(lock_path(run).read_text())["pid"] == os.getpid()
    assert not lock_path(run).exists()
    lock_path(run).write_text('{"pid": 12')  # damaged, as a kill mid-write would leave it
    with pytest.warns(UserWarning, match="stale lock .*unknown process"), exclusive(run, "new"):
        assert json.loads(lock_path(run).read_text())["what"] == "new"


HOLDER = """
import sys, time
from pathlib import Path
from psnlib.locks import exclusive
with exclusive(sys.argv[1], "holding for a second"):
    print("held", flush=True)
    time.sleep(1.0)
    Path(sys.argv[2]).write_text("done")
"""


def test_exclusive_with_wait_waits_for_the_owner_to_finish(tmp_path):
    run, done = tmp_path / "run", tmp_path / "done"
    env = {**os.environ, "PYTHONPATH": ":".join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run), str(done)], env=env, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        owner = f"pid {holder.pid} .*holding for a second"
        with pytest.raises(Busy, match=f"held by {owner}"), exclusive(run, "impatient"):
            pytest.fail("two holders")
        waiting = pytest.warns(UserWarning, match=f"waiting for {owner}")
        with waiting, exclusive(run, "patient", wait=True, poll=0.05):
            assert done.read_text() == "done"  # the owner's block had finished
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0


def test_a_saved_policy_is_readable_by_others_as_the_umask_allows(tmp_path):
    """safetensors writes model.safetensors 0600; a saved policy (a shared cache's, a committed
    one) gives it the mode of every other file psnlib writes: 0644 under umask 0022 (issue 50,
    item 9), and 0640 under 0027."""
    from psnlib.models import build_tokenizer, save_policy, tiny_policy

    tokenizer = build_tokenizer()
    model = tiny_policy(tokenizer=tokenizer)
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        old = os.umask(umask)
        try:
            path = save_policy(model, tokenizer, tmp_path / f"policy-{umask:o}")
        finally:
            os.umask(old)
        modes = {f.name: f.stat().st_mode & 0o777 for f in path.iterdir()}
        assert modes["model.safetensors"] == mode, modes
        assert set(modes.values()) == {mode}, modes
