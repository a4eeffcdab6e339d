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

Issue 50 (the tests at the end, each seen failing on the code before its fix): the ledger is
``<--out>/results``, else ``$PSNLIB_RESULTS`` (it ignored the variable), checked before the first
task (every task was computed, then refused at the write), a failed task is one line with its run
key and the reason first; ``--until ''`` is refused, ``--budget`` with ``--until`` ends at the
earlier; ``--executor slurm --only`` is refused; a file where the figures go is one line.
"""

import datetime
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from psnlib.replication import reproduce
from psnlib.replication.compute import jobs, pool
from psnlib.replication.plan import schedule
from psnlib.replication.records import ledger
from psnlib.replication.report import notebook_runs


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

from psnlib.replication.compute import pool as local
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


# ------------------------------------------------------------ issue 50: a sitting loses no work


def test_the_ledger_is_out_results_else_psnlib_results_and_help_says_so(
    tmp_path, monkeypatch, capsys
):
    """One rule (``reproduce.LEDGER``): ``<--out>/results`` where ``--out`` is given, else
    ``$PSNLIB_RESULTS``; it reported every task missing, reading the checkout's ``results/``."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    shared = tmp_path / "shared ledger"
    monkeypatch.setenv(ledger.RESULTS_ENV, str(shared))
    assert reproduce.main(["--profile", "smoke", "--status"]) == 0
    assert f"records in {shared / 'smoke'}\n" in capsys.readouterr().out
    assert reproduce.main(["--profile", "smoke", "--status", "--out", str(tmp_path / "out")]) == 0
    assert f"records in {tmp_path / 'out' / 'results' / 'smoke'}\n" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        reproduce.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "else $PSNLIB_RESULTS where that is set" in shown
    assert "with --budget, the earlier limit" in shown


def _record_path(out: Path) -> Path:
    smoke = reproduce.get_profile("smoke")
    return out / "results" / "smoke" / f"{schedule.tasks(smoke)[3].key(smoke)}.json"


def _folder_a_file(out: Path) -> str:
    (out / "results").mkdir(parents=True)
    (out / "results" / "smoke").write_text("")
    return r"the run ledger's folder '.*/results/smoke' cannot be made: .* is a file"


def _record_a_directory(out: Path) -> str:
    _record_path(out).mkdir(parents=True)
    return r"the record .*\.json is not a file, and a task's record is written there .* remove it"


def _record_a_link(out: Path) -> str:
    _record_path(out).parent.mkdir(parents=True)
    _record_path(out).symlink_to(out / "elsewhere.json")
    return r"the record .*\.json is a symbolic link, .* remove it and run again"


@pytest.mark.parametrize("damage", [_folder_a_file, _record_a_directory, _record_a_link])
def test_a_ledger_that_cannot_take_a_record_is_refused_before_the_first_task(
    damage, no_work, monkeypatch, capsys
):
    """Every task was trained and evaluated, then refused at the write (~250 CPU s each)."""
    monkeypatch.setattr(reproduce, "starting", did_work)
    out = no_work / "out"
    message = damage(out)
    text = refused(["--profile", "smoke", "--out", str(out), "--workers", "1"], capsys)
    assert re.search(message, text), text


def test_a_failed_task_is_named_by_its_run_key_with_the_reason_first(monkeypatch, capsys):
    """It was ``FAILED (Profile(name='smoke', ...), Task(...)): PermissionError(...)``, about
    2,000 characters with the reason at the end."""
    smoke = reproduce.get_profile("smoke")
    task = schedule.tasks(smoke)[1]

    def refuse(profile, task):
        raise PermissionError(13, "Permission denied", "results/smoke/x.json")

    monkeypatch.setattr(jobs, "run_task", refuse)
    failed = pool.run_all("runs", [(pool._task, smoke, task)], workers=1, keep_going=True)
    name = f"{task.key(smoke)} ({task.variant.label} seed {task.seed})"
    assert failed == [name]
    lines = [line for line in capsys.readouterr().out.splitlines() if "FAILED" in line]
    assert lines == [
        f"[psnlib]   1/1 FAILED {name}: PermissionError: [Errno 13] Permission denied: "
        "'results/smoke/x.json'"
    ]


@pytest.mark.parametrize("flag", ["--until", "--out"])
def test_an_empty_until_or_out_is_refused_not_taken_for_a_default(flag, no_work, capsys):
    """``--until $UNTIL`` with ``UNTIL`` unset ran with no limit (``--out ''``: in the current
    directory)."""
    argv = ["--profile", "smoke", "--out", str(no_work / "out"), flag, ""]
    assert f"{flag} is empty (an unset variable" in refused(argv, capsys)


class Started(Exception):
    """The prepare stage was reached, with the deadline it was given."""


@pytest.mark.parametrize(("budget", "left"), [(60, 60), (10**6, 2 * 3600)])
def test_budget_and_until_together_end_at_the_earlier(budget, left, tmp_path, monkeypatch):
    """``--budget`` beside ``--until`` was silently dropped."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))

    def prepare(settings, workers, record, deadline):
        raise Started(deadline - time.monotonic())

    monkeypatch.setattr(reproduce, "prepare", prepare)
    later = (datetime.datetime.now() + datetime.timedelta(hours=2, minutes=1)).strftime("%H:%M")
    argv = ["--profile", "smoke", "--out", str(tmp_path), "--budget", str(budget)]
    with pytest.raises(Started) as started:
        reproduce.main([*argv, "--until", later, "--workers", "1"])
    assert left - 120 < started.value.args[0] <= left + 60  # --until: to the minute


def test_only_with_the_slurm_executor_is_refused(no_work, capsys):
    """It ran the notebook here and submitted nothing, saying neither."""
    argv = ["--profile", "smoke", "--out", str(no_work / "out"), "--executor", "slurm"]
    text = refused([*argv, "--only", "00_quick"], capsys)
    assert "--only runs notebooks here and computes no task, while --executor slurm" in text


def test_a_file_where_the_figures_go_is_one_line(no_work, capsys):
    """``reproduce`` ended in FileExistsError, a notebook's ``notebook_outputs`` too."""
    figures = no_work / "out" / "figures" / "smoke"
    figures.parent.mkdir(parents=True)
    figures.write_text("")
    argv = ["--profile", "smoke", "--out", str(no_work / "out"), "--only", "00_quick"]
    text = refused(argv, capsys)
    assert re.search(r"the figures folder '.*/figures/smoke' cannot be made: .* is a file", text)
    with pytest.raises(ValueError, match=r"figures_dir '.*/figures/smoke' cannot be made: .* file"):
        notebook_runs.notebook_outputs("smoke", figures)
