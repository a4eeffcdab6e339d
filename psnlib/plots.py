"""Figures in one seaborn style, readable in print."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless by default; notebooks still display the returned figures

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

PALETTE = "colorblind"


def set_style() -> None:
    """The one style every psnlib figure uses."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, font_scale=1.2)
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight"})


def plot_pass_at_k(
    curves: pd.DataFrame, hue: str = "policy", col: str | None = "benchmark", title: str = ""
) -> sns.FacetGrid:
    """pass@k (percent) against k on a log2 axis; ``curves`` has columns k, pass_at_k and ``hue``.

    Optional columns ``lo`` and ``hi`` (a confidence interval) are drawn as bands.
    """
    set_style()
    data = curves.assign(pass_pct=100 * curves["pass_at_k"])
    grid = sns.relplot(
        data=data,
        x="k",
        y="pass_pct",
        hue=hue,
        col=col,
        kind="line",
        marker="o",
        col_wrap=4 if col else None,
        height=3.2,
        aspect=1.1,
        facet_kws={"sharey": False},
    )
    if {"lo", "hi"} <= set(curves.columns):
        colors = dict(zip(data[hue].unique(), sns.color_palette(PALETTE), strict=False))
        for key, ax in grid.axes_dict.items() if col else [(None, grid.ax)]:
            part = data if key is None else data[data[col] == key]
            for name, rows in part.groupby(hue):
                ax.fill_between(
                    rows["k"],
                    100 * rows["lo"],
                    100 * rows["hi"],
                    color=colors[name],
                    alpha=0.2,
                    linewidth=0,
                )
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
    grid.set_axis_labels("k (samples)", "pass@k (%)")
    if title:
        grid.figure.suptitle(title, y=1.02)
    return grid


def save_figure(fig_or_grid, path: str | Path) -> Path:
    """Save a figure (or seaborn grid) as PNG, creating the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = getattr(fig_or_grid, "figure", fig_or_grid)
    fig.savefig(path)
    return path
