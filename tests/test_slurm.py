"""``--executor slurm`` (``psnlib.replication.compute.slurm``) on a real single-node Slurm started
here.

The ``cluster`` fixture writes a slurm.conf of its own in a temporary directory, starts munged
(its own key and socket), slurmctld and slurmd on it, waits until ``sinfo`` shows the node idle,
and at teardown stops exactly those three daemons, by the pids they wrote. It needs Debian's
``slurm-wlm`` and ``munge`` packages, root and submitit: without them the Slurm tests skip with
the reason, except under ``CI=true`` (``.ci/run`` installs them), where they fail. Four tasks of
the smoke plan, a few seconds each, make the array; the bad-input tests need no cluster.
"""

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import torch

from psnlib.cache import read_json
from psnlib.replication import reproduce
from psnlib.replication.compute import jobs, pool, slurm, slurm_settings
from psnlib.replication.plan import schedule
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger

SMOKE = get_profile("smoke")
DAEMONS = ("slurmctld", "slurmd", "munged")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI installs them: .ci/run)")
    pytest.skip(f"{reason}: apt-get install slurm-wlm munge; pip install -e '.[slurm]'; as root")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(folder: Path, munge_socket: Path) -> str:
    memory = int(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 * 0.8)  # MB
    return f"""ClusterName=psnlibtest
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd.log"}
NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def _stop(pids: dict[str, int]) -> None:
    """Stop the daemons this fixture started, by pid, and wait until each has exited."""
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 20
    for pid in pids.values():
        while time.monotonic() < end:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Path]:
    """A single-node Slurm of this machine's CPUs, one partition ``debug``; yields slurm.conf."""
    missing = [name for name in (*DAEMONS, "mungekey", "sbatch", "sinfo") if not shutil.which(name)]
    if missing:
        _unavailable(f"Slurm or munge is not installed (missing {missing})")
    if os.geteuid() != 0:
        _unavailable("starting slurmctld and slurmd on a config of our own needs root")
    if importlib.util.find_spec("submitit") is None:
        _unavailable("submitit is not installed")
    folder = tmp_path_factory.mktemp("slurm")
    folder.chmod(0o755)
    for sub in ("munge", "state", "spool"):
        (folder / sub).mkdir(mode=0o700)
    key, sock = folder / "munge" / "munge.key", folder / "munge" / "munge.socket"
    conf = folder / "slurm.conf"
    conf.write_text(_slurm_conf(folder, sock))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)  # the clients (sbatch, squeue, scancel, sinfo)
    pid_files = {
        "munged": folder / "munge" / "munged.pid",
        "slurmctld": folder / "slurmctld.pid",
        "slurmd": folder / "slurmd.pid",
    }
    pids: dict[str, int] = {}
    try:
        subprocess.run(["mungekey", "-c", "-f", "-k", str(key)], check=True)
        munge = [f"--socket={sock}", f"--key-file={key}", f"--pid-file={pid_files['munged']}"]
        munge += [f"--log-file={folder / 'munged.log'}", f"--seed-file={folder / 'munge/seed'}"]
        for name, command in (
            ("munged", ["munged", "-f", *munge]),
            ("slurmctld", ["slurmctld", "-f", str(conf), "-i"]),
            ("slurmd", ["slurmd", "-f", str(conf), "-N", "localhost"]),
        ):
            subprocess.run(command, check=True, capture_output=True)
            for _ in range(100):  # each daemon forks; its pid file names the daemon
                if pid_files[name].exists() and pid_files[name].read_text().strip():
                    break
                time.sleep(0.05)
            pids[name] = int(pid_files[name].read_text())
        for _ in range(120):
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
            if out.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the node never became idle: {out.stdout} {out.stderr}")
        yield conf
    finally:
        _stop(pids)
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Iterator[Path]:
    """A data directory with the smoke plan's starting points built and nothing trained."""
    folder = tmp_path_factory.mktemp("data")
    before = os.environ.get("PSNLIB_DATA")
    os.environ["PSNLIB_DATA"] = str(folder)
    try:
        pool.starting(SMOKE, 1)
    finally:
        if before is None:
            os.environ.pop("PSNLIB_DATA", None)
        else:
            os.environ["PSNLIB_DATA"] = before
    yield folder


