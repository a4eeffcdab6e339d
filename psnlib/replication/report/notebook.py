"""Helpers for the notebooks' own cells: parameter checking, and our numbers beside the papers'.

Papermill sets a notebook's parameters by running an extra cell right after its ``parameters``
cell; a mistyped name there (``-p profil smoke``) is only a warning to papermill, and the
notebook would run with the default profile; and ``-p`` passes ``(0, 1)`` as a string. Each
notebook therefore calls ``check_parameters(globals())`` in the first code cell after its
parameters, before any work: it names an unknown parameter, and a value of the wrong kind, in
one line with what is allowed. Cells of imports between the parameters and the check, or any
cells between papermill's injected cell and the check, do not hide a parameter.
"""

from __future__ import annotations

import ast
import os
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown

from psnlib.replication.analysis.claim_stats import number
from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.plan.experiments import Plan, check_seeds
from psnlib.replication.plan.profiles import PROFILES, Profile, get_profile
from psnlib.replication.report.results import claim_row
from psnlib.replication.report.results_text import discussion

MAX_SEED = int(np.iinfo(np.uint32).max)  # numpy's seed range, as the trainer's config checks it

PARAMETERS = ("profile", "seeds", "figures_dir", "metrics_path")  # every notebook's parameters
# Names IPython puts in a notebook's namespace; never parameters.
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open", "display"})
# Parameters papermill itself adds (--inject-paths); never unknown.
PAPERMILL_NAMES = frozenset({"PAPERMILL_INPUT_PATH", "PAPERMILL_OUTPUT_PATH"})
# The first line of papermill's injected cell (and of the notebooks' parameters cells).
PARAMETERS_COMMENT = "# Parameters"
# How papermill writes a float that Python has no literal for (``-p seeds nan``).
NONFINITE = frozenset({"nan", "inf", "-inf", "+inf"})


class _NonFinite(ast.NodeTransformer):
    """Replaces papermill's ``float('nan')``, ``float('inf')`` and ``float('-inf')`` by a literal,
    so that a cell papermill wrote is recognised as assigning literals."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        (arg,) = node.args if len(node.args) == 1 and not node.keywords else (None,)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and isinstance(arg, ast.Constant)
            and isinstance(arg.value, str)
            and arg.value.strip().lower() in NONFINITE
        ):
            return ast.copy_location(ast.Constant(0.0), node)
        return self.generic_visit(node)


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(_NonFinite().visit(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False  # not a literal (a call, a name, ...)
    return True


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for t in target.elts for name in _names(t)]
    return []


def _parse(source: str) -> list[ast.stmt] | None:
    try:
        return ast.parse(source).body
    except (SyntaxError, ValueError):  # a cell IPython transformed oddly, or a null byte
        return None


def _assigned_literals(source: str) -> list[str] | None:
    """The names a cell binds if it only assigns literals (a parameters cell, or papermill's
    injected one, whose ``float('nan')`` counts as a literal), else None."""
    body = _parse(source)
    if body is None:
        return None
    names = []
    for statement in body:
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        elif isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        else:
            return None
        if not _is_literal(value):
            return None
        names += [name for t in targets for name in _names(t)]
    return names


def _only_imports(source: str) -> bool:
    """Whether a cell only imports (a cell of imports between the parameters and the check), or
    holds nothing but comments."""
    body = _parse(source)
    return body is not None and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)


def _calls_check(source: str) -> bool:
    """Whether a cell calls ``check_parameters``: a check of an earlier run of the notebook."""
    body = _parse(source)
    return body is not None and any(
        isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
        == "check_parameters"
        for statement in body
        for node in ast.walk(statement)
    )


def _is_header_cell(source: str) -> bool:
    """A cell of literals whose first line is ``# Parameters``: papermill's injected cell, or a
    notebook's ``parameters`` cell (``# Parameters (papermill overrides these)``)."""
    return source.lstrip().startswith(PARAMETERS_COMMENT) and bool(_assigned_literals(source))


