"""Where data lives, and atomic writes (temp file or directory, then rename)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from safetensors import SafetensorError

T = TypeVar("T")
DAMAGED = (OSError, ValueError, RuntimeError, KeyError, SafetensorError)  # what a bad file raises

_REPO_DATA = Path(__file__).resolve().parent.parent / "data"


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
    with a warning that names the file: a damaged cache entry is recomputed, never fatal."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, OSError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"ignoring the damaged {what} {path}: {err}", stacklevel=2)
        return None


def load_cached(path: str | os.PathLike, load: Callable[[Path], T], what: str) -> T | None:
    """``load(path)`` of a cache entry (a directory), or None if it cannot be loaded: a damaged
    entry (a truncated weights or JSON file) is removed, with a warning naming it, so that the
    caller recomputes it."""
    path = Path(path)
    try:
        return load(path)
    except DAMAGED as err:
        warnings.warn(
            f"removing the damaged {what} {path} ({type(err).__name__}: {err}); recomputing it",
            stacklevel=2,
        )
        shutil.rmtree(path, ignore_errors=True)
        return None


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
