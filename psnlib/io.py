"""Atomic writes (temp file or directory, then rename), and the one-line error of a failed write.

Symbolic links: psnlib follows a link to read a file or directory, and follows the links among the
directories above whatever it writes (a data directory may live on another disk behind one), but
it never writes through a link at the path it writes, nor replaces such a link: an atomic write
(``atomic_write_text``, ``atomic_write_json``, ``atomic_directory``, ``atomic_save``) whose
destination is a link, a lock file (``psnlib.locks.exclusive``) that is one, and a damaged cache
entry (``psnlib.cache.load_cached``) that is one are refused with ``WriteFailed``, naming the link;
``os.replace`` would replace the link itself and leave its target stale, and a lock opened through
one would overwrite its target.

Permissions: what psnlib writes gets the mode an ordinary ``open(path, "w")`` or ``mkdir`` gives
a new file or directory (0666 or 0777 less the umask, or as a directory's default ACL says), not
``tempfile``'s private 0600 and 0700, so that a cache shared by a group can be read by it.

Failures: an ``OSError`` of an atomic write (a full disk, a quota, a read-only file system, a
permission) becomes ``WriteFailed``, one line naming the path, the cause and what to do; no
partial or temporary file is left, and the file or directory that was there is kept.

Where data lives is ``psnlib.paths``; reading JSON and cache entries, ``psnlib.cache``; the lock
of a directory, ``psnlib.locks``. This module imports only the standard library.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


def _inside(name: str | bytes | None, directory: Path) -> bool:
    """Whether the file ``name`` (an ``OSError``'s ``filename``) is ``directory`` or in it."""
    if name is None:
        return False
    file = os.path.abspath(os.fsdecode(name))
    return os.path.commonpath([file, os.path.abspath(directory)]) == os.path.abspath(directory)


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