def _parameter_cells(history: list[str]) -> list[str]:
    """The cells of ``history`` (the cells run before the check, oldest first) that set the
    parameters: the run of cells that only assign literals (the ``parameters`` cell, then the
    cell papermill injects after it) around the latest cell whose first line is ``# Parameters``,
    wherever the check stands after it; without such a cell, the run that ends right before the
    check, or before cells that only import. The search stops at an earlier run's check, so
    names that an earlier run left in the kernel, and a cell of literals followed by a cell of
    work, do not count."""
    begin = 0  # the first cell after an earlier run's check
    for i in range(len(history) - 1, -1, -1):
        if _calls_check(history[i]):
            begin = i + 1
            break
    cells = history[begin:]
    literal = [bool(_assigned_literals(source)) for source in cells]
    headed = [i for i, source in enumerate(cells) if literal[i] and _is_header_cell(source)]
    if headed:
        end = headed[-1]
    else:
        end = len(cells) - 1
        while end >= 0 and not literal[end] and _only_imports(cells[end]):
            end -= 1  # cells of imports (or comments) between the parameters and the check
        if end < 0 or not literal[end]:
            return []
    start = end
    while start > 0 and literal[start - 1]:
        start -= 1
    while end + 1 < len(cells) and literal[end + 1]:
        end += 1
    return cells[start : end + 1]


def given_parameters(namespace: Mapping[str, Any]) -> list[str]:
    """The names the notebook's parameters set.

    In IPython (the namespace has its input history ``In``, whose last entry is the cell running
    now): the names bound by the parameter cells (``_parameter_cells``): the ``parameters`` cell
    and the cell papermill injects after it. Elsewhere: every name of ``namespace`` that is not
    private, IPython's, a module, a function or a class.
    """
    history = namespace.get("In")
    if isinstance(history, list) and len(history) > 1:
        cells = [s for s in history[:-1] if isinstance(s, str)]
        names = [name for cell in _parameter_cells(cells) for name in _assigned_literals(cell)]
        return list(dict.fromkeys(names))
    skip = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return [
        name
        for name, value in namespace.items()
        if not name.startswith("_") and name not in IPYTHON_NAMES and not isinstance(value, skip)
    ]


def check_parameters(namespace: Mapping[str, Any], known: Iterable[str] = PARAMETERS) -> None:
    """Raise ``ValueError`` naming every parameter set in ``namespace`` (``given_parameters``)
    that is not one of ``known`` (default: the notebooks' ``PARAMETERS``; papermill's own
    ``PAPERMILL_NAMES`` are always allowed), and listing the known ones; then ``check_values``
    of the notebooks' parameters."""
    known = list(known)
    allowed = set(known) | PAPERMILL_NAMES
    unknown = [name for name in given_parameters(namespace) if name not in allowed]
    if unknown:
        raise ValueError(
            f"unknown notebook parameter(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    check_values(namespace)


def check_values(namespace: Mapping[str, Any]) -> None:
    """The notebooks' parameters in ``namespace`` must be of their kind, else a one-line
    ``ValueError`` names the parameter, its value and what is allowed: ``profile`` a known
    profile's name, ``seeds`` None or a non-empty list of distinct integers in [0, MAX_SEED]
    (``psnlib.replication.plan.experiments.check_seeds``, and numpy's seed range, which the trainer
    would refuse only after the base policy is built), ``figures_dir`` and ``metrics_path`` None
    or a non-empty path."""
    if "profile" in namespace:
        profile = namespace["profile"]
        if not isinstance(profile, (str, Profile)):
            raise ValueError(
                f"notebook parameter profile must be a profile name, got {profile!r}; "
                f"allowed: {sorted(PROFILES)}"  # as get_profile lists them
            )
        try:
            get_profile(profile)
        except ValueError as err:  # unknown profile 'x'; allowed: [...]
            raise ValueError(f"notebook parameter profile: {err}") from err
    if "seeds" in namespace:
        seeds = namespace["seeds"]
        try:
            check_seeds(seeds)
        except ValueError as err:
            raise ValueError(f"notebook parameter {err}") from err
        if seeds is not None:
            if any(s > MAX_SEED for s in seeds):
                raise ValueError(
                    f"notebook parameter seeds must be integers in [0, {MAX_SEED}] (numpy's "
                    f"seed range), got {_short(seeds)}"
                )
            if len(set(seeds)) < len(seeds):
                raise ValueError(
                    f"notebook parameter seeds must be distinct (a seed twice would count one "
                    f"run twice), got {_short(seeds)}"
                )
    for name in ("figures_dir", "metrics_path"):
        value = namespace.get(name)
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"notebook parameter {name} must be None or a path, got {value!r}")
        if value is not None and not os.fspath(value).strip():
            raise ValueError(
                f"notebook parameter {name} must be None (the default place) or a path, got "
                f"{value!r}, an empty path"
            )


