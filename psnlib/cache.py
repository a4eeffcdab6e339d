"""Reading what psnlib wrote: JSON files (as UTF-8, whatever the locale) and cache entries.

A cache entry is recomputed, never fatal, when it is damaged: ``read_json`` returns None for a
missing or damaged file, with a warning naming it; ``load_json`` raises ``Damaged``, the proof of
damage that makes ``load_cached`` remove an entry (with a warning) so that the caller recomputes
it. An error that proves no damage (a permission, a full file table) propagates and removes
nothing; a damaged entry that is a symbolic link is refused (``psnlib.io.WriteFailed``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from psnlib.io import WriteFailed, _inside

T = TypeVar("T")


class Damaged(ValueError):
    """Proof that a cache entry's files are damaged: a file missing, truncated or unparsable, or
    content of the wrong shape. Only this makes ``load_cached`` remove an entry."""


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