@pytest.fixture
def data(built, tmp_path, monkeypatch) -> Path:
    """A copy of ``built`` of this test's own: no task finds another's trained run cached."""
    folder = tmp_path / "data"
    shutil.copytree(built, folder)
    monkeypatch.setenv("PSNLIB_DATA", str(folder))
    return folder


def _keys() -> list[str]:
    """Four quick tasks of the smoke plan (PSN, released PSN, PSN adaptive II, weak prefix)."""
    plan = schedule.tasks(SMOKE)
    return [task.key(SMOKE) for task in plan[2:4] + plan[7:9]]


@pytest.fixture(scope="module")
def reference(built, tmp_path_factory) -> dict[str, dict]:
    """The four tasks' records as the local executor makes them, on one torch thread, in a data
    directory of their own."""
    names = ("PSNLIB_DATA", ledger.RESULTS_ENV)
    saved, threads = {name: os.environ.get(name) for name in names}, torch.get_num_threads()
    os.environ[ledger.RESULTS_ENV] = str(tmp_path_factory.mktemp("local_results"))
    os.environ["PSNLIB_DATA"] = str(tmp_path_factory.mktemp("local") / "data")
    shutil.copytree(built, os.environ["PSNLIB_DATA"])
    torch.set_num_threads(1)
    try:
        wanted = set(_keys())
        return {
            t.key(SMOKE): jobs.run_task(SMOKE, t)
            for t in schedule.tasks(SMOKE)
            if t.key(SMOKE) in wanted
        }
    finally:
        torch.set_num_threads(threads)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _same(record: dict, expected: dict) -> None:
    """Run key, weights, training log and benchmark tables (less their wall and CPU times)."""
    assert record["key"] == expected["key"]
    assert record["weights"] == expected["weights"]
    timing = [c for c in expected["log"]["columns"] if "time" in c or "per_second" in c]
    log, wanted = (ledger.json_table(r["log"]).drop(columns=timing) for r in (record, expected))
    pd.testing.assert_frame_equal(log, wanted, check_like=True)
    assert record["benchmarks"].keys() == expected["benchmarks"].keys()
    for benchmark, tables in expected["benchmarks"].items():
        for name, table in tables.items():
            made = ledger.json_table(record["benchmarks"][benchmark][name])
            wanted = ledger.json_table(table)
            timing = [c for c in wanted.columns if c == "seconds"]  # wall time
            pd.testing.assert_frame_equal(made.drop(columns=timing), wanted.drop(columns=timing))


def _main(out: Path, *flags: str) -> int:
    return reproduce.main(
        ["--profile", "smoke", "--out", str(out), "--workers", "1", "--executor", "slurm", *flags]
    )


def _record(out: Path, key: str) -> dict | None:
    path = out / "results" / "smoke" / f"{key}.json"
    return ledger.load(path) if path.exists() else None


