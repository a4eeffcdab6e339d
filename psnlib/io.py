"""Where data lives, and atomic writes (temp file or directory, then rename).

Symbolic links: psnlib follows a link to read a file or directory, and follows the links among the
directories above whatever it writes (a data directory may live on another disk behind one), but
it never writes through a link at the path it writes, nor replaces such a link: an atomic write
(``atomic_write_text``, ``atomic_write_json``, ``atomic_directory``, ``atomic_save``) whose
destination is a link, a lock file (``exclusive``) that is one, and a damaged cache entry
(``load_cached``) that is one are refused with ``WriteFailed``, naming the link; ``os.replace``
would replace the link itself and leave its target stale, and a lock opened through one would
overwrite its target.

Permissions: what psnlib writes gets the mode an ordinary ``open(path, "w")`` or ``mkdir`` gives
a new file or directory (0666 or 0777 less the umask, or as a directory's default ACL says), not
``tempfile``'s private 0600 and 0700, so that a cache shared by a group can be read by it.

Failures: an ``OSError`` of an atomic write (a full disk, a quota, a read-only file system, a
permission) becomes ``WriteFailed``, one line naming the path, the cause and what to do; no
partial or temporary file is left, and the file or directory that was there is kept.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import socket
import stat
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


class WriteFailed(OSError):
    """A file or directory psnlib writes could not be written (a full disk, a quota, a read-only
    file system, a permission), or would have been written through a symbolic link, which is
    refused. An ``OSError`` with the cause's ``errno`` and the path as ``filename``; its message
    (``strerror``, and ``str``) is one line naming the path, the cause and what to do."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


# What to do about the errors of a write.
_OTHER_THERE = "a file stands where a directory above it should be; remove it or pass another path"
_REMEDY = {
    errno.ENOSPC: "free some space on its disk and run again",
    errno.EDQUOT: "free some of your quota on its disk and run again",
    errno.EFBIG: "it is larger than the limit on a file's size (ulimit -f, or its file system's)",
    errno.EROFS: "its file system is mounted read-only; pass a path on a writable one",
    errno.EACCES: "this user may not write there; fix its permissions or pass a writable path",
    errno.EPERM: "this user may not write there; fix its permissions or pass a writable path",
    errno.EISDIR: "a directory is there; remove it or pass another path",
    errno.ENOTDIR: _OTHER_THERE,
    errno.EEXIST: _OTHER_THERE,  # from making the directories above it
}


def _failed(path: Path, err: OSError, within: Path | None = None) -> WriteFailed:
    """``err``, an error writing ``path``, as a ``WriteFailed`` naming ``path``, the cause and
    what to do; and the file it arose in, where that is in the temp directory ``within``."""
    cause = (err.strerror or str(err)).lower()
    if within is not None and err.filename is not None and _inside(err.filename, within):
        cause += f" (writing {os.path.relpath(os.fsdecode(err.filename), within)})"
    remedy = _REMEDY.get(err.errno) if err.errno is not None else None
    there = os.fsdecode(err.filename) if err.filename is not None else None
    if err.errno == errno.EEXIST and there and os.path.islink(there) and not os.path.exists(there):
        remedy = (
            f"{there} is a symbolic link to {os.readlink(there)}, which does not exist; make its "
            "target or remove the link"
        )
    message = f"cannot write {path}: {cause}" + (f"; {remedy}" if remedy else "")
    return WriteFailed(err.errno, message, str(path))


