"""Every notebook runs headless with papermill at the smoke profile and writes sane metrics."""

import json
from pathlib import Path

import pytest

from psnlib.reproduce import notebook_paths, run_notebook

NOTEBOOKS = notebook_paths(Path(__file__).resolve().parent.parent / "notebooks")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


def test_notebooks_are_stored_without_outputs():
    import nbformat

    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one 'parameters' cell"
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), path.name


def _pass_at_k_tables(obj):
    """Every {"k": value} mapping with integer keys found in the metrics."""
    if isinstance(obj, dict):
        if obj and all(str(k).isdigit() for k in obj):
            yield {int(k): v for k, v in obj.items()}
        for v in obj.values():
            yield from _pass_at_k_tables(v)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_at_smoke_profile(path, tmp_path, monkeypatch):
    monkeypatch.setenv("PSNLIB_DATA", str(tmp_path / "data"))  # fresh caches: builds from scratch
    metrics_path = run_notebook(path, "smoke", tmp_path / "figures", tmp_path / "runs")
    metrics = json.loads(metrics_path.read_text())
    assert metrics["profile"] == "smoke"
    tables = list(_pass_at_k_tables(metrics))
    assert tables, "metrics hold no pass@k table"
    for table in tables:
        values = [table[k] for k in sorted(table)]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert all(a <= b + 1e-12 for a, b in zip(values, values[1:], strict=False))
    assert list((tmp_path / "figures").glob("*.png")), "no figure written"
