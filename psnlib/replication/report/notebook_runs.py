"""Running the notebooks headless and publishing them: papermill executes each notebook with its
parameters (``run_notebook``), and the executed copy is published beside the figures as a static
report (``static_report``: progress bars in their final state, tables whole, no machine's
directories). ``notebook_outputs`` is where a notebook writes; ``notebook_paths`` which notebooks
a run takes.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import nbformat

from psnlib.io import atomic_write_text
from psnlib.paths import check_writable
from psnlib.replication.records.paths import ROOT
from psnlib.replication.records.paths import figures_dir as default_figures

# The kernel's own log at ERROR: ipykernel 7 warns at every start that its localhost TCP sockets
# are unencrypted (17 identical lines per reproduction); cell output, the notebooks' warnings
# included, is not the kernel's log and still shows.
# And tables whole: pandas' display cuts a long table to "..." rows and columns, the papers'
# numbers among them; a published report shows every cell.
WHOLE_TABLES = (
    "import pandas; pandas.set_option('display.max_rows', None, 'display.max_columns', None, "
    "'display.max_colwidth', None, 'display.width', 250)"
)


KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", f"--IPKernelApp.exec_lines={WHOLE_TABLES}"]


def notebook_outputs(profile: str, figures_dir: str | Path | None = None) -> Path:
    """Where a notebook writes figures and tables: ``figures_dir``, by default the checkout's
    ``figures/<profile>/`` (so that changing ``profile`` is all it takes); created if missing. One
    that cannot be (a file there, or above it) or cannot be written is a ValueError naming it."""
    path = Path(figures_dir) if figures_dir else default_figures(profile)
    check_writable(path, "figures_dir")
    path.mkdir(parents=True, exist_ok=True)
    return path


def notebook_paths(notebooks_dir: Path, only: list[str] | None = None) -> list[Path]:
    """Notebooks in run order (by name); ``only`` keeps those whose stem contains any given word.
    A directory that does not exist or holds no notebook, or a word of ``only`` that matches
    none, is a ValueError naming it."""
    if not notebooks_dir.is_dir():
        raise ValueError(
            f"--notebooks {str(notebooks_dir)!r} is not a directory; pass the directory of the "
            f"notebooks (default: {ROOT / 'notebooks'})"
        )
    paths = sorted(notebooks_dir.glob("[0-9][0-9]*_*.ipynb"))  # 01_, 01b_, 02_, ...
    if not paths:
        raise ValueError(f"--notebooks {str(notebooks_dir)!r} holds no notebook (NN_name.ipynb)")
    if only:
        unmatched = [word for word in only if not any(word in p.stem for p in paths)]
        if unmatched:
            raise ValueError(
                f"--only {unmatched} matches no notebook in {notebooks_dir}; notebooks: "
                f"{', '.join(p.stem for p in paths)}"
            )
        paths = [p for p in paths if any(word in p.stem for word in only)]
    return paths


def run_notebook(path: Path, profile: str, figures_dir: Path, runs_dir: Path) -> Path:
    """Execute one notebook with papermill into ``runs_dir``; once it has written its metrics,
    publish the executed copy to ``figures_dir/notebooks/``. Returns the metrics JSON path."""
    import papermill as pm

    figures_dir.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = figures_dir / f"{path.stem}.json"
    pm.execute_notebook(
        str(path),
        str(runs_dir / path.name),
        parameters={
            "profile": profile,
            "figures_dir": str(figures_dir),
            "metrics_path": str(metrics_path),
        },
        cwd=str(path.parent),
        progress_bar=False,
        log_output=True,
        extra_arguments=KERNEL_ARGUMENTS,
    )
    if not metrics_path.exists():
        raise RuntimeError(f"{path.name} finished without writing its metrics to {metrics_path}")
    out = [figures_dir.parents[1]] if figures_dir.parent.name == "figures" else []  # --out
    executed = static_report(nbformat.read(runs_dir / path.name, as_version=4), ROOT, *out)
    atomic_write_text(figures_dir / "notebooks" / path.name, nbformat.writes(executed))
    return metrics_path


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def static_report(nb: nbformat.NotebookNode, *roots: Path) -> nbformat.NotebookNode:
    """An executed notebook as a static report: each progress-bar widget replaced by its final
    state as text (``final_bar``; the widget's own text fallback is its first state, "0%"),
    without the widget state (two thirds of the bytes of the executed notebooks at smoke), and
    each absolute path in ``roots`` (the checkout, then a ``--out`` directory) written as ``..``,
    as a default run's checkout reads from ``notebooks/``, where the notebooks run: the report
    names no machine's directories (``figures_dir = "../figures/cpu"`` either way)."""
    state = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).pop(WIDGET_VIEW, None)
            final = final_bar(state, view["model_id"]) if view else None
            if final is not None:
                output["data"]["text/plain"] = final
    if not roots:
        return nb
    text = nbformat.writes(nb)  # paths hold no character that JSON escapes
    for root in roots:
        text = text.replace(f"{root}/", "../")
    return nbformat.reads(text, as_version=4)


def final_bar(state: dict[str, Any], model_id: str, width: int = 10) -> str | None:
    """The text of a tqdm notebook bar (an HBox of HTML, FloatProgress, HTML) in the final state
    the kernel saved, as tqdm prints it: ``"policies: 100%|##########| 3/3 [00:00<00:00]"``
    with block characters; None if the widget is not such a bar or its state was not saved."""
    children = state.get(model_id, {}).get("state", {}).get("children", [])
    models = [state.get(c.removeprefix("IPY_MODEL_"), {}) for c in children]
    if [m.get("model_name") for m in models] != ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    left, bar, right = (m["state"] for m in models)
    done = (bar.get("value") or 0) / bar["max"] if bar.get("max") else 0.0
    filled = round(width * min(max(done, 0.0), 1.0))
    text = (
        f"{left.get('value', '')}|{'█' * filled}{' ' * (width - filled)}|{right.get('value', '')}"
    )
    return html.unescape(text).replace("\u2007", " ")
