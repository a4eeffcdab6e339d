"""Helpers for the notebooks' own cells: parameter checking, and our numbers beside the papers'.

Papermill sets a notebook's parameters by running an extra cell right after its ``parameters``
cell; a mistyped name there (``-p profil smoke``) is only a warning to papermill, and the
notebook would run with the default profile; and ``-p`` passes ``(0, 1)`` as a string. Each
notebook therefore calls ``check_parameters(globals(), known=...)`` in the cell after its
parameters, before any work: it names an unknown parameter, and a value of the wrong kind.
"""

from __future__ import annotations

import ast
import os
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from psnlib.replication.claim_stats import number
from psnlib.replication.claims import CLAIMS
from psnlib.replication.experiments import Plan, check_seeds
from psnlib.replication.profiles import Profile, get_profile
from psnlib.replication.results import check_claim

PARAMETERS = ("profile", "seeds", "figures_dir", "metrics_path")  # every notebook's parameters
# Names IPython puts in a notebook's namespace; never parameters.
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open", "display"})


def _assigned_literals(source: str) -> list[str] | None:
    """The names a cell binds if it only assigns literals (a parameters cell, or papermill's
    injected one), else None."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    names = []
    for statement in body:
        if not isinstance(statement, ast.Assign):
            return None
        try:
            ast.literal_eval(statement.value)
        except (ValueError, TypeError, SyntaxError):  # not a literal (a call, a name, ...)
            return None
        names += [t.id for t in statement.targets if isinstance(t, ast.Name)]
    return names


def given_parameters(namespace: Mapping[str, Any]) -> list[str]:
    """The names the notebook's parameters set.

    In IPython (the namespace has its input history ``In``): the names bound by the cells run
    just before the current one that only assign literals -- the ``parameters`` cell and the
    cell papermill injects after it -- so names that an earlier run of the notebook left in the
    kernel do not count. Elsewhere: every name of ``namespace`` that is not private, IPython's,
    a module, a function or a class.
    """
    history = namespace.get("In")
    if isinstance(history, list) and len(history) > 1:
        names: list[str] = []
        for source in reversed(history[:-1]):  # history[-1] is the cell running now
            assigned = _assigned_literals(source)
            if not assigned:
                break
            names += assigned
        return list(dict.fromkeys(names))
    skip = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return [
        name
        for name, value in namespace.items()
        if not name.startswith("_") and name not in IPYTHON_NAMES and not isinstance(value, skip)
    ]


def check_parameters(namespace: Mapping[str, Any], known: Iterable[str] = PARAMETERS) -> None:
    """Raise ``ValueError`` naming every parameter set in ``namespace`` (``given_parameters``)
    that is not one of ``known`` (default: the notebooks' ``PARAMETERS``), and listing the known
    ones; then ``check_values`` of the notebooks' parameters."""
    known = list(known)
    unknown = [name for name in given_parameters(namespace) if name not in known]
    if unknown:
        raise ValueError(
            f"unknown notebook parameter(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    check_values(namespace)


def check_values(namespace: Mapping[str, Any]) -> None:
    """The notebooks' parameters in ``namespace`` must be of their kind, else a ``ValueError``
    names the parameter and its value: ``profile`` a known profile, ``seeds`` None or a list of
    integers >= 0 (``psnlib.replication.experiments.check_seeds``), ``figures_dir`` and
    ``metrics_path`` None or a path."""
    if "profile" in namespace:
        profile = namespace["profile"]
        if not isinstance(profile, (str, Profile)):
            raise ValueError(f"notebook parameter profile must be a profile name, got {profile!r}")
        get_profile(profile)  # an unknown name is an error listing the known ones
    if "seeds" in namespace:
        try:
            check_seeds(namespace["seeds"])
        except ValueError as err:
            raise ValueError(f"notebook parameter {err}") from err
    for name in ("figures_dir", "metrics_path"):
        value = namespace.get(name)
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"notebook parameter {name} must be None or a path, got {value!r}")


def paper_beside_ours(
    plan: Plan,
    results: dict[str, pd.DataFrame],
    tested_by: Callable[[Profile], Plan] | None = None,
) -> pd.DataFrame:
    """Each claim of the papers that ``plan``'s experiment tests (``psnlib.replication.claims``;
    those of the experiment function ``tested_by`` instead, e.g. the main results' claims on an
    ablation's runs), one row: what the paper reports, ours on ``results`` (``plan.run()``'s
    tables: problems, and logs for a per-run statistic), the difference with its 95% interval,
    the minimum detectable effect at 80% power and the verdict
    (``psnlib.replication.results.check_claim``)."""
    name = plan.name if tested_by is None else tested_by.__name__
    rows = []
    for claim in (c for c in CLAIMS if c.experiment.__name__ == name):
        r = check_claim(claim, results["problems"], plan.profile, results.get("logs"))
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
    if not rows:
        raise ValueError(f"no claim of the papers is tested by experiment {name!r}")
    return pd.DataFrame(rows).set_index("claim")