def _refuse_link(
    path: Path, what: str, remedy: str = "remove the link (or pass its target's path)"
) -> None:
    """``WriteFailed`` if ``path`` is a symbolic link: psnlib never writes through one."""
    if path.is_symlink():
        raise WriteFailed(
            errno.ELOOP,
            f"refusing to write {what} {path}: it is a symbolic link (to {os.readlink(path)}), "
            f"and psnlib never writes through one; {remedy} and run again",
            str(path),
        )


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
    with a warning that names the file: a damaged cache entry is recomputed, never fatal. It is
    read as UTF-8, whatever the locale. An error reading the file (a permission, a full file
    table, EIO) is no proof of damage: it propagates."""
    path = Path(path)
    try:
        return json.loads(path.read_bytes())  # UTF-8 (or -16, -32), whatever the locale
    except FileNotFoundError:
        return None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"ignoring the damaged {what} {path}: {err}", stacklevel=2)
        return None


def load_json(path: str | os.PathLike) -> Any:
    """The JSON in a cache entry's file; ``Damaged`` (naming the file) if it is missing, is a
    directory, or does not parse. Any other ``OSError`` propagates: it is no proof of damage."""
    path = Path(path)
    try:
        return json.loads(path.read_bytes())  # UTF-8 (or -16, -32), whatever the locale
    except (FileNotFoundError, NotADirectoryError) as err:
        raise Damaged(f"{path} is missing") from err
    except IsADirectoryError as err:
        raise Damaged(f"{path} is a directory, not a file") from err
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Damaged(f"{path} does not parse: {err}") from err


def _inside(name: str | bytes | None, directory: Path) -> bool:
    """Whether the file ``name`` (an ``OSError``'s ``filename``) is ``directory`` or in it."""
    if name is None:
        return False
    file = os.path.abspath(os.fsdecode(name))
    return os.path.commonpath([file, os.path.abspath(directory)]) == os.path.abspath(directory)


def load_cached(path: str | os.PathLike, load: Callable[[Path], T], what: str) -> T | None:
    """``load(path)`` of a cache entry (a directory), or None if it is damaged: then the entry
    is removed, with a warning naming it, so that the caller recomputes it. Damage is ``Damaged``
    raised by ``load``, a file (anything but a directory) at ``path``, or a directory where the
    entry should hold a file or the reverse (``IsADirectoryError`` or ``NotADirectoryError``
    naming a file in it): psnlib writes none of these. Any other error (a memory shortage, a
    full file table, a permission) propagates and removes nothing: only proof of damage may
    delete finished work. A damaged entry that is a symbolic link is not removed (psnlib never
    writes through one): ``WriteFailed`` names it."""
    path = Path(path)
    try:
        if os.path.lexists(path) and not path.is_dir():
            raise Damaged(f"{path} is not a directory")
        return load(path)
    except Damaged as err:
        damage = str(err)
    except (IsADirectoryError, NotADirectoryError) as err:
        if not _inside(err.filename, path):
            raise
        kind = "a directory" if isinstance(err, IsADirectoryError) else "not a directory"
        damage = f"{os.fsdecode(err.filename)} is {kind}"
    if path.is_symlink():
        raise WriteFailed(
            errno.ELOOP,
            f"refusing to remove the damaged {what} {path} ({damage}): it is a symbolic link (to "
            f"{os.readlink(path)}), and psnlib never writes through one; remove or repair it and "
            "run again",
            str(path),
        )
    warnings.warn(f"removing the damaged {what} {path} ({damage}); recomputing it", stacklevel=2)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
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


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """``path`` if it is a directory this process can write in, or one it can make; else a
    ValueError naming it. Checked by creating (and removing) a temporary file in it, or in its
    nearest existing parent: nothing is left behind."""
    path = Path(path)
    dangling = next((p for p in (path, *path.parents) if p.is_symlink() and not p.exists()), None)
    if dangling is not None:
        raise ValueError(
            f"{what} {str(path)!r} cannot be made: {str(dangling)!r} is a symbolic link to "
            f"{os.readlink(dangling)!r}, which does not exist; make its target or remove the link"
        )
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


def _temp_name(path: Path) -> Path:
    """A random hidden name ``.<name>.<8 hex digits>`` beside ``path``."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}")


def _temp_file(path: Path) -> tuple[Path, int]:
    """A new hidden file beside ``path`` (``_temp_name``) and its descriptor, open for writing.
    Made as ``open`` makes one, 0666 less the umask, which the kernel applies (no thread reads or
    changes the umask), and never through a symbolic link (``O_EXCL``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = _temp_name(path)
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue


def _temp_directory(path: Path) -> Path:
    """A new hidden directory beside ``path`` (``_temp_name``), made as ``mkdir`` makes one:
    0777 less the umask."""
    while True:
        tmp = _temp_name(path)
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue


def _check_destination(path: Path, directory: bool) -> None:
    """``WriteFailed`` unless ``path`` can be replaced by an atomic write: it must not be a
    symbolic link, nor (for a directory) a file."""
    _refuse_link(path, "the directory" if directory else "the file")
    if directory and os.path.lexists(path) and not path.is_dir():
        raise WriteFailed(
            errno.ENOTDIR,
            f"cannot write the directory {path}: a file is there; remove it (or pass another "
            "path) and run again",
            str(path),
        )


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8, whatever the locale) to ``path`` via a temp file in the same
    directory and ``os.replace``. ``WriteFailed`` (naming ``path``) if ``path`` is a symbolic
    link, or if the write fails (a full disk, say): then no temp file is left and the file that
    was there is kept."""
    path = Path(path)
    _check_destination(path, directory=False)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp, fd = _temp_file(path)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as err:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise _failed(path, err) from err
    except BaseException:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """JSON version of :func:`atomic_write_text` (sorted keys, indented, trailing newline)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


# The errors of a block of ``atomic_directory`` that are the disk's, not the block's.
_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)
LOW_SPACE = 64 * 2**20  # free bytes below which a failed directory write is put down to a full disk


