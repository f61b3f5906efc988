"""Cells -> figures (seaborn, PNG)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fdabench.cell.reading import read_cells
from fdabench.core.families import FAMILIES
from fdabench.core.io import atomic_path
from fdabench.core.metrics import PERCENT_METRICS
from fdabench.report.style import REFERENCE_METHODS, MethodStyle, families_in_order, method_styles
from fdabench.report.tables import AVERAGE

#: The published value of a cell's row, from its recorded configuration, at a target (`AVERAGE`: the published
#: average over the targets), or None. The report knows no paper: the command line passes the reproduction package's
#: (`fdabench.reproduction.lookups.published_mark`); without one a figure marks no published value.
Published = Callable[[Mapping[str, Any], str], float | None]


def rounds_frame(paths: Iterable[str]) -> pd.DataFrame:
    """One row per (cell, round): identity, the method's family, round, phase and the cell's metric."""
    frames = []
    for cell in read_cells(paths).values():
        metric = cell["metric"]
        rows = pd.DataFrame(cell["rounds"])
        frames.append(
            pd.DataFrame(
                {
                    **{key: cell["cell"][key] for key in ("experiment", "dataset", "method", "target", "seed")},
                    "family": cell.get("family"),
                    "round": rows["round"] + 1,
                    "phase": rows["phase"],
                    "metric": metric,
                    "value": rows[metric] * (100 if metric in PERCENT_METRICS else 1),
                }
            )
        )
    if not frames:
        raise ValueError("no cells to plot")
    return pd.concat(frames, ignore_index=True)


def save_figure(figure, output: str | Path) -> None:
    with atomic_path(output) as tmp:
        figure.savefig(tmp, dpi=110, format="png", bbox_inches="tight")


def _save_and_close(figure, output: str | Path) -> None:
    save_figure(figure, output)
    _pyplot().close(figure)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def metric_label(metric: str) -> str:
    return (
        f"target test {metric if metric == 'accuracy' else metric.upper()} (%)"
        if metric in PERCENT_METRICS
        else f"target test {metric}"
    )


def frame_families(frame: pd.DataFrame, key: str = "method") -> dict[str, str]:
    """`key` (method, or algorithm) -> family of a cells frame's rows, in their order (the styles of a figure
    drawn on its own); a clear error for cells that ran before cells recorded their family."""
    if frame["family"].isna().any():
        raise ValueError(
            "cells of methods "
            + ", ".join(dict.fromkeys(frame.loc[frame["family"].isna(), "method"]))
            + " record no method family (they ran before cells did); rerun them, or give the figure the suite's "
            "methods and families (fdabench figure --methods)"
        )
    return dict(zip(frame[key], frame["family"], strict=True))


#: the fewest seeds a ±1 sd band is drawn from: with fewer, the band of two runs is their spread twice over and
#: hides the lines, so each seed is drawn as a faint line under the mean instead
BAND_SEEDS = 3


def _line(
    axis,
    frame: pd.DataFrame,
    method: str,
    style: MethodStyle | None,
    y: str = "value",
    faint_seeds: bool = True,
    **overrides,
) -> None:
    """Mean over seeds of one method's per-round values (column `y`): with a ±1 sd band from BAND_SEEDS seeds on,
    with fewer each seed as a faint line (gid "seed") of the same colour unless not `faint_seeds`."""
    import seaborn as sns

    kwargs = {**({"color": style.colour, "dashes": style.dashes, "linewidth": 1.4} if style else {}), **overrides}
    seeds = frame["seed"].nunique()
    sns.lineplot(
        data=frame,
        x="round",
        y=y,
        errorbar="sd" if seeds >= BAND_SEEDS else None,
        ax=axis,
        legend=False,
        **kwargs,
        label=method,
    )
    if faint_seeds and 1 < seeds < BAND_SEEDS:
        for _, rows in frame.groupby("seed", sort=True):
            axis.plot(rows["round"], rows[y], color=kwargs.get("color"), linewidth=0.6, alpha=0.35, gid="seed")


def _whole_rounds(axis) -> None:
    """Ticks of a round axis at whole rounds only (no round 2.5)."""
    from matplotlib.ticker import MaxNLocator

    axis.xaxis.set_major_locator(MaxNLocator(integer=True))


def natural_order(names: Iterable[str]) -> list[str]:
    """`names` sorted with the numbers in them compared as numbers (0, 15, 30 before 75; noise0.4 before
    noise0.6; s2 before s10), the rest alphabetically."""
    import re

    def key(name: str) -> tuple:
        pieces = re.split(r"(-?\d+(?:\.\d+)?)", str(name))
        return tuple(
            (0, float(piece), "") if index % 2 else (1, 0.0, piece) for index, piece in enumerate(pieces) if piece
        )

    return sorted(names, key=key)


def plot_rounds(
    paths: Iterable[str], output: str | Path, title: str | None = None, families: Mapping[str, str] | None = None
) -> None:
    """`draw_rounds`, saved as PNG."""
    _save_and_close(draw_rounds(paths, title, families), output)


def draw_rounds(paths: Iterable[str], title: str | None = None, families: Mapping[str, str] | None = None):
    """Target test metric per round (mean over seeds, band ±1 sd from BAND_SEEDS seeds on, else each seed a faint
    line): one row of panels per method family, one column per target, each panel over its own rounds (a method
    with extra rounds, Finetune_Offline's fine-tuning, widens only its panels) at whole-round ticks. Colours and
    dashes follow `method_styles(families)` (the suite's methods in table order; default: the cells' own), so a
    method looks the same in every figure of the suite; other families' rows repeat the REFERENCE_METHODS as thin
    grey lines (their means only); each row's legend lists its methods in table order."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    paths = list(paths)
    frame = rounds_frame(paths)
    metric = frame["metric"].iloc[0]
    styles = method_styles(families or frame_families(frame))
    families = families_in_order(styles, dict.fromkeys(frame["method"]))
    references = [method for method in REFERENCE_METHODS if method in set(frame["method"])]
    targets = list(dict.fromkeys(frame["target"]))
    figure, axes = plt.subplots(
        len(families),
        len(targets),
        figsize=(2.6 * len(targets) + 2.4, 2.0 * len(families) + 0.6),
        sharey=metric in PERCENT_METRICS,
        squeeze=False,
    )
    by_cell = {key: rows for key, rows in frame.groupby(["method", "target"], sort=False)}
    for row, (family, methods) in enumerate(families.items()):
        for column, target in enumerate(targets):
            axis = axes[row][column]
            if family != "baseline":
                for method in (m for m in references if (m, target) in by_cell):
                    _line(axis, by_cell[(method, target)], method, None, faint_seeds=False, color="0.72", linewidth=0.8)
            for method in methods:
                if (method, target) in by_cell:
                    _line(axis, by_cell[(method, target)], method, styles[method])
            if metric not in PERCENT_METRICS:
                axis.set_yscale("log")
            _whole_rounds(axis)
            axis.set_xlabel("round" if row == len(families) - 1 else "")
            axis.set_ylabel(f"{FAMILIES[family]}\n{metric_label(metric)}" if column == 0 else "", fontsize=8)
            if row == 0:
                axis.set_title(f"target {target}", fontsize=9)
            axis.tick_params(labelsize=7)
        handles = [
            Line2D([], [], color=styles[m].colour, dashes=styles[m].dashes, linewidth=1.4, label=m) for m in methods
        ]
        if family != "baseline" and references:
            handles.append(Line2D([], [], color="0.72", linewidth=0.8, label=" / ".join(references)))
        axes[row][-1].legend(handles=handles, loc="center left", bbox_to_anchor=(1.03, 0.5), fontsize=7, frameon=False)
    if title:
        figure.suptitle(title, y=1.0)
    figure.tight_layout()
    return figure


def betas_frame(paths: Iterable[str]) -> pd.DataFrame:
    """One row per (cell, round, source) for cells whose rounds log auto-weighting betas."""
    rows = []
    for cell in read_cells(paths).values():
        sources = cell.get("sources") or []
        for record in cell["rounds"]:
            for index, beta in enumerate(record.get("betas") or []):
                rows.append(
                    {
                        **{key: cell["cell"][key] for key in ("experiment", "method", "target", "seed")},
                        "round": record["round"] + 1,
                        "source": sources[index] if index < len(sources) else f"source {index}",
                        "beta": beta,
                    }
                )
    return pd.DataFrame(rows)


def plot_betas(paths: Iterable[str], output: str | Path, title: str | None = None) -> None:
    """`draw_betas`, saved as PNG."""
    _save_and_close(draw_betas(paths, title), output)


def draw_betas(paths: Iterable[str], title: str | None = None):
    """Auto-weighting β per source over rounds (mean over seeds, band ±1 sd from BAND_SEEDS seeds on, else each seed
    a faint line): one panel per target (columns) and method (rows), one line per source, sources in
    `natural_order` in the legend and the palette; whole-round ticks (FedGP paper, Figures 6-11)."""
    import seaborn as sns
    from matplotlib.lines import Line2D

    plt = _pyplot()
    frame = betas_frame(paths)
    if frame.empty:
        raise ValueError("none of these cells logs betas (no auto-weighted method)")
    methods, targets = list(dict.fromkeys(frame["method"])), list(dict.fromkeys(frame["target"]))
    sources = natural_order(dict.fromkeys(frame["source"]))
    colours = dict(zip(sources, sns.color_palette(n_colors=len(sources)), strict=True))
    figure, axes = plt.subplots(
        len(methods),
        len(targets),
        figsize=(2.9 * len(targets) + 1.4, 2.2 * len(methods) + 0.4),
        sharey=True,
        squeeze=False,
    )
    by_panel = {key: rows for key, rows in frame.groupby(["method", "target", "source"], sort=False)}
    for row, method in enumerate(methods):
        for column, target in enumerate(targets):
            axis = axes[row][column]
            for source in sources:
                if (method, target, source) in by_panel:
                    _line(axis, by_panel[(method, target, source)], source, None, y="beta", color=colours[source])
            _whole_rounds(axis)
            axis.set_title(f"{method} · target {target}", fontsize=9)
            axis.set_xlabel("round" if row == len(methods) - 1 else "")
            axis.set_ylabel("β" if column == 0 else "")
    handles = [Line2D([], [], color=colours[source], label=source) for source in sources]
    axes[0][-1].legend(
        handles=handles, title="source", loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=7, frameon=False
    )
    if title:
        figure.suptitle(title, y=1.0)
    figure.tight_layout()
    return figure


def _level(target: str) -> float:
    """The numeric level in a target name: noise0.4 -> 0.4, eta0.15 -> 0.15, s3-n90 -> 3."""
    import re

    match = re.search(r"-?\d+(\.\d+)?", target)
    if match is None:
        raise ValueError(f"target {target!r} carries no numeric level")
    return float(match.group())


def final_frame(paths: Iterable[str], published: Published | None = None) -> pd.DataFrame:
    """One row per cell: identity, the fixed β/α it ran with, its final metric (accuracy and AUC in %) and the
    published value of its row and the published average over targets where `published` gives them (already in
    %)."""
    rows = []
    for cell in read_cells(paths).values():
        config = cell["config"]
        percent = cell["metric"] in PERCENT_METRICS
        rows.append(
            {
                "experiment": config["experiment"],
                "method": config["method"],
                "algorithm": config["algorithm"],
                "family": cell.get("family"),
                "target": config["target"],
                "seed": config["seed"],
                "beta": config["hparams"].get("beta"),
                "alpha": config["hparams"].get("alpha"),
                "metric": cell["metric"],
                "value": cell["final"] * (100 if percent else 1),
                "published": published(config, config["target"]) if published else None,
                "published_average": published(config, AVERAGE) if published else None,
            }
        )
    return pd.DataFrame(rows)


def with_average(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` plus target AVERAGE rows: per (experiment, method, seed) the mean over the experiment's targets
    (seeds missing a target left out, as in the tables), with the published average where one exists; none for an
    experiment with one target, whose average is that target again."""
    targets = frame.groupby("experiment")["target"].nunique()
    averages = []
    for (experiment, _method, _seed), rows in frame.groupby(["experiment", "method", "seed"], sort=False):
        if targets[experiment] < 2 or rows["target"].nunique() < targets[experiment]:
            continue
        first = rows.iloc[0]
        averages.append(
            {
                **first.to_dict(),
                "target": AVERAGE,
                "value": rows["value"].mean(),
                "published": first["published_average"],
            }
        )
    return pd.concat([frame, pd.DataFrame(averages, columns=frame.columns)], ignore_index=True)


def plot_final(
    paths: Iterable[str],
    output: str | Path,
    title: str | None = None,
    families: Mapping[str, str] | None = None,
    published: Published | None = None,
) -> None:
    """`draw_final`, saved as PNG."""
    _save_and_close(draw_final(paths, title, families, published), output)


def draw_final(
    paths: Iterable[str],
    title: str | None = None,
    families: Mapping[str, str] | None = None,
    published: Published | None = None,
):
    """A table at a glance: the final metric per method (rows, in table order) and target (one panel per
    experiment and target, then Avg where the experiment has two targets or more), every seed as a dot, the mean
    over seeds as a bar "|" with ±1 sd, and the published value as a black diamond where `published` gives one.
    Colours follow `method_styles(families)`."""
    import numpy as np
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    plt = _pyplot()
    paths = list(paths)
    frame = with_average(final_frame(paths, published))
    metric = frame["metric"].iloc[0]
    styles = method_styles(families or frame_families(frame))
    methods = list(dict.fromkeys(frame["method"]))
    experiments = list(dict.fromkeys(frame["experiment"]))
    panels = {e: list(dict.fromkeys(frame.loc[frame["experiment"] == e, "target"])) for e in experiments}
    columns = max(len(targets) for targets in panels.values())
    figure, axes = plt.subplots(
        len(experiments),
        columns,
        figsize=(2.1 * columns + 1.6, 0.22 * len(methods) * len(experiments) + 1.0 * len(experiments) + 0.4),
        sharey=True,
        squeeze=False,
    )
    positions = {method: index for index, method in enumerate(methods)}
    has_published = frame["published"].notna().any()
    for row, experiment in enumerate(experiments):
        for column in range(columns):
            axis = axes[row][column]
            if column >= len(panels[experiment]):
                axis.set_visible(False)
                continue
            target = panels[experiment][column]
            rows = frame[(frame["experiment"] == experiment) & (frame["target"] == target)]
            summary = rows.groupby("method", sort=False)["value"].agg(["mean", "std"])
            for method, stats in summary.iterrows():
                axis.errorbar(
                    stats["mean"],
                    positions[method],
                    xerr=None if np.isnan(stats["std"]) else stats["std"],
                    color=styles[method].colour,
                    marker="|",
                    markersize=11,
                    markeredgewidth=2,
                    capsize=2,
                    linewidth=1,
                )
            axis.scatter(
                rows["value"],
                rows["method"].map(positions),
                s=8,
                color=[styles[m].colour for m in rows["method"]],
                alpha=0.6,
                zorder=3,
                gid="seeds",
            )
            marked = rows.dropna(subset=["published"]).drop_duplicates("method")
            axis.scatter(
                marked["published"],
                marked["method"].map(positions),
                marker="D",
                s=18,
                c="black",
                zorder=4,
                gid="published",
            )
            if metric not in PERCENT_METRICS:
                axis.set_xscale("log")
                axis.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
                axis.xaxis.set_major_formatter(FormatStrFormatter("%g"))
                axis.xaxis.set_minor_formatter(NullFormatter())
            axis.set_title(f"{experiment}: {target}" if len(experiments) > 1 else f"target {target}", fontsize=8)
            axis.tick_params(labelsize=7)
            axis.grid(axis="x", linewidth=0.3)
            axis.set_xlabel(metric_label(metric) if row == len(experiments) - 1 else "", fontsize=7)
    axes[0][0].set_yticks(range(len(methods)), methods)
    axes[0][0].set_ylim(len(methods) - 0.5, -0.5)
    note = "|: mean over seeds (±1 sd); dots: seeds" + ("; ◆: published" if has_published else "")
    figure.suptitle(f"{title}\n{note}" if title else note, fontsize=9)
    figure.tight_layout()
    return figure


def plot_sweep(
    paths: Iterable[str],
    output: str | Path,
    kind: str,
    title: str | None = None,
    families: Mapping[str, str] | None = None,
) -> None:
    """kind "shift": final metric against the level in the target name (noise std, η), one line per method,
    one panel per experiment; kind "beta" ("alpha"): final metric against the hyper-parameter β (α) for
    every algorithm with fixed values of it, one panel per target."""
    import seaborn as sns

    plt = _pyplot()
    paths = list(paths)
    frame = final_frame(paths)
    metric = frame["metric"].iloc[0]
    label = metric_label(metric)
    if kind == "shift":
        styles = method_styles(families or frame_families(frame))
        methods = list(dict.fromkeys(frame["method"]))
        frame["level"] = frame["target"].map(_level)
        grid = sns.relplot(
            data=frame,
            x="level",
            y="value",
            hue="method",
            hue_order=methods,
            palette={method: styles[method].colour for method in methods},
            style="method",
            style_order=methods,
            dashes={method: styles[method].dashes for method in methods},
            col="experiment",
            kind="line",
            marker="o",
            errorbar="sd",
            height=3,
            aspect=1.3,
        )
        grid.set_axis_labels("shift level (from the target name)", label)
    elif kind in ("beta", "alpha"):
        frame = frame[frame[kind].notna()]
        if frame.empty:
            raise ValueError(f"no cells with a fixed {kind} to plot")
        algorithms_present = list(dict.fromkeys(frame["algorithm"]))
        styles = method_styles(frame_families(frame, "algorithm"))
        grid = sns.relplot(
            data=frame,
            x=kind,
            y="value",
            hue="algorithm",
            hue_order=algorithms_present,
            palette={algorithm: styles[algorithm].colour for algorithm in algorithms_present},
            col="target",
            kind="line",
            marker="o",
            errorbar="sd",
            height=3,
            aspect=1.2,
        )
        # β weights the source term in every fdabench rule (and in the authors' code); the weakly-supervised
        # paper's Eq. 7/9 weight the target term by β, so its Figure 4 reads mirrored (β_paper = 1 − β here).
        grid.set_axis_labels(
            {"beta": "β (weight of the source term)", "alpha": "α (weight of the auxiliary losses)"}[kind], label
        )
    else:
        raise ValueError(f"unknown figure kind {kind!r}; allowed: shift, beta, alpha")
    if title:
        grid.figure.suptitle(title, y=1.03)
    save_figure(grid.figure, output)
    plt.close(grid.figure)
