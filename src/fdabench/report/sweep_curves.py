"""One figure per selection rule: the learning curves of the draws the rule selected (target test metric per
round, mean over trials with a ±1 sd band; a panel per target, a line per method, in the suite's method styles)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdabench.core.metrics import PERCENT_METRICS
from fdabench.report.figures import _pyplot, _save_and_close, metric_label
from fdabench.report.style import method_styles


def selected_rounds(cells: list[dict[str, Any]], selected: pd.DataFrame) -> pd.DataFrame:
    """One row per (selected cell, round): experiment, method, target, trial, round (from 1), the test metric (in
    the table's unit; k-fold: every fold's cell, averaged by the plot)."""
    chosen = {
        (row.experiment, row.method, str(row.target), int(row.trial)): int(row.draw) for row in selected.itertuples()
    }
    rows = []
    for cell in cells:
        config = cell["config"]
        sweep = config.get("sweep", {})
        key = (config["experiment"], sweep.get("method", config["method"]), str(config["target"]), int(config["seed"]))
        if chosen.get(key) != int(sweep.get("draw", 0)):
            continue
        metric = cell["metric"]
        scale = 100 if metric in PERCENT_METRICS else 1
        for record in cell["rounds"]:
            rows.append(
                {
                    "experiment": key[0],
                    "method": key[1],
                    "target": key[2],
                    "trial": key[3],
                    "family": cell.get("family"),
                    "round": int(record["round"]) + 1,
                    "metric": metric,
                    "value": scale * record[metric],
                }
            )
    return pd.DataFrame(rows)


def plot_selected_curves(cells: list[dict[str, Any]], selected: pd.DataFrame, output: str, title: str) -> None:
    """The selected draws' learning curves, saved as PNG."""
    import seaborn as sns

    plt = _pyplot()
    frame = selected_rounds(cells, selected)
    panels = list(dict.fromkeys(zip(frame["experiment"], frame["target"])))
    several = frame["experiment"].nunique() > 1
    methods = list(dict.fromkeys(frame["method"]))
    families = dict(zip(frame["method"], frame["family"]))
    styles = method_styles(families) if all(families.values()) else {}
    figure, axes = plt.subplots(
        1, len(panels), figsize=(2.8 * len(panels) + 2.2, 2.8), sharey=frame["metric"].iloc[0] in PERCENT_METRICS
    )
    axes = [axes] if len(panels) == 1 else list(axes)
    for axis, (experiment, target) in zip(axes, panels):
        part = frame[(frame["experiment"] == experiment) & (frame["target"] == target)]
        for index, method in enumerate(methods):
            lines = part[part["method"] == method]
            if lines.empty:
                continue
            style = styles.get(method)
            colour = style.colour if style else sns.color_palette(n_colors=len(methods))[index]
            sns.lineplot(
                data=lines,
                x="round",
                y="value",
                errorbar="sd",
                ax=axis,
                color=colour,
                linewidth=1.3,
                label=method,
                **({"dashes": style.dashes} if style else {}),
            )
        axis.set_title(f"{experiment} {target}" if several else f"target {target}", fontsize=9)
        axis.set_ylabel(metric_label(frame["metric"].iloc[0]) if axis is axes[0] else "", fontsize=8)
        axis.tick_params(labelsize=7)
        if axis.get_legend():
            axis.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    axes[-1].legend(handles, labels, loc="center left", bbox_to_anchor=(1.03, 0.5), fontsize=7, frameon=False)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    _save_and_close(figure, output)