@pytest.mark.slurm
def test_a_job_array_writes_the_records_the_local_executor_writes(
    cluster, data, reference, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(slurm, "POLL", 0.5)
    keys = _keys()
    assert _main(tmp_path, "--runs", *keys, "--time", "10") == 0
    out = capsys.readouterr().out
    assert "submitted job array" in out and "4 done, 0 failed, 0 running, 0 pending" in out
    for key in keys:
        _same(_record(tmp_path, key), reference[key])
    # Everything done: a second invocation submits nothing, --status shows the array's jobs.
    assert _main(tmp_path, "--runs", *keys) == 0
    assert "nothing to submit" in capsys.readouterr().out
    assert _main(tmp_path, "--status") == 0
    assert "4 done, 0 failed" in capsys.readouterr().out


@pytest.mark.slurm
def test_a_cancelled_task_is_the_only_one_resubmitted(
    cluster, data, reference, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(slurm, "POLL", 0.5)
    keys = _keys()[:3]
    assert _main(tmp_path, "--runs", *keys, "--array-parallelism", "1", "--no-wait") == 0
    state = read_json(tmp_path / "runs" / "smoke" / slurm.STATE_FILE)
    # A second invocation while the array runs reports it and submits nothing.
    assert _main(tmp_path, "--runs", *keys, "--no-wait") == 0
    assert "still queued: not submitting again" in capsys.readouterr().out
    assert read_json(tmp_path / "runs" / "smoke" / slurm.STATE_FILE) == state
    for _ in range(600):  # cancel the second task as soon as it runs (Python is still starting)
        if slurm._queue(state["array"]).get(state["jobs"][1]) == "RUNNING":
            break
        time.sleep(0.05)
    subprocess.run(["scancel", f"{state['array']}_1"], check=True)
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))  # main restored it
    table = slurm.wait(SMOKE, state, poll=0.5)
    assert list(table["state"]) == ["done", "failed", "done"]
    assert "CANCELLED" in table["error"].iloc[1] or "empty log" in table["error"].iloc[1]
    assert _record(tmp_path, keys[1]) is None
    capsys.readouterr()
    assert _main(tmp_path, "--runs", *keys) == 0
    again = read_json(tmp_path / "runs" / "smoke" / slurm.STATE_FILE)
    assert again["array"] != state["array"] and again["keys"] == [keys[1]]
    for key in keys:
        _same(_record(tmp_path, key), reference[key])


