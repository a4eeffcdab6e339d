"""Figures in one seaborn style, readable in print.

In a Jupyter kernel (JupyterLab, papermill) ``save_figure`` also shows the figure in the notebook,
once, where the cell saves it; elsewhere matplotlib draws headless (Agg), unless ``MPLBACKEND``
names a backend.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns


def in_kernel() -> bool:
    """Whether this process is a Jupyter (IPython) kernel."""
    ipython = sys.modules.get("IPython")  # never imported here: scripts stay free of it
    shell = ipython.get_ipython() if ipython else None
    return getattr(shell, "kernel", None) is not None


if not in_kernel() and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # scripts and tests: no GUI backend; a kernel keeps its inline one

import matplotlib.pyplot as plt  # noqa: E402

PALETTE = "colorblind"


def set_style() -> None:
    """The one style every psnlib figure uses."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, font_scale=1.2)
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight"})


@contextmanager
def _fixed_jitter(seed: int = 0) -> Iterator[None]:
    """seaborn draws a strip plot's jitter from NumPy's global generator: seed it for one plot, so
    the same records draw the same figure on every run, and give the caller its state back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _several_seeds(table: pd.DataFrame, by: list[str]) -> bool:
    return "seed" in table and bool((table.groupby(by)["seed"].nunique() > 1).any())


def plot_pass_at_k(
    curves: pd.DataFrame, hue: str = "policy", col: str | None = "benchmark", title: str = ""
) -> sns.FacetGrid:
    """pass@k (percent) against k on a log2 axis; ``curves`` has columns k, pass_at_k and ``hue``.

    With several seeds per line, the line is their mean and the band its standard error over
    seeds; with one, optional columns ``lo`` and ``hi`` (a bootstrap interval over problems) are
    drawn as the band.
    """
    set_style()
    data = curves.assign(pass_pct=100 * curves["pass_at_k"])
    seeds = _several_seeds(data, [hue, "k"] + ([col] if col else []))
    grid = sns.relplot(
        data=data,
        x="k",
        y="pass_pct",
        hue=hue,
        col=col,
        kind="line",
        marker="o",
        errorbar=("se", 1) if seeds else None,
        col_wrap=min(4, data[col].nunique()) if col else None,
        height=3.2,
        aspect=1.1,
        facet_kws={"sharey": False},
    )
    if not seeds and {"lo", "hi"} <= set(curves.columns):
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
    return _titled(grid, title)


def _titled(grid: sns.FacetGrid, title: str) -> sns.FacetGrid:
    grid.set_titles("{col_name}")
    if title:
        grid.figure.suptitle(title, y=1.03)
    return grid


def plot_bars(
    table: pd.DataFrame,
    x: str,
    y: str,
    col: str | None = None,
    hue: str | None = None,
    ylabel: str = "",
    title: str = "",
) -> sns.FacetGrid:
    """Bars of the mean of ``y`` per ``x`` (one row per seed: the error bar is the standard error
    over seeds), one panel per value of ``col``."""
    set_style()
    grid = sns.catplot(
        data=table,
        x=x,
        y=y,
        col=col,
        hue=hue or x,
        kind="bar",
        errorbar=("se", 1),
        col_wrap=min(4, table[col].nunique()) if col else None,
        height=3.4,
        aspect=1.1,
        sharey=False,
        legend=hue is not None,
    )
    grid.set_axis_labels("", ylabel or y)
    for ax in grid.axes.flat:
        ax.tick_params(axis="x", rotation=35)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    return _titled(grid, title)


def plot_pass_bars(
    curves: pd.DataFrame, ks: tuple[int, ...], benchmark: str, title: str = ""
) -> sns.FacetGrid:
    """pass@k (percent) per policy on one benchmark (e.g. the average), a panel per k in ``ks``."""
    rows = curves[(curves["benchmark"] == benchmark) & curves["k"].isin(ks)]
    table = rows.assign(pass_pct=100 * rows["pass_at_k"], k=rows["k"].map("pass@{}".format))
    return plot_bars(table, "policy", "pass_pct", col="k", ylabel="pass@k (%)", title=title)


def plot_frontier(
    curves: pd.DataFrame, k_high: int, benchmark: str, hue: str = "policy", title: str = ""
) -> plt.Figure:
    """Exploitation against exploration: pass@1 (x) and pass@``k_high`` (y), in percent, one
    point per policy and seed on one benchmark."""
    set_style()
    rows = curves[curves["benchmark"] == benchmark]
    wide = rows.pivot_table(index=[hue, "seed"], columns="k", values="pass_at_k").reset_index()
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    sns.scatterplot(
        x=100 * wide[1], y=100 * wide[k_high], hue=wide[hue], s=70, ax=ax, style=wide[hue]
    )
    ax.set(xlabel="pass@1 (%)", ylabel=f"pass@{k_high} (%)", title=title or benchmark)
    ax.legend(loc="best", fontsize="small")
    return fig


def plot_training_path(
    path: pd.DataFrame,
    arms: pd.DataFrame,
    k_high: int,
    title: str = "",
    col_wrap: int = 4,
) -> plt.Figure:
    """GRPO's training path against the arms, a panel per seed: the path's points (``path``: seed,
    step, pass1, passmax, in percent, ``psnlib.replication.analysis.frontier.points``) joined in
    order of step and labelled with it (0: the base policy; the last: GRPO's final policy), and each
    arm's point at that seed (``arms``: policy, seed, pass1, passmax), pass@1 (x) against
    pass@``k_high`` (y). A seed of ``arms`` without a path has no panel; axes are shared, so the
    panels read alike."""
    set_style()
    seeds = sorted(path["seed"].unique())
    if not seeds:
        raise ValueError("the training path has no seed")
    ncols = max(1, min(col_wrap, len(seeds)))
    nrows = -(-len(seeds) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.9 * ncols, 2.6 * nrows + 0.6), sharex=True, sharey=True
    )
    axes = [axes] if nrows * ncols == 1 else list(getattr(axes, "flat", axes))
    policies = list(dict.fromkeys(arms["policy"]))
    colors = dict(zip(policies, sns.color_palette(PALETTE, len(policies)), strict=True))
    markers = dict(zip(policies, "osD^vP*X<>", strict=False))
    for ax, seed in zip(axes, seeds, strict=False):
        steps = path[path["seed"] == seed].sort_values("step")
        ax.plot(steps["pass1"], steps["passmax"], color="0.45", linewidth=1.2, marker=".")
        for row in steps.itertuples():
            ax.annotate(
                str(row.step),
                (row.pass1, row.passmax),
                textcoords="offset points",
                xytext=(3, 3),
                fontsize="x-small",
                color="0.35",
            )
        for policy, rows in arms[arms["seed"] == seed].groupby("policy", sort=False):
            ax.scatter(
                rows["pass1"],
                rows["passmax"],
                color=colors[policy],
                marker=markers.get(policy, "o"),
                s=40,
                zorder=3,
                label=policy,
            )
        ax.set_title(f"seed {seed}", fontsize="small")
    for ax in axes[len(seeds) :]:
        ax.set_visible(False)
    for ax in axes[: len(seeds)]:
        ax.set(xlabel="", ylabel="")
    fig.supxlabel("pass@1 (%)")
    fig.supylabel(f"pass@{k_high} (%)")
    handles = [plt.Line2D([], [], color="0.45", marker=".", label="GRPO's path (step)")]
    handles += [
        plt.Line2D([], [], color=colors[p], marker=markers.get(p, "o"), linestyle="", label=p)
        for p in policies
    ]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_paired_differences(
    per_seed: pd.DataFrame, intervals: pd.DataFrame, title: str = ""
) -> sns.FacetGrid:
    """Paired differences "arm - reference", one panel per statistic: a dot per training seed
    (``psnlib.replication.analysis.summaries.paired_seed_differences``), and the mean over seeds
    with its paired-t interval (``difference_intervals``; only the mean where there is one seed);
    the dashed line is no difference."""
    set_style()
    pair = [f"{a} - {b}" for a, b in zip(per_seed["policy"], per_seed["reference"], strict=True)]
    data = per_seed.assign(pair=pair)
    order = list(dict.fromkeys(data["pair"]))
    with _fixed_jitter():
        grid = sns.catplot(
            data=data,
            x="difference",
            y="pair",
            col="statistic",
            kind="strip",
            order=order,
            color="0.55",
            alpha=0.7,
            jitter=0.15,
            height=1.2 + 0.45 * len(order),
            aspect=max(1.0, 4.2 / (1.2 + 0.45 * len(order))),
            sharex=False,
        )
    summary = intervals.assign(pair=intervals["policy"] + " - " + intervals["reference"])
    for name, ax in grid.axes_dict.items():
        rows = summary[summary["statistic"] == name].set_index("pair").reindex(order)
        y = range(len(order))
        ax.scatter(rows["mean"], y, marker="D", color="black", zorder=3, label="mean over seeds")
        shown = rows["lo"].notna().to_numpy()
        if shown.any():
            lo, mean, hi = (rows[c].to_numpy()[shown] for c in ("lo", "mean", "hi"))
            ax.errorbar(
                mean,
                [i for i, s in zip(y, shown, strict=True) if s],
                xerr=[mean - lo, hi - mean],
                fmt="none",
                ecolor="black",
                capsize=3,
                zorder=3,
            )
        ax.axvline(0.0, color="0.3", linewidth=0.8, linestyle="--")
        unit = rows["unit"].dropna().iloc[0] if rows["unit"].notna().any() else ""
        ax.set_xlabel(f"difference ({unit})" if unit else "difference")
    grid.set_ylabels("")
    return _titled(grid, title)


def plot_training(
    logs: pd.DataFrame,
    metrics: list[str],
    hue: str = "policy",
    smooth: int = 5,
    title: str = "",
) -> sns.FacetGrid:
    """Training curves: each logged metric (a panel) against the step, smoothed by a rolling
    mean over ``smooth`` steps; several seeds give a mean line and a standard-error band."""
    set_style()
    present = [m for m in metrics if m in logs.columns]
    if not present:
        raise ValueError(f"none of {metrics} was logged; columns: {list(logs.columns)}")
    keys = [hue, "seed", "step"]  # a tag column named "value" (a swept value) stays out
    long = logs[keys + present].melt(id_vars=keys, value_vars=present, var_name="metric")
    long["value"] = long.groupby([hue, "seed", "metric"])["value"].transform(
        lambda v: v.rolling(smooth, min_periods=1).mean()
    )
    grid = sns.relplot(
        data=long,
        x="step",
        y="value",
        hue=hue,
        col="metric",
        kind="line",
        errorbar=("se", 1),
        col_wrap=min(3, len(present)),
        height=3.0,
        aspect=1.2,
        facet_kws={"sharey": False},
    )
    grid.set_axis_labels("training step", "")
    return _titled(grid, title)


def save_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Save a table as CSV (the index kept when it is named), creating the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=any(name is not None for name in table.index.names))
    return path


def save_figure(fig_or_grid: plt.Figure | sns.axisgrid.Grid, path: str | Path) -> Path:
    """Save a figure (or seaborn grid) as PNG, creating the directory. In a Jupyter kernel, also
    show it in the notebook here, then close it so that the inline backend does not show it a
    second time at the end of the cell."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = getattr(fig_or_grid, "figure", fig_or_grid)
    fig.savefig(path)
    if in_kernel():
        from IPython.display import display

        display(fig)
        plt.close(fig)
    return path


def plot_tuning_curves(curves: pd.DataFrame, k_high: int) -> plt.Figure:
    """Each knob's tuning curve, a panel per knob (``curves``: knob, value, seed, pass1, passmax,
    ``psnlib.replication.analysis.tuning.curves``): the mean over seeds of pass@1 and of
    pass@``k_high`` against the knob's value (log scale), each seed a faint point, GRPO's means at
    the same seeds as dashed lines."""
    set_style()
    knobs = [k for k in dict.fromkeys(curves["knob"]) if k != "GRPO"]
    if not knobs:
        raise ValueError("the tuning table has no knob")
    grpo = curves[curves["knob"] == "GRPO"]
    fig, axes = plt.subplots(1, len(knobs), figsize=(3.4 * len(knobs), 3.0), sharey=True)
    axes = [axes] if len(knobs) == 1 else list(axes)
    for ax, knob in zip(axes, knobs, strict=True):
        mine = curves[curves["knob"] == knob]
        for column, label, color in (
            ("pass1", "pass@1", "C0"),
            ("passmax", f"pass@{k_high}", "C1"),
        ):
            means = mine.groupby("value")[column].mean()
            ax.plot(means.index, means.values, marker="o", color=color, label=label)
            ax.scatter(mine["value"], mine[column], s=8, color=color, alpha=0.3)
            ax.axhline(grpo[column].mean(), color=color, linestyle="--", linewidth=0.9)
        ax.set_xscale("log")
        ax.set_xticks(sorted(mine["value"].unique()))
        ax.set_xticklabels([f"{v:g}" for v in sorted(mine["value"].unique())])
        ax.minorticks_off()
        ax.set_title(knob)
        ax.set_xlabel("value")
    axes[0].set_ylabel("percent (dashed: GRPO)")
    axes[-1].legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig
