"""``python -m psnlib.replication.reproduce`` under faults (issue 39): a relative ``PSNLIB_DATA``
is resolved once, at the entry point; its workers die with it, even killed with SIGKILL; a
command line it cannot act on (``--only`` with no word, a budget that is not a positive number of
seconds, an ``--until`` that is not HH:MM) is one line naming the value, before any work.

What these tests saw on the code before the fixes (each checked on a copy of ``reproduce.py``
without the fix; ``orphans`` takes the pool to test, so the worker test ran the same way with a
plain ``ProcessPoolExecutor(2, mp_context=get_context("spawn"))``):

- without the resolution in ``main`` the fake notebook saw ``PSNLIB_DATA='rel/data'``, a path a
  kernel running in ``notebooks/`` reads as ``notebooks/rel/data``, and the session's
  ``PSNLIB_RESULTS``, not ``<out>/results``;
- without the ``_die_with_parent`` initializer both workers outlived their SIGKILLed parent,
  still sleeping 10 s later (reparented, each about to run out its 60 s);
- without the checks ``--only`` with no word ran every notebook (the prepare stage first),
  ``--budget 0`` / ``nan`` / ``-5`` went on to the work with no deadline or one already past.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from psnlib.replication import ledger, reproduce


def did_work(*args, **kwargs) -> None:
    pytest.fail("did work before refusing the bad input")


@pytest.fixture
def no_work(tmp_path, monkeypatch):
    """A fresh data directory, and the prepare stage and the notebooks fail the test if run."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(reproduce, "prepare", did_work)
    monkeypatch.setattr(reproduce, "run_notebook", did_work)
    return tmp_path


# ------------------------------------------------------------ paths resolved at the entry point


@pytest.mark.parametrize("out", ["absolute", "relative"])
def test_a_relative_data_directory_reaches_the_notebooks_absolute_and_is_restored(
    tmp_path, monkeypatch, out
):
    """The notebooks run in ``notebooks/`` (papermill's cwd), where ``rel/data`` would be another
    folder: ``main`` hands them, and the workers, absolute paths, and puts the variables back."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PSNLIB_DATA", "rel/data")
    out_dir = tmp_path / "out" if out == "absolute" else Path("out")
    seen = []

    def fake_run(path, profile, figures_dir, runs_dir):
        seen.append({name: os.environ.get(name) for name in ("PSNLIB_DATA", ledger.RESULTS_ENV)})

    monkeypatch.setattr(reproduce, "run_notebook", fake_run)
    monkeypatch.setattr(reproduce, "prepare", did_work)
    before = dict(os.environ)
    argv = ["--profile", "smoke", "--workers", "0", "--only", "00_quick", "--out", str(out_dir)]
    assert reproduce.main(argv) == 0
    assert len(seen) == 1, seen
    data, results = (Path(seen[0][name]) for name in ("PSNLIB_DATA", ledger.RESULTS_ENV))
    assert data.is_absolute() and data == (tmp_path / "rel" / "data").resolve()
    assert results.is_absolute() and results == (tmp_path / "out" / "results").resolve()
    assert dict(os.environ) == before  # PSNLIB_DATA relative again, PSNLIB_RESULTS the session's


# ------------------------------------------------------------ workers die with their parent

SLEEPER = '''
import os
import time
from pathlib import Path


def sleep_in_a_worker(folder):
    """Leave this worker's pid in ``folder``, then sleep: a task that outlives its parent."""
    Path(folder, str(os.getpid())).write_text("")
    time.sleep(60)
'''

PARENT = """
import os, signal, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from psnlib.replication import pool as local
import sleeper

folder = Path(sys.argv[1])
pool = {pool}
for _ in range(2):
    pool.submit(sleeper.sleep_in_a_worker, str(folder))
deadline = time.monotonic() + {start_s}
while len(list(folder.iterdir())) < 2:
    if time.monotonic() > deadline:
        sys.exit("the workers did not start")
    time.sleep(0.05)
os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no executor shutdown: as kill -9
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: its /proc entry exists and it is no zombie (one that no one has
    reaped yet is dead: a container's init may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # the state after "(comm)"


def orphans(
    tmp_path: Path, pool: str = "local.worker_pool(2)", start_s: float = 240, grace_s: float = 10
) -> list[int]:
    """Start a process that makes ``pool`` (an expression), runs a 60 s task in each of its two
    workers, then SIGKILLs itself; the pids of its workers still running ``grace_s`` after."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    script = textwrap.dedent(PARENT.format(pool=pool, start_s=start_s))
    log = tmp_path / "parent.log"  # its resource tracker's word on the semaphores it left too
    with log.open("w") as stderr:
        parent = subprocess.Popen([sys.executable, "-c", script, str(pids)], env=env, stderr=stderr)
    workers: list[int] = []
    try:
        try:
            rc = parent.wait(timeout=start_s + 60)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait()
            pytest.fail(f"the parent neither started its workers nor gave up: {log.read_text()}")
        workers = [int(p.name) for p in pids.iterdir()]
        assert rc == -signal.SIGKILL and len(workers) == 2, (rc, workers, log.read_text())
        deadline = time.monotonic() + grace_s
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [pid for pid in workers if alive(pid)]
    finally:
        for pid in workers:  # this test's own workers, if any outlived it
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux' own")
def test_workers_die_when_their_parent_is_killed(tmp_path):
    """A ``kill -9`` of ``make reproduce`` leaves no worker training on (``worker_pool``: each
    worker asks the kernel for SIGKILL when its parent dies)."""
    assert orphans(tmp_path) == []


# ------------------------------------------------------------ one line, before any work


def refused(argv: list[str], capsys) -> str:
    """The one line ``reproduce.main(argv)`` ends with; nothing printed, nothing made."""
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(argv)
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert text.startswith("psnlib.replication.reproduce: error: "), text
    assert capsys.readouterr().out == ""
    return text


@pytest.mark.parametrize("argv", [["--only"], ["--only", "--force"]], ids=["last", "then-flag"])
def test_only_with_no_word_is_refused(argv, no_work, capsys):
    out = no_work / "out"
    text = refused(["--profile", "smoke", "--out", str(out), *argv], capsys)
    assert "--only" in text and "at least one word" in text, text
    assert not out.exists() and not (no_work / "data").exists()


def test_only_alone_on_the_command_line_is_refused(no_work, capsys):
    assert "--only" in refused(["--only"], capsys)  # the defaults (profile cpu, the checkout)


@pytest.mark.parametrize(
    ("flag", "value", "shown"),
    [
        ("--budget", "0", "0.0"),
        ("--budget", "nan", "nan"),
        ("--budget", "-5", "-5.0"),
        ("--budget", "inf", "inf"),
        ("--until", "25:99", "'25:99'"),
        ("--until", "noon", "'noon'"),
        ("--until", "7", "'7'"),
        ("--until", "12:30:00", "'12:30:00'"),
    ],
)
def test_a_budget_or_deadline_that_is_no_time_is_refused(flag, value, shown, no_work, capsys):
    out = no_work / "out"
    text = refused(["--profile", "smoke", "--out", str(out), flag, value], capsys)
    assert re.search(rf"{flag} must be .*, got {re.escape(shown)}$", text), text
    assert not out.exists() and not (no_work / "data").exists()