@pytest.mark.slurm
def test_a_failed_task_names_its_job_and_log_and_the_others_finish(
    cluster, data, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(ledger.RESULTS_ENV, str(tmp_path / "results"))
    keys = [_keys()[1], "psn-s0-notinthisplan"]  # a plan changed since it was submitted
    chosen = slurm_settings.options(SMOKE, time=10)
    state = slurm.submit(SMOKE, chosen, keys, tmp_path / "runs")
    table = slurm.wait(SMOKE, state, poll=0.5).set_index("run")
    assert table.loc[keys[0], "state"] == "done"
    failed = table.loc[keys[1]]
    assert failed["state"] == "failed" and failed["job"] == f"{state['array']}_1"
    assert Path(failed["log"]).exists()
    assert "is not a task of profile 'smoke'" in failed["error"]
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith(f"[psnlib]   FAILED {keys[1]}: job {state['array']}_1, log ")
    assert "ValueError" in line


@pytest.mark.slurm
def test_an_unknown_partition_is_one_line_before_anything_is_submitted(cluster, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        _main(tmp_path, "--partition", "gpu-a100")
    assert str(exit_.value) == (
        "psnlib.replication.reproduce: error: --partition 'gpu-a100' is not a partition of this "
        "cluster; sinfo lists ['debug']"
    )
    assert not (tmp_path / "runs" / "smoke" / slurm.STATE_FILE).exists()


def test_without_sbatch_or_submitit_it_is_one_line_before_anything_is_submitted(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    with pytest.raises(SystemExit) as exit_:
        _main(tmp_path)
    assert str(exit_.value).endswith("needs Slurm's 'sbatch', not found on PATH")
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(SystemExit) as exit_:
        _main(tmp_path)
    assert str(exit_.value).endswith("submitit, which is not installed: pip install -e '.[slurm]'")
    assert not (tmp_path / "runs" / "smoke" / slurm.STATE_FILE).exists()


def test_a_time_limit_shorter_than_a_tasks_measured_cost_is_refused():
    table = pd.DataFrame([{"policy": "GRPO", "seed": 0, "run": "grpo-s0-abc", "estimate": 4000.0}])
    with pytest.raises(ValueError, match=r"--time 60 min is shorter than .* about 67 min"):
        slurm_settings.check_time(slurm_settings.options(SMOKE, time=60), table)
    slurm_settings.check_time(slurm_settings.options(SMOKE, time=67), table)


def test_settings_come_from_the_profile_then_the_file_then_the_flags(tmp_path):
    assert slurm_settings.options(get_profile("cpu")).cpus_per_task == 1
    paper = slurm_settings.options(get_profile("paper"))
    assert paper.gpus_per_task == 8  # configs/accelerate/multi_gpu.yaml's processes
    config = tmp_path / "slurm.yaml"
    config.write_text("partition: cpu\ntime: 90\narray_parallelism: 32\n")
    chosen = slurm_settings.options(SMOKE, config, time=120)
    assert (chosen.partition, chosen.time, chosen.array_parallelism) == ("cpu", 120, 32)
    config.write_text("partitoin: cpu\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['partitoin'\]"):
        slurm_settings.options(SMOKE, config)
    with pytest.raises(ValueError, match="slurm time must be an integer >= 1, got 0"):
        slurm_settings.options(SMOKE, time=0)


def test_the_local_executor_takes_no_slurm_only_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(["--profile", "smoke", "--out", str(tmp_path), "--no-wait"])
    assert str(exit_.value).endswith("--runs and --no-wait need --executor slurm")


# ------------------------------------------------------------ issue 50: no cluster needed

HOSTILE = "it's $(touch PWNED) `touch PWNED2` $HOME  two spaces"


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """Slurm's commands as scripts, alone on PATH (a Slurm installed here is not seen):
    ``sbatch`` keeps the job script it is given in ``<folder>/script.sh`` and answers as sbatch
    does; the queue is empty. Returns the folder."""
    if importlib.util.find_spec("submitit") is None:
        _unavailable("submitit is not installed")
    folder = tmp_path / "bin"
    folder.mkdir()
    scripts = {
        "sbatch": f'/bin/cp "$1" {folder}/script.sh\necho "Submitted batch job 4242"',
        "srun": "exit 0",
        "squeue": "exit 0",
        "sinfo": "echo debug",
    }
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_the_job_script_exports_a_hostile_path_as_it_is_and_runs_nothing(
    fake_slurm, tmp_path, monkeypatch
):
    """``export PSNLIB_DATA={value!r}`` switched to double quotes for a path holding ``'``, in
    which the node's shell ran ``$(...)`` and backticks. The setup lines of the script the
    executor writes, run in bash, must export the exact paths and make no file."""
    data, results = tmp_path / "data" / HOSTILE, tmp_path / "ledger" / HOSTILE
    monkeypatch.setenv("PSNLIB_DATA", str(data))
    monkeypatch.setenv(ledger.RESULTS_ENV, str(results))
    keys = _keys()[:2]
    state = slurm.submit(SMOKE, slurm_settings.options(SMOKE), keys, tmp_path / "runs")
    assert state["array"] == "4242" and state["keys"] == keys
    script = (fake_slurm / "script.sh").read_text().split("# setup\n", 1)[1]
    setup = script.split("\n\n", 1)[0]
    assert setup.count("\n") == 1 and setup.startswith("export PSNLIB_DATA="), setup
    node = tmp_path / "node"
    node.mkdir()
    shown = subprocess.run(
        ["/bin/bash", "-c", f'{setup}\nprintf "%s\\0" "$PSNLIB_DATA" "$PSNLIB_RESULTS"'],
        cwd=node,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.split("\0")[:2] == [str(data), str(results)]
    assert list(node.iterdir()) == [] and shown.stderr == ""


def _refused(capsys, out: Path, *flags: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        _main(out, *flags)
    text = exit_.value.code
    assert isinstance(text, str) and "\n" not in text, text
    assert text.startswith("psnlib.replication.reproduce: error: "), text
    return text


def test_no_srun_on_path_is_one_line_before_anything_is_built(
    fake_slurm, tmp_path, monkeypatch, capsys
):
    """submitit's job script runs each task with srun; without it, submitit's RuntimeError
    ('Could not detect "srun"') came after the starting points were built."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(reproduce, "starting", lambda *args: pytest.fail("built"))
    (fake_slurm / "srun").unlink()
    text = _refused(capsys, tmp_path / "out")
    assert text.endswith("--executor slurm needs Slurm's 'srun', not found on PATH"), text


def test_a_job_array_sbatch_refuses_is_one_line_with_its_reason(
    fake_slurm, tmp_path, monkeypatch, capsys
):
    """It was submitit's FailedJobError traceback (and sbatch's words printed on stderr)."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(reproduce, "starting", lambda *args: None)  # built already
    reason = "sbatch: error: Batch job submission failed: Invalid account or partition"
    (fake_slurm / "sbatch").write_text(f"#!/bin/sh\necho '{reason}' >&2\nexit 1\n")
    text = _refused(capsys, tmp_path / "out", "--runs", *_keys()[:2])
    assert text.endswith(f"sbatch refused the job array of 2 task(s): {reason}"), text
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "out" / "runs" / "smoke" / slurm.STATE_FILE).exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"keys": []}', "no array, jobs, logs, submitted"),
        ("[1, 2]", "not a JSON object"),
        ('{"array": "12", "keys": ["a"], "jobs": [], "logs": [], "submitted": ""}', "one length"),
        ("{", "does not parse"),
    ],
)
def test_a_damaged_state_file_is_named_by_a_sitting_and_by_status(
    content, why, fake_slurm, tmp_path, monkeypatch, capsys
):
    """A ``slurm.json`` without ``array`` was a KeyError traceback, at --status too."""
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(reproduce, "starting", lambda *args: pytest.fail("built"))
    path = tmp_path / "out" / "runs" / "smoke" / slurm.STATE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(content)
    text = _refused(capsys, tmp_path / "out")
    assert f"the Slurm state {path} is damaged (" in text and why in text, text
    assert "once squeue shows none of its jobs (squeue --me), remove it and run again" in text
    capsys.readouterr()
    assert _main(tmp_path / "out", "--status") == 0
    shown = capsys.readouterr().out.splitlines()[-1]
    assert shown.startswith(f"[psnlib] slurm: the Slurm state {path} is damaged ("), shown