def _short(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a list of thousands of seeds)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]} ...{text[-1]}"


def _claim_rows(
    plan: Plan,
    results: dict[str, pd.DataFrame],
    tested_by: Callable[[Profile], Plan] | None = None,
) -> list[dict[str, Any]]:
    """``check_claim``'s row of each claim that ``plan``'s experiment (or ``tested_by``) tests,
    on ``results``; a ValueError where there is none."""
    name = plan.name if tested_by is None else tested_by.__name__
    claims = [c for c in CLAIMS if c.experiment.__name__ == name]
    rows = [claim_row(c, plan.profile, lambda: results) for c in claims]
    if not rows:
        raise ValueError(f"no claim of the papers is tested by experiment {name!r}")
    return rows


def paper_beside_ours(
    plan: Plan,
    results: dict[str, pd.DataFrame],
    tested_by: Callable[[Profile], Plan] | None = None,
) -> pd.DataFrame:
    """Each claim of the papers that ``plan``'s experiment tests
    (``psnlib.replication.analysis.claims``; those of the experiment function ``tested_by`` instead,
    e.g. the main results' claims on an ablation's runs), one row: what the paper reports, ours on
    ``results`` (``summaries.read(plan)``'s tables: problems, and logs for a per-run statistic), the
    difference with its 95% interval, the minimum detectable effect at 80% power and the verdict
    (``psnlib.replication.report.results.check_claim``)."""
    rows = []
    for r in _claim_rows(plan, results, tested_by):
        interval = "" if np.isnan(r["lo"]) else f" [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        ours, theirs = (number(r[f"value_{side}"], r["unit"]) for side in ("ours", "theirs"))
        rows.append(
            {
                "claim": r["claim"],
                "paper": r["paper"],
                "ours": f"{r['ours']} {ours} vs {r['theirs']} {theirs} ({r['statistic']})",
                "difference [95% CI]": f"{r['diff']:+.1f}{interval}",
                "seeds": r["seeds"],
                "MDE": r["mde"],
                "verdict": r["verdict"],
            }
        )
    return pd.DataFrame(rows).set_index("claim")


def conclusion(
    plan: Plan,
    results: dict[str, pd.DataFrame],
    tested_by: Callable[[Profile], Plan] | None = None,
) -> Markdown:
    """The notebook's closing paragraph, computed from the verdict rows of ``paper_beside_ours``
    (the same claims, the same test): per claim its verdict, difference and interval, the MDE beside
    the effect of interest, and what the interval says of the paper's size
    (``psnlib.replication.report.results_text.discussion``, as RESULTS.md words it). Nothing in it
    is written by hand, so it says what this profile's runs found, whatever they found."""
    rows = pd.DataFrame(_claim_rows(plan, results, tested_by))
    head = (
        f"**What this experiment finds at the {plan.profile.name} profile** "
        f"({len(rows)} claim{'s' if len(rows) != 1 else ''} of the papers; "
        "computed from the rows above):"
    )
    return Markdown(head + "\n\n" + discussion(rows))
