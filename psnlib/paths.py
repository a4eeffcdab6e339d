"""Where psnlib's files live: the checkout (``ROOT``) and the data directory (``data_dir``:
``$PSNLIB_DATA``, the checkout's ``data/``, or ``~/.cache/psnlib``), and the check that a
directory can be written (``check_writable``, ``check_data_dir``), made before any work that would
otherwise be lost. It imports only the standard library.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

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
