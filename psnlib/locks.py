"""The lock of a directory: ``exclusive`` runs a block as the only process working on it.

The lock is the file ``<directory>.lock`` beside it (``lock_path``), held with ``flock`` and
holding its owner's record (pid, host, start time, what it does, command line), which names the
owner when the lock is busy (``Busy``); the kernel releases it when its process dies, and a lock
file a killed owner left is taken over with a warning. A lock file that is a symbolic link is
refused (``psnlib.io.WriteFailed``), never followed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from psnlib.io import WriteFailed, _failed, _refuse_link
from psnlib.paths import check_writable


class Busy(RuntimeError):
    """Another live process holds the lock of a directory (``exclusive``)."""


def lock_path(directory: str | os.PathLike) -> Path:
    """The lock file of ``directory`` (``exclusive``): ``<directory>.lock``, beside it, so that
    the directory itself can be replaced atomically while the lock is held."""
    directory = Path(os.path.abspath(directory))
    return directory.with_name(directory.name + ".lock")


def _owner(record: Any) -> str:
    """Who a lock file's record says holds it."""
    if not isinstance(record, dict):
        return "an unknown process (its record is unreadable)"
    return (
        f"pid {record.get('pid')} on {record.get('host')} ({record.get('what')}; since "
        f"{record.get('started')}; command: {record.get('command')})"
    )


def _record(raw: bytes) -> Any:
    """A lock file's record, or None where it is empty or damaged."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _open_lock(lock: Path) -> int:
    """A descriptor of the lock file ``lock``, made if missing with the mode ``open`` gives a new
    file (0666 less the umask), so that a group sharing the directory can take it too.
    ``WriteFailed`` naming it if it is a symbolic link (never followed: its target would be
    overwritten), is not a regular file, or cannot be opened for writing."""
    _refuse_link(lock, "the lock file", "remove the link")
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(lock, flags, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:  # made a link since the check above
            _refuse_link(lock, "the lock file", "remove the link")
        raise _failed(lock, err) from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WriteFailed(
            errno.EEXIST,
            f"cannot use the lock file {lock}: it is not a regular file; remove it and run again",
            str(lock),
        )
    return fd


def _lock_file(lock: Path) -> int | None:
    """A descriptor of ``lock`` flocked by this process, or None while another process holds it."""
    while True:
        fd = _open_lock(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, current = os.fstat(fd), os.lstat(lock)
        except BlockingIOError:
            os.close(fd)
            return None
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
            return fd
        os.close(fd)  # its owner removed it before releasing it: lock the file now there


def _acquire(lock: Path, what: str, wait: bool, poll: float) -> int:
    """A descriptor of ``lock``, flocked by this process and holding its record."""
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    waiting = False
    while (fd := _lock_file(lock)) is None:
        try:
            record = _record(lock.read_bytes())
        except FileNotFoundError:  # released just now
            continue
        owner = _owner(record)
        if not wait:
            raise Busy(f"{lock} is held by {owner}")
        if isinstance(record, dict) and {k: record.get(k) for k in me} == me:
            raise Busy(f"{lock} is held by this process, {owner}: waiting would never end")
        if not waiting:
            warnings.warn(f"waiting for {owner}, which holds {lock}", stacklevel=4)
            waiting = True
        time.sleep(poll)
    left = os.pread(fd, os.fstat(fd).st_size, 0)
    if left:  # a live owner keeps its flock until it has removed the file
        warnings.warn(
            f"taking over the stale lock {lock}: its owner, {_owner(_record(left))}, no longer "
            "holds it",
            stacklevel=4,
        )
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record = {**me, "started": started, "what": what, "command": " ".join(sys.argv)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    return fd


@contextmanager
def exclusive(
    directory: str | os.PathLike, what: str, wait: bool = False, poll: float = 0.5
) -> Iterator[None]:
    """Run the block as the only process working on ``directory``.

    The lock is ``<directory>.lock`` (``lock_path``), held with ``flock``: the kernel releases it
    when its process dies, so a killed owner never blocks anyone (a reused pid cannot either).
    It holds the owner's record, JSON with its pid, host, start time, ``what`` it does and its
    command line, which names the owner when the lock is busy: ``Busy`` if ``wait`` is False,
    else a warning, then a poll every ``poll`` seconds until it is free. A lock file left by a
    killed owner is taken over with a warning naming that owner. The file is removed when the
    block ends. A lock file that is a symbolic link is refused (``WriteFailed``), never followed:
    its target would be overwritten."""
    lock = lock_path(directory)
    check_writable(lock.parent, "the directory of")  # before any work, which would be lost
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(lock, what, wait, poll)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # before the flock goes: a waiter then finds a new file
        os.close(fd)
