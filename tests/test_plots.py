"""Every figure draws from a tidy table and saves as PNG; tables save as CSV. A notebook shows a
saved figure once; scripts draw headless."""

import os
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from psnlib.replication import plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def curves(seeds=(0, 1)) -> pd.DataFrame:
    rows = [
        {"policy": p, "seed": s, "benchmark": b, "k": k}
        | {"pass_at_k": min(1.0, 0.1 * np.log2(2 * k) + 0.05 * s), "lo": 0.0, "hi": 1.0}
        for p in ("GRPO", "PSN")
        for s in seeds
        for b in ("l1", "average")
        for k in (1, 2, 4, 8)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seeds", [(0,), (0, 1)])
def test_pass_at_k_panels_per_benchmark_with_bands(seeds, tmp_path):
    grid = plots.plot_pass_at_k(curves(seeds), title="t")
    assert len(grid.axes.flat) == 2
    assert grid.axes.flat[0].get_xscale() == "log"
    path = plots.save_figure(grid, tmp_path / "sub" / "passk.png")
    assert path.exists() and path.stat().st_size > 0


def test_bars_frontier_and_training(tmp_path):
    grid = plots.plot_pass_bars(curves(), (1, 8), "average")
    assert [ax.get_title() for ax in grid.axes.flat] == ["pass@1", "pass@8"]
    fig = plots.plot_frontier(curves(), 8, "average")
    assert fig.axes[0].get_ylabel() == "pass@8 (%)"
    logs = pd.DataFrame(
        {"policy": "PSN", "seed": [0] * 4 + [1] * 4, "step": [1, 2, 3, 4] * 2}
        | {"reward": np.linspace(0, 1, 8), "entropy": np.linspace(2, 1, 8)}
    )
    grid = plots.plot_training(logs, ["reward", "entropy", "not_logged"])
    assert [ax.get_title() for ax in grid.axes.flat] == ["reward", "entropy"]
    with pytest.raises(ValueError, match="none of"):
        plots.plot_training(logs, ["psn/sigma"])
    for name, figure in {"bars": grid, "frontier": fig}.items():
        assert plots.save_figure(figure, tmp_path / f"{name}.png").exists()


def test_tables_save_with_a_named_index_only(tmp_path):
    plain = plots.save_table(pd.DataFrame({"a": [1, 2]}), tmp_path / "plain.csv")
    assert plain.read_text().splitlines()[0] == "a"
    named = pd.DataFrame({"a": [1]}, index=pd.Index(["x"], name="policy"))
    assert plots.save_table(named, tmp_path / "named.csv").read_text().startswith("policy,a")


def test_in_a_kernel_a_saved_figure_is_shown_once_and_closed(tmp_path, monkeypatch):
    """Shown where the cell saves it; closed, so the inline backend does not show it again."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    monkeypatch.setattr(plots, "in_kernel", lambda: True)
    grid = plots.plot_pass_at_k(curves())
    assert plots.save_figure(grid, tmp_path / "passk.png").exists()
    assert shown == [grid.figure]
    assert not plt.fignum_exists(grid.figure.number)


def test_outside_a_kernel_nothing_is_shown_and_the_backend_is_headless(tmp_path, monkeypatch):
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *_: pytest.fail("displayed"))
    grid = plots.plot_pass_at_k(curves())
    plots.save_figure(grid, tmp_path / "passk.png")
    assert not plots.in_kernel() and plt.fignum_exists(grid.figure.number)


def test_scripts_draw_headless_and_import_without_warnings():
    code = "import psnlib.replication.plots, matplotlib; print(matplotlib.get_backend())"
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], env=environ, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().lower() == "agg"
