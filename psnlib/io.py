"""Where data lives, and atomic writes (temp file or directory, then rename)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class Damaged(ValueError):
    """Proof that a cache entry's files are damaged: a file missing, truncated or unparsable, or
    content of the wrong shape. Only this makes ``load_cached`` remove an entry."""


class Busy(RuntimeError):
    """Another live process holds the lock of a directory (``exclusive``)."""


ROOT = Path(__file__).resolve().parent.parent  # the checkout, when psnlib runs from one
_REPO_DATA = ROOT / "data"


def data_dir() -> Path:
    """Root for caches and results: ``$PSNLIB_DATA``, else the checkout's ``data/``.

    Outside a checkout (a wheel install) it falls back to ``~/.cache/psnlib``.
    """
    env = os.environ.get("PSNLIB_DATA")
    if env:
        return Path(env)
    if (_REPO_DATA.parent / "pyproject.toml").exists():
        return _REPO_DATA
    return Path.home() / ".cache" / "psnlib"


def read_json(path: str | os.PathLike, what: str = "cache entry") -> Any | None:
    """The JSON in ``path``; None if the file is missing, or damaged (truncated by a kill, say),
    with a warning that names the file: a damaged cache entry is recomputed, never fatal. An
    error reading the file (a permission, a full file table, EIO) is no proof of damage: it
    propagates."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"ignoring the damaged {what} {path}: {err}", stacklevel=2)
        return None


def load_json(path: str | os.PathLike) -> Any:
    """The JSON in a cache entry's file; ``Damaged`` (naming the file) if it is missing or does
    not parse. Any other ``OSError`` propagates: it is no proof of damage."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as err:
        raise Damaged(f"{path} is missing") from err
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Damaged(f"{path} does not parse: {err}") from err


def load_cached(path: str | os.PathLike, load: Callable[[Path], T], what: str) -> T | None:
    """``load(path)`` of a cache entry (a directory), or None if ``load`` raised ``Damaged``:
    then the entry is removed, with a warning naming it, so that the caller recomputes it. Any
    other error (a memory shortage, a full file table, a permission) propagates and removes
    nothing: only proof of damage may delete finished work."""
    path = Path(path)
    try:
        return load(path)
    except Damaged as err:
        warnings.warn(f"removing the damaged {what} {path} ({err}); recomputing it", stacklevel=2)
        shutil.rmtree(path, ignore_errors=True)
        return None


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


def _lock_file(lock: Path) -> int | None:
    """A descriptor of ``lock`` flocked by this process, or None while another process holds it."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, current = os.fstat(fd), os.stat(lock)
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


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """``path`` if it is a directory this process can write in, or one it can make; else a
    ValueError naming it. Checked by creating (and removing) a temporary file in it, or in its
    nearest existing parent: nothing is left behind."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(
            f"{what} {str(path)!r} cannot be made: {str(existing)!r} is a file; pass a writable "
            "directory"
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise ValueError(
            f"{what} {str(path)!r}: cannot write in {str(existing)!r} ({err.strerror}); pass a "
            "writable directory"
        ) from err
    return path


def check_data_dir() -> Path:
    """The data directory (``data_dir``: caches, runs, results) if it can be written,
    else a ValueError naming it: before any work, which would otherwise be lost."""
    what = "PSNLIB_DATA" if os.environ.get("PSNLIB_DATA") else "the data directory"
    return check_writable(data_dir(), what)


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
    block ends."""
    lock = lock_path(directory)
    check_writable(lock.parent, "the directory of")  # before any work, which would be lost
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(lock, what, wait, poll)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # before the flock goes: a waiter then finds a new file
        os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """JSON version of :func:`atomic_write_text` (sorted keys, indented, trailing newline)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@contextmanager
def atomic_directory(path: str | os.PathLike):
    """Yield a temp directory that becomes ``path`` only if the block finishes without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_save(path: str | os.PathLike, save: Callable[[Path], None]) -> Path:
    """Run ``save(tmp_dir)`` and move the result to ``path`` atomically."""
    with atomic_directory(path) as tmp:
        save(tmp)
    return Path(path)
