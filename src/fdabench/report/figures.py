"""Cells -> figures (seaborn, PNG)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from fdabench.cells import read_cell
from fdabench.io import atomic_path


def rounds_frame(paths: Iterable[str]) -> pd.DataFrame:
    """One row per (cell, round): identity, round, phase and the cell's metric."""
    frames = []
    for path in paths:
        cell = read_cell(path)
        metric = cell["metric"]
        rows = pd.DataFrame(cell["rounds"])
        frames.append(
            pd.DataFrame(
                {
                    **{key: cell["cell"][key] for key in ("experiment", "dataset", "method", "target", "seed")},
                    "round": rows["round"] + 1,
                    "phase": rows["phase"],
                    "metric": metric,
                    "value": rows[metric] * (100 if metric == "accuracy" else 1),
                }
            )
        )
    if not frames:
        raise ValueError("no cells to plot")
    return pd.concat(frames, ignore_index=True)


def save_figure(figure, output: str | Path) -> None:
    with atomic_path(output) as tmp:
        figure.savefig(tmp, dpi=110, format="png", bbox_inches="tight")


def plot_rounds(paths: Iterable[str], output: str | Path, title: str | None = None) -> None:
    """Target test metric per round, one panel per target, one line per method (band: ±1 sd over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = rounds_frame(paths)
    metric = frame["metric"].iloc[0]
    targets = list(dict.fromkeys(frame["target"]))
    grid = sns.relplot(
        data=frame,
        x="round",
        y="value",
        hue="method",
        col="target",
        col_order=targets,
        col_wrap=min(3, len(targets)),
        kind="line",
        errorbar="sd",
        height=2.6,
        aspect=1.3,
        facet_kws={"sharey": metric == "accuracy"},
    )
    grid.set_axis_labels("round", "target test accuracy (%)" if metric == "accuracy" else f"target test {metric}")
    grid.set_titles(col_template="target {col_name}")
    if metric != "accuracy":
        grid.set(yscale="log")
    if title:
        grid.figure.suptitle(title, y=1.02)
    save_figure(grid.figure, output)
    plt.close(grid.figure)


def betas_frame(paths: Iterable[str]) -> pd.DataFrame:
    """One row per (cell, round, source) for cells whose rounds log auto-weighting betas."""
    rows = []
    for path in paths:
        cell = read_cell(path)
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
    """Auto-weighting β per source over rounds (mean over seeds, band ±1 sd): one panel per target
    (columns) and method (rows), one line per source (FedGP paper, Figures 6-11)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = betas_frame(paths)
    if frame.empty:
        raise ValueError("none of these cells logs betas (no auto-weighted method)")
    grid = sns.relplot(
        data=frame,
        x="round",
        y="beta",
        hue="source",
        col="target",
        col_order=list(dict.fromkeys(frame["target"])),
        row="method",
        row_order=list(dict.fromkeys(frame["method"])),
        kind="line",
        errorbar="sd",
        height=2.2,
        aspect=1.3,
    )
    grid.set_axis_labels("round", "β")
    grid.set_titles(row_template="{row_name}", col_template="target {col_name}")
    if title:
        grid.figure.suptitle(title, y=1.02)
    save_figure(grid.figure, output)
    plt.close(grid.figure)


def _level(target: str) -> float:
    """The numeric level in a target name: noise0.4 -> 0.4, eta0.15 -> 0.15, s3-n90 -> 3."""
    import re

    match = re.search(r"-?\d+(\.\d+)?", target)
    if match is None:
        raise ValueError(f"target {target!r} carries no numeric level")
    return float(match.group())


def final_frame(paths: Iterable[str]) -> pd.DataFrame:
    rows = []
    for path in paths:
        cell = read_cell(path)
        config = cell["config"]
        rows.append(
            {
                "experiment": config["experiment"],
                "method": config["method"],
                "algorithm": config["algorithm"],
                "target": config["target"],
                "seed": config["seed"],
                "beta": config["hparams"].get("beta"),
                "alpha": config["hparams"].get("alpha"),
                "metric": cell["metric"],
                "value": cell["final"] * (100 if cell["metric"] == "accuracy" else 1),
            }
        )
    return pd.DataFrame(rows)


def plot_final(paths: Iterable[str], output: str | Path, kind: str, title: str | None = None) -> None:
    """kind "shift": final metric against the level in the target name (noise std, η), one line per method,
    one panel per experiment; kind "beta" ("alpha"): final metric against the hyper-parameter β (α) for
    every algorithm with fixed values of it, one panel per target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = final_frame(paths)
    metric = frame["metric"].iloc[0]
    label = "target test accuracy (%)" if metric == "accuracy" else f"target test {metric}"
    if kind == "shift":
        frame["level"] = frame["target"].map(_level)
        grid = sns.relplot(
            data=frame,
            x="level",
            y="value",
            hue="method",
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
        grid = sns.relplot(
            data=frame,
            x=kind,
            y="value",
            hue="algorithm",
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