def _disk_full(path: Path, err: Exception, tmp: Path) -> WriteFailed | None:
    """``err``, the failure of a block writing the temp directory ``tmp`` of ``path``, as a
    ``WriteFailed`` naming ``path`` where a full disk (or quota) caused it, though ``err`` is no
    ``OSError``: its text, or that of its causes, says so (safetensors reports ENOSPC as a
    ``SafetensorError``), or under ``LOW_SPACE`` bytes are free, ``tmp``'s files still there
    (torch reports a full disk as ``inline_container.cc: unexpected pos``). Else None."""
    reason = f"{type(err).__name__}: {(str(err).strip() or '?').splitlines()[0]}"
    chain: BaseException | None = err
    for _ in range(8):
        if chain is None:
            break
        for code in (errno.ENOSPC, errno.EDQUOT):
            if os.strerror(code) in str(chain):
                cause = f"{os.strerror(code).lower()} ({reason}); {_REMEDY[code]}"
                return WriteFailed(code, f"cannot write {path}: {cause}", str(path))
        chain = chain.__cause__ or chain.__context__
    try:
        free = shutil.disk_usage(tmp).free
    except OSError:
        return None
    if free >= LOW_SPACE:
        return None
    cause = f"no space left on device ({free} bytes free; {reason}); {_REMEDY[errno.ENOSPC]}"
    return WriteFailed(errno.ENOSPC, f"cannot write {path}: {cause}", str(path))


@contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp directory that becomes ``path`` only if the block finishes without error.

    The directory there, if any, is renamed aside, then removed once the new one is in place
    (``replace_directory``): a kill at any moment leaves ``path`` whole, old or new, never partly
    removed. ``WriteFailed`` (naming ``path``) before the block runs if ``path`` is a symbolic
    link or a file; and if the rename fails, or the block fails for the disk's sake (an
    ``OSError`` ENOSPC, EDQUOT, EFBIG or EROFS, or another error that a full disk caused:
    ``_disk_full``): then the temp directory is removed and the directory that was there is
    kept. Other errors of the block propagate as they are."""
    path = Path(path)
    _check_destination(path, directory=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_directory(path)
    except OSError as err:
        raise _failed(path, err) from err
    try:
        try:
            yield tmp
        except OSError as err:
            if err.errno in _DISK_ERRORS:
                raise _failed(path, err, within=tmp) from err
            raise
        except Exception as err:
            full = _disk_full(path, err, tmp)
            if full is not None:
                raise full from err
            raise
        replace_directory(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def shareable(directory: str | os.PathLike) -> None:
    """Give every file under ``directory`` the mode ``open`` would have given it: 0666 less the
    umask (0644 under the usual 0022), execute bits kept where the umask allows them. The umask
    is read off ``directory`` itself, made as ``mkdir`` makes one (0777 less the umask), so no
    thread's umask is touched. safetensors writes its files 0600, which a shared cache or a
    copied policy would pass on: others' loads then end in ``PermissionError``."""
    allowed = Path(directory).stat().st_mode & 0o777
    for root, _, files in os.walk(directory):
        for name in files:
            file = os.path.join(root, name)
            if os.path.islink(file):
                continue
            mode = os.stat(file).st_mode & 0o777
            wanted = (allowed & 0o666) | (mode & allowed & 0o111)
            if mode != wanted:
                os.chmod(file, wanted)


def replace_directory(new: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Rename the directory ``new`` to ``path``, its files made readable as any file psnlib
    writes (``shareable``): the directory there (if any) is first renamed aside, and removed once
    ``new`` is in place (put back if that rename fails), so that a kill at any moment leaves
    ``path`` whole, old or new. ``WriteFailed`` naming ``path`` if it is a symbolic link or a
    file, or if a rename fails."""
    new, path = Path(new), Path(path)
    _check_destination(path, directory=True)
    try:
        shareable(new)
        if not os.path.lexists(path):
            os.rename(new, path)
            return path
        aside = _temp_directory(path)
        try:
            os.rename(path, aside)  # onto the empty directory just made
        except BaseException:
            aside.rmdir()
            raise
        try:
            os.rename(new, path)
        except BaseException:
            os.rename(aside, path)
            raise
    except OSError as err:
        raise _failed(path, err) from err
    shutil.rmtree(aside, ignore_errors=True)
    return path


def atomic_save(path: str | os.PathLike, save: Callable[[Path], None]) -> Path:
    """Run ``save(tmp_dir)`` and move the result to ``path`` atomically (``atomic_directory``)."""
    with atomic_directory(path) as tmp:
        save(tmp)
    return Path(path)
