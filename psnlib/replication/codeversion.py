"""The version of the code that computes a record: a hash of the syntax trees it runs.

A record of the run ledger (``psnlib.replication.ledger``) names the code that computed it, so a
record made by code that has changed since is *stale*. What counts is what a task executes: the
modules its entry points import, followed through every ``import`` of a ``psnlib`` module (an
import of a package reads its ``__init__``), less ``ANALYSIS``, the modules that compute no
result. Each module counts by its syntax tree (``ast.dump``) without docstrings, so comments,
docstrings and formatting change no version, while any changed statement, name or value does.

The task's glue (``GLUE``: what ``psnlib.replication.jobs`` asks a task to compute and how it
stores it) counts in every kind's version by its definitions alone, since its modules also hold
readers of the ledger that compute nothing.

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
# The task's glue, counted in every kind's version by its definitions alone: what
# ``psnlib.replication.jobs`` asks each task to compute (its benchmarks, kept steps, premise and
# probes), how it computes and stores them, and how ``variants`` obtains a task's policy. Their
# modules also hold readers of the ledger (status, costs, training paths) and comparison tables,
# which compute no result, so only these top-level definitions count, not the modules.
GLUE: dict[str, tuple[str, ...]] = {
    "psnlib.replication.jobs": ("Task", "tasks", "run_task", "_path"),
    "psnlib.replication.variants": ("EVAL_SEED", "Variant", "load_variant"),
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
#   changed (git diff 4174255 -- psnlib: only this file), so neither did a record. That made
#   aabc9d6cf9cb (premise) and b2e8ff979f38 (probes), which made no record.
# - All of those: every kind's version now counts the task's glue (``GLUE``), which made every
#   record of the ledger and has not changed since 246e8f5, before the first (each definition's
#   syntax tree there and at this change are equal: tests/test_codeversion_same.py).
SAME_RESULTS: dict[str, dict[str, frozenset[str]]] = {
    "base": {"58df06360487": frozenset({"028df87af79b", "715f53f665a5"})},
    "run": {"2e8c229c197a": frozenset({"67644c54b320", "780e827d288c"})},
    "premise": {"68a8af147651": frozenset({"aabc9d6cf9cb", "4c1620ea1e8e", "a8875bb1ea8c"})},
    "probes": {"e1b0f7198514": frozenset({"b2e8ff979f38", "29d817a6746e", "a24a6ccff817"})},
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


def _defined_name(node: ast.stmt) -> str | None:
    """The name a top-level statement defines: a function, a class or one assigned name."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    target = node.target if isinstance(node, ast.AnnAssign) else target
    return target.id if isinstance(target, ast.Name) else None


def glue() -> dict[str, str]:
    """Each ``GLUE`` definition, ``module.name``, -> its syntax tree without docstrings; a name
    its module no longer defines is an error (say in ``GLUE`` what took its place)."""
    found: dict[str, str] = {}
    for module, names in GLUE.items():
        path = module_file(module)
        if path is None:
            raise ValueError(f"GLUE names {module!r}, which is not a module of psnlib ({PACKAGE})")
        tree = without_docstrings(ast.parse(path.read_text(), filename=str(path)))
        defined = {_defined_name(node): node for node in tree.body}
        for name in names:
            if name not in defined:
                raise ValueError(f"GLUE names {module}.{name}, which {path} does not define")
            found[f"{module}.{name}"] = ast.dump(defined[name])
    return found


def digest(dumps: dict[str, str]) -> str:
    """A 12-hex-digit hash of named syntax trees (``closure``, ``glue``), in the order given."""
    found = hashlib.sha256()
    for name, dump in dumps.items():
        found.update(f"{name}\n{dump}\n".encode())
    return found.hexdigest()[:12]


@cache
def code_version(kind: str) -> str:
    """A 12-hex-digit hash of the code a task of ``kind`` (a key of ``ROOTS``) executes: its
    closure and the task's glue (``GLUE``)."""
    if kind not in ROOTS:
        raise ValueError(f"unknown kind of task {kind!r}; allowed: {sorted(ROOTS)}")
    return digest(closure(ROOTS[kind]) | glue())
