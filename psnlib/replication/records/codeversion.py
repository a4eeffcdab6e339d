"""The versions of the ledger's records: one integer per kind, decided by hand at review time.

A record of the run ledger (``psnlib.replication.records.ledger``) states, for each kind of
computation in it, the version of that kind's code that made it: ``{"run": 1}``,
``{"run": 1, "premise": 1}``. The kinds (``VERSIONS``) are ``base`` (a starting policy's
evaluations), ``run`` (an RL run with its evaluations), ``premise`` (the premise on a run's
checkpoint) and ``probes`` (what a notebook shows of a policy beyond its evaluations). A record is
*current* when each version it states is its kind's version in ``VERSIONS`` (``current``); nothing
else decides it, so a pure move or split of code stales no record.

A tripwire keeps ``VERSIONS`` honest: ``DIGESTS`` pins, per kind, a hash of the code its task
executes (``code_digest``), and ``tests/test_versions.py`` fails, naming the kind, once that hash
moves (``moved``, ``tripwire``). The change then takes one of two ways out, decided at review:

- its results change: bump the kind's version in ``VERSIONS`` (a comment saying why) and pin
  the new digest; the kind's records are then stale and computed again;
- they do not: ``make prove-version KIND=<kind>`` (``psnlib.replication.compute.proof``) re-computes
  the cheapest committed record of the kind on the changed code, compares it with the committed one
  bit-exactly and, where every result field is equal, pins the new digest here.

The digest covers the modules a task of the kind imports (``ROOTS``), followed through every
``import`` of a ``psnlib`` module (a package's reads its ``__init__``) less ``ANALYSIS``, and the
task itself (``TASK``). Each module counts by its syntax tree (``ast.dump``) without docstrings,
so comments, docstrings and formatting move no digest; any changed statement, name or value does.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # psnlib/

# The version of each kind's results, bumped by hand (a line per bump saying why) when a change
# of its code changes them: every record of the kind made before is then stale.
# 1: the ledger's first records (issue 41's round, 262 at cpu), made by the code of commits
#    246e8f5 to a5b74e2, whose changes provably altered none of them (tests/test_codeversion_same
#    .py); one record of each kind re-computed bit-exactly on the code that pinned DIGESTS.
VERSIONS: dict[str, int] = {
    "base": 1,
    "run": 1,
    "premise": 1,
    "probes": 1,
}
# Per kind, the digest (``code_digest``) of the code its version was last decided for: by a bump, or
# by a proof that the code's records are unchanged (``psnlib.replication.compute.proof`` rewrites
# these lines). A digest that moved fails tests/test_versions.py until one of the two is done.
DIGESTS: dict[str, str] = {
    "base": "e8de4a1e2c33",
    "run": "e8de4a1e2c33",
    "premise": "7c5f60f572f2",
    "probes": "c7938f9f20bc",
}

# What each kind of task executes besides ``TASK``: the base policy's evaluations, an RL run with
# its evaluations, the premise on a run's checkpoint, and the notebooks' probes.
ROOTS: dict[str, tuple[str, ...]] = {
    "base": (
        "psnlib.replication.plan.variants",
        "psnlib.replication.compute.runs",  # load_variant: the base policy (pretrain)
        "psnlib.replication.compute.evaluation",
    ),
    "run": (
        "psnlib.replication.plan.variants",
        "psnlib.replication.compute.runs",
        "psnlib.replication.compute.evaluation",
    ),
    "premise": (
        "psnlib.replication.plan.premise",
        "psnlib.replication.compute.premise_sampling",
        "psnlib.replication.compute.premise_evaluation",
    ),
    "probes": ("psnlib.replication.compute.probing",),
}
# The task (what it computes and how its record is stored: ``jobs.run_task``) counts in every
# kind by its syntax tree; its imports are not followed, since they are the kinds' own roots.
TASK = "psnlib.replication.compute.jobs"
# Modules a closure reaches that compute no result, followed nowhere: the plans and the budget
# (which tasks there are and when they run, not how they compute), the profiles (their values
# reach a record through its run key and the settings it carries, ``ledger.Expected``), the
# statistics of the analysis, and this module (a pinned digest must not move its own digest).
ANALYSIS = frozenset(
    (
        "psnlib.replication.compute.budget",
        "psnlib.replication.analysis.claim_stats",
        "psnlib.replication.records.codeversion",
        "psnlib.replication.plan.experiments",
        "psnlib.replication.plan.profile_config",
        "psnlib.replication.plan.profiles",
        "psnlib.replication.analysis.summaries",
        "psnlib.replication.analysis.verdicts",
    )
)


def version(kind: str) -> int:
    """The current version of ``kind``'s results (``VERSIONS``)."""
    if kind not in VERSIONS:
        raise ValueError(f"unknown kind of record {kind!r}; allowed: {sorted(VERSIONS)}")
    return VERSIONS[kind]


def current(kind: str, made: object) -> bool:
    """Whether a record of ``kind`` stating version ``made`` is what the current code makes."""
    return type(made) is int and made == version(kind)


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


def _parse(name: str) -> ast.Module:
    """The syntax tree of ``psnlib`` module ``name``; a ValueError where it is none."""
    path = module_file(name)
    if path is None:
        raise ValueError(f"{name!r} is not a module of psnlib ({PACKAGE})")
    return ast.parse(path.read_text(), filename=str(path))


def closure(roots: tuple[str, ...]) -> dict[str, str]:
    """Every module ``roots`` execute (``ANALYSIS`` left out): name -> its syntax tree without
    docstrings, as ``ast.dump`` writes it (no line numbers, so no formatting or comments)."""
    seen: dict[str, str] = {}
    todo = [name for name in roots if name not in ANALYSIS]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        tree = _parse(name)
        seen[name] = ast.dump(without_docstrings(tree))
        todo += sorted(_imports(tree) - ANALYSIS - set(seen))
    return dict(sorted(seen.items()))


def digest(dumps: dict[str, str]) -> str:
    """A 12-hex-digit hash of named syntax trees (``closure``), in the order given."""
    found = hashlib.sha256()
    for name, dump in dumps.items():
        found.update(f"{name}\n{dump}\n".encode())
    return found.hexdigest()[:12]


def code_digest(kind: str) -> str:
    """A 12-hex-digit hash of the code a task of ``kind`` executes: the closure of its
    ``ROOTS`` and the task's own module (``TASK``)."""
    version(kind)  # an unknown kind is an error
    task = {TASK: ast.dump(without_docstrings(_parse(TASK)))}
    return digest(closure(ROOTS[kind]) | task)


def moved() -> dict[str, str]:
    """Each kind whose code's digest is not the one pinned in ``DIGESTS`` -> its digest now."""
    return {kind: now for kind in VERSIONS if (now := code_digest(kind)) != DIGESTS[kind]}


def tripwire(digests: dict[str, str]) -> str:
    """What to do about kinds whose code moved (``moved``'s answer): one paragraph per kind."""
    return "\n".join(
        f"The {kind} code changed (digest {DIGESTS[kind]} pinned, {now} now) and its records "
        f"state version {VERSIONS[kind]}. Decide: if its results change, bump VERSIONS[{kind!r}] "
        f"in {Path(__file__).name} to {VERSIONS[kind] + 1} with a comment saying why and pin "
        f'DIGESTS[{kind!r}] = "{now}" (its records go stale); if they do not, prove it: `make '
        f"prove-version KIND={kind}` re-computes its cheapest committed record on this code, "
        "compares every result field bit-exactly and pins the digest when all are equal."
        for kind, now in digests.items()
    )


def stamp(kinds: list[str]) -> dict[str, int]:
    """The versions a record computed now states (``{kind: version}``), with a warning per kind
    whose code moved since its version was decided: such a record must not be committed before
    the tripwire is settled (``tripwire``)."""
    found = {kind: version(kind) for kind in kinds}
    changed = {kind: now for kind, now in moved().items() if kind in found}
    if changed:
        warnings.warn(f"computing a record on unpinned code. {tripwire(changed)}", stacklevel=2)
    return found
