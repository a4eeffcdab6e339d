"""The version of the code that computes a record: a hash of the syntax trees it runs.

A record of the run ledger (``psnlib.replication.ledger``) names the code that computed it, so a
record made by code that has changed since is *stale*. What counts is what a task executes: the
modules its entry points import, followed through every ``import`` of a ``psnlib`` module (an
import of a package reads its ``__init__``), less ``ANALYSIS``, the modules that compute no
result. Each module counts by its syntax tree (``ast.dump``) without docstrings, so comments,
docstrings and formatting change no version, while any changed statement, name or value does.

Each kind of task has its own entry points (``ROOTS``): an edit of the trainer makes the RL runs
stale and leaves the base policy's evaluations fresh; an edit of ``psnlib/noise.py`` makes stale
every record whose task imports it.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # psnlib/

# What each kind of task executes (``psnlib.replication.jobs``): the base policy's evaluations,
# an RL run with its evaluations, the premise on a run's checkpoint, and the notebooks' probes.
ROOTS: dict[str, tuple[str, ...]] = {
    "base": ("psnlib.replication.evaluation",),
    "run": ("psnlib.replication.runs", "psnlib.replication.evaluation"),
    "premise": ("psnlib.replication.premise_sampling", "psnlib.replication.premise"),
    "probes": ("psnlib.replication.probes",),
}
# Modules that compute no result, followed nowhere: the plans (which tasks there are, not how
# they compute), the profiles (their values reach a record through its run key and the
# evaluation settings it carries, ``ledger.Record``), the analysis of records (claims,
# verdicts, tables, figures, notebook text), and this module: the versions and
# ``SAME_RESULTS`` (were it followed, an entry would change the version it names).
ANALYSIS = frozenset(
    f"psnlib.replication.{name}"
    for name in (
        "budget",
        "claim",
        "claim_stats",
        "claims",
        "claims_psn",
        "claims_released",
        "claims_weak",
        "code_differences",
        "codeversion",
        "experiments",
        "frontier",
        "notebook",
        "plots",
        "profile_config",
        "profiles",
        "results",
        "results_text",
        "summaries",
        "verdicts",
    )
)


# Per kind, the current code's version -> older versions whose records it makes again unchanged:
# a record of one of them counts as current (it keeps the version it was made with) only while
# the code is at the version its entry is keyed by, so the next change of that code makes them
# stale with the rest. Each entry names the change that made the old versions old and what
# proves it alters no record the old code completed; nothing else may go here.
# - 780e827d288c (run), a8875bb1ea8c (premise), a24a6ccff817 (probes), 715f53f665a5 (base), the
#   versions of commit 246e8f5: response_metrics.distinct_forms read a correct completion at
#   ``final_attempt`` instead of its whole text, which raised on a completion with an earlier
#   attempt before the last: wherever the old reading did not raise, the text was one chain
#   without a space, which is its own final attempt (tests/test_codeversion_same.py).
# - 4c1620ea1e8e (premise) and 29d817a6746e (probes), the versions of issue 41's round: their
#   closures held this module (through ``ledger``), and those of the run and the base policy did
#   not; this module computes no result and is followed no more. Nothing else in their closures
#   changed (git diff 4174255 -- psnlib: only this file), so neither did a record.
SAME_RESULTS: dict[str, dict[str, frozenset[str]]] = {
    "base": {"028df87af79b": frozenset({"715f53f665a5"})},
    "run": {"67644c54b320": frozenset({"780e827d288c"})},
    "premise": {"aabc9d6cf9cb": frozenset({"4c1620ea1e8e", "a8875bb1ea8c"})},
    "probes": {"b2e8ff979f38": frozenset({"29d817a6746e", "a24a6ccff817"})},
}


def current(kind: str, version: str | None) -> bool:
    """Whether a record of ``kind`` made by code ``version`` is what the current code makes:
    the current version, or one that ``SAME_RESULTS`` lists under it."""
    now = code_version(kind)
    return version == now or version in SAME_RESULTS.get(kind, {}).get(now, frozenset())


def module_file(name: str) -> Path | None:
    """The source file of ``psnlib`` module ``name`` (a package's ``__init__.py``), or None
    where ``name`` is not one (a class or function imported from a module)."""
    parts = name.split(".")
    if parts[0] != "psnlib":
        return None
    path = PACKAGE.joinpath(*parts[1:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(tree: ast.Module) -> set[str]:
    """The ``psnlib`` modules an import statement of ``tree`` names: ``import a.b``, ``from a
    import b`` (``a.b`` where it is a module, else ``a``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if module_file(name) is not None}


def without_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` with the docstring of the module and of every class and function removed."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def closure(roots: tuple[str, ...]) -> dict[str, str]:
    """Every module ``roots`` execute (``ANALYSIS`` left out): name -> its syntax tree without
    docstrings, as ``ast.dump`` writes it (no line numbers, so no formatting or comments)."""
    seen: dict[str, str] = {}
    todo = [name for name in roots if name not in ANALYSIS]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name)
        if path is None:
            raise ValueError(f"{name!r} is not a module of psnlib ({PACKAGE})")
        tree = ast.parse(path.read_text(), filename=str(path))
        seen[name] = ast.dump(without_docstrings(tree))
        todo += sorted(_imports(tree) - ANALYSIS - set(seen))
    return dict(sorted(seen.items()))


@cache
def code_version(kind: str) -> str:
    """A 12-hex-digit hash of the code a task of ``kind`` (a key of ``ROOTS``) executes."""
    if kind not in ROOTS:
        raise ValueError(f"unknown kind of task {kind!r}; allowed: {sorted(ROOTS)}")
    digest = hashlib.sha256()
    for name, dump in closure(ROOTS[kind]).items():
        digest.update(f"{name}\n{dump}\n".encode())
    return digest.hexdigest()[:12]
