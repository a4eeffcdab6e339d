"""Where the replication's files live: the checkout (``psnlib.paths.ROOT``), the figures, and the
environment variables that move the run ledger and the caches elsewhere for a while."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from psnlib.paths import ROOT

__all__ = ["ROOT", "environment", "figures_dir"]


@contextmanager
def environment(values: Mapping[str, str | Path]) -> Iterator[None]:
    """Within it, each environment variable of ``values`` (e.g. ``PSNLIB_RESULTS``,
    ``PSNLIB_DATA``) holds its value, as a string; on leaving, each holds what it held before,
    or is unset again where it was unset, whatever raised."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update({name: str(value) for name, value in values.items()})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def figures_dir(profile: str, out: str | Path = ROOT) -> Path:
    """``<out>/figures/<profile>/``: a profile's figures, tables and published notebooks (``out``:
    the checkout, or ``make reproduce``'s ``--out``)."""
    return Path(out) / "figures" / profile
