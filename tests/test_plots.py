"""Every figure draws from a tidy table and saves as PNG; tables save as CSV. A notebook shows a
saved figure once; scripts draw headless."""

import os
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from psnlib.replication.report import plots


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
    code = "import psnlib.replication.report.plots, matplotlib; print(matplotlib.get_backend())"
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], env=environ, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().lower() == "agg"


def test_the_training_path_has_a_panel_per_seed_with_the_arms_points(tmp_path):
    path = pd.DataFrame(
        {"seed": [0, 0, 0, 1, 1, 1], "step": [0, 2, 4] * 2}
        | {"pass1": [5.0, 8.0, 10.0, 5.0, 9.0, 11.0], "passmax": [80.0, 70.0, 60.0] * 2}
    )
    arms = pd.DataFrame(
        {"policy": ["PSN", "PSN", "PSN released code"], "seed": [0, 1, 1]}
        | {"pass1": [9.0, 10.0, 8.0], "passmax": [72.0, 66.0, 75.0]}
    )
    fig = plots.plot_training_path(path, arms, 16, title="t")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["seed 0", "seed 1"]
    # seed 1: the path's line, then one point per arm at that seed
    assert shown[1].lines[0].get_xydata().tolist() == [[5.0, 80.0], [9.0, 70.0], [11.0, 60.0]]
    assert len(shown[1].collections) == 2 and len(shown[0].collections) == 1
    assert [t.get_text() for t in shown[0].texts] == ["0", "2", "4"]  # the steps, labelled
    assert fig.get_supylabel() == "pass@16 (%)"
    assert plots.save_figure(fig, tmp_path / "path.png").exists()
    many = pd.concat([path.assign(seed=path["seed"] + 2 * i) for i in range(3)])
    fig = plots.plot_training_path(many, arms, 16)  # 6 seeds: 2 rows of 4, two panels hidden
    assert sum(ax.get_visible() for ax in fig.axes) == 6 and len(fig.axes) == 8
    with pytest.raises(ValueError, match="no seed"):
        plots.plot_training_path(path.iloc[:0], arms, 16)