@pytest.mark.parametrize(
    ("config", "given", "message"),
    [
        ("time: true", {}, "slurm time must be an integer >= 1, got True"),
        ("cpus_per_task: true", {}, "slurm cpus_per_task must be an integer >= 1, got True"),
        ("gpus_per_task: false", {}, "slurm gpus_per_task must be an integer >= 0, got False"),
        ("mem_gb: true", {}, "slurm mem_gb must be a finite number of GB > 0, got True"),
        ("", {"mem_gb": float("inf")}, "slurm mem_gb must be a finite number of GB > 0, got inf"),
        ("", {"mem_gb": float("nan")}, "slurm mem_gb must be a finite number of GB > 0, got nan"),
        ("partition: true", {}, "slurm partition must be a partition's name, got True"),
        ("partition: ''", {}, "slurm partition must be a partition's name, got ''"),
    ],
)
def test_a_slurm_setting_of_the_wrong_type_is_refused(config, given, message, tmp_path):
    """``time: true`` passed as an integer and was submitted as a bare ``#SBATCH --time``;
    ``--mem-gb inf`` ended in OverflowError."""
    path = tmp_path / "slurm.yaml"
    path.write_text(config)
    with pytest.raises(ValueError) as error:
        slurm_settings.options(SMOKE, path, **given)
    assert str(error.value) == message


def test_the_memory_asked_for_is_rounded_up_to_a_whole_mb():
    """A tenth of a MB was ``0MB``, which sbatch reads as all the node's memory."""
    assert slurm_settings.options(SMOKE, mem_gb=1e-4).mem == "1MB"
    assert slurm_settings.options(SMOKE, mem_gb=4.0).mem == "4096MB"
