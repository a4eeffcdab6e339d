"""Evaluation results on disk: tidy tables keyed by a hash of the full run configuration.

A run's results live in ``data/results/<profile>/<label>-<hash>/``, where the hash covers the
configuration (``config.json`` beside them). They are written in *parts* (e.g. one per
benchmark), each one JSON file of named tables written atomically once the part is finished, so a
finished evaluation is loaded instead of recomputed and an interrupted one resumes at the first
missing part. Any change to the configuration gives a new hash, hence a new directory.

A part that parses but lacks what its reader needs (``load``'s ``required``: a table, a column,
any row) is named in a warning and recomputed, never used: an empty ``{"tables": {}}`` would
otherwise drop a benchmark from an average without a word.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from psnlib.cache import read_json
from psnlib.io import atomic_write_json
from psnlib.paths import data_dir

NAME = re.compile(r"[A-Za-z0-9][\w.+-]*")  # labels and part names: safe as file names
# What a part must hold: table names, or table name -> the columns it must have; every required
# table must have at least one row.
Required = Mapping[str, Iterable[str]] | Iterable[str]


def config_hash(config: dict[str, Any]) -> str:
    """Short stable hash of a JSON-able configuration (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@torch.no_grad()
def weights_fingerprint(model: torch.nn.Module, values_per_tensor: int = 4096) -> str:
    """Short hash of a model's weights: per tensor its name, shape, dtype, sum, sum of squares and
    up to ``values_per_tensor`` evenly strided values (one pass, cheap for large models too).

    The sums run on one thread: how torch splits a sum over threads changes its last bits, and a
    fingerprint that depended on the thread count would miss, in a notebook's kernel, the results
    that a one-thread ``make reproduce`` worker stored."""
    digest = hashlib.blake2b(digest_size=8)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, p in model.state_dict().items():
            flat = p.reshape(-1).double()
            sample = flat[:: max(1, flat.numel() // values_per_tensor)]
            sums = torch.stack([flat.sum(), flat.square().sum()])
            digest.update(f"{name}{tuple(p.shape)}{p.dtype}".encode())
            digest.update(torch.cat([sums, sample]).cpu().numpy().tobytes())
    finally:
        torch.set_num_threads(threads)
    return digest.hexdigest()


def _check_name(kind: str, name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(
            f"{kind} {name!r} must be a file-safe name: letters, digits and . _ + - "
            "(not starting with a symbol)"
        )
    return name


class ResultStore:
    """The result parts of one run configuration (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_run(
        cls, profile: str, label: str, config: dict[str, Any], root: Path | None = None
    ) -> ResultStore:
        """The store of ``config`` under ``<root>/<profile>/<label>-<hash>`` (default root:
        ``data_dir()/results``); writes ``config.json`` there on first use."""
        root = Path(root) if root is not None else data_dir() / "results"
        name = f"{_check_name('label', label)}-{config_hash(config)}"
        store = cls(root / _check_name("profile", profile) / name)
        config_file = store.path / "config.json"
        if not config_file.exists():
            atomic_write_json(config_file, config)
        return store

    def part_path(self, part: str) -> Path:
        return self.path / f"{_check_name('part', part)}.json"

    def parts(self) -> list[str]:
        """The finished parts, sorted."""
        return sorted(p.stem for p in self.path.glob("*.json") if p.name != "config.json")

    def load(self, part: str, required: Required | None = None) -> dict[str, pd.DataFrame] | None:
        """The tables of a finished part, or None if it is not finished, damaged, or lacks what
        ``required`` names (``lacking``): a warning names the file and what is wrong, and
        ``cached`` then recomputes it. Without ``required`` any tables are taken."""
        path = self.part_path(part)
        stored = read_json(path, "result part")
        try:
            tables = stored["tables"]
            loaded = {
                name: pd.DataFrame(t["data"], columns=t["columns"]) for name, t in tables.items()
            }
        except (TypeError, KeyError, ValueError, AttributeError) as err:
            if stored is not None:  # valid JSON, but not a part
                warnings.warn(f"ignoring the damaged result part {path}: {err!r}", stacklevel=2)
            return None
        problems = lacking(loaded, required)
        if problems:
            warnings.warn(
                f"ignoring the result part {path}: {'; '.join(problems)} (recomputed)",
                stacklevel=2,
            )
            return None
        return loaded

    def save(self, part: str, tables: dict[str, pd.DataFrame]) -> Path:
        """Write a finished part atomically (its index is dropped)."""
        records = {
            name: {"columns": list(t.columns), "data": t.to_dict(orient="split")["data"]}
            for name, t in tables.items()
        }
        return atomic_write_json(self.part_path(part), {"tables": records})

    def cached(
        self,
        part: str,
        compute: Callable[[], dict[str, pd.DataFrame]],
        required: Required | None = None,
    ) -> dict[str, pd.DataFrame]:
        """The part's tables: loaded if finished and holding what ``required`` names (``load``),
        else computed by ``compute()`` and saved. Computed tables that lack it are a ValueError
        naming the part, and are not saved."""
        tables = self.load(part, required)
        if tables is None:
            tables = compute()
            problems = lacking(tables, required)
            if problems:
                raise ValueError(
                    f"computed result part {part!r} of {self.path}: {'; '.join(problems)}"
                )
            self.save(part, tables)
        return tables


def lacking(tables: dict[str, pd.DataFrame], required: Required | None) -> list[str]:
    """What ``tables`` lacks of ``required`` (table names, or table name -> required columns),
    one phrase each: a missing table, missing columns, a table with no rows. Empty when nothing
    is required or nothing lacks."""
    if required is None:
        return []
    if isinstance(required, str):  # one name would read as its letters
        raise TypeError(f"required must be table names or a mapping, got the string {required!r}")
    needed = required if isinstance(required, Mapping) else dict.fromkeys(required, ())
    problems = []
    for name, columns in needed.items():
        if isinstance(columns, str):
            raise TypeError(f"required columns of {name!r} must be a list, got {columns!r}")
        table = tables.get(name)
        if table is None:
            problems.append(f"no table {name!r}")
            continue
        absent = [c for c in columns if c not in table.columns]
        if absent:
            problems.append(f"table {name!r} has no column {', '.join(map(repr, absent))}")
        if len(table) == 0:
            problems.append(f"table {name!r} has no rows")
    return problems
