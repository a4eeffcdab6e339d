"""Where the replication's files live: the checkout (``psnlib.io.ROOT``) and the figures."""

from __future__ import annotations

from pathlib import Path

from psnlib.io import ROOT

__all__ = ["ROOT", "figures_dir"]


def figures_dir(profile: str, out: str | Path = ROOT) -> Path:
    """``<out>/figures/<profile>/``: a profile's figures, tables and published notebooks (``out``:
    the checkout, or ``make reproduce``'s ``--out``)."""
    return Path(out) / "figures" / profile
