"""The synthetic theory check's report (FedGP paper, appendix B, Figure 5): the predicted winner at
initialisation (from `fdabench.theory.quantities` records) against the rules' training results."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fdabench.config.theory_roles import AUTO_RULES, FIXED_RULES
from fdabench.report.figures import save_figure


def theory_frame(initial: Iterable[dict[str, Any]], cells: Iterable[dict[str, Any]], roles: dict[str, str]):
    """One row per target: mean (over seeds) d², σ², Delta errors, best test losses per role, winners."""
    import pandas as pd

    init = pd.DataFrame(
        [
            {
                "target": record["target"],
                "seed": record["seed"],
                "d2": record["d2"],
                "sigma2": record["sigma2"],
                "tau2d2": record["tau2d2"],
                "target_samples": record["target_samples"],
                **{f"delta_error_{rule}": v for rule, v in record["delta_errors"].items()},
            }
            for record in initial
        ]
    )
    role_of = {method: role for role, method in roles.items()}
    losses = pd.DataFrame(
        [
            {
                "target": c["cell"]["target"],
                "seed": c["cell"]["seed"],
                "role": role_of[c["cell"]["method"]],
                "best_loss": min(r[c["metric"]] for r in c["rounds"]),
            }
            for c in cells
            if c["cell"]["method"] in role_of
        ]
    )
    best = losses.pivot_table(index="target", columns="role", values="best_loss", aggfunc="mean").add_prefix(
        "best_loss_"
    )
    frame = init.drop(columns="seed").groupby("target", sort=False).mean().join(best)
    delta_columns = [f"delta_error_{rule}" for rule in FIXED_RULES]
    frame["predicted"] = frame[delta_columns].idxmin(axis=1).str.replace("delta_error_", "", regex=False)
    frame["best_fixed"] = (
        frame[[f"best_loss_{rule}" for rule in FIXED_RULES]].idxmin(axis=1).str.replace("best_loss_", "", regex=False)
    )
    frame["best_auto"] = (
        frame[[f"best_loss_{rule}" for rule in AUTO_RULES]].idxmin(axis=1).str.replace("best_loss_", "", regex=False)
    )
    frame["agree"] = frame["predicted"] == frame["best_fixed"]
    shift, size = zip(*(target.split("-n") for target in frame.index))
    frame.insert(0, "source", shift)
    frame.insert(1, "n", [int(value) for value in size])
    return frame.reset_index()


def plot_theory(frame, output, title: str | None = None) -> None:
    """Three heatmaps over (source shift, target size): the rule with the smallest Delta error at
    initialisation, the best rule with β fixed, the best rule with auto-weighted β."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    names = ["target_only", "source_only", "fedda", "fedgp"]
    colours = sns.color_palette("Set2", len(names))
    sources = sorted(frame["source"].unique(), key=lambda s: int(s[1:]))
    sizes = sorted(frame["n"].unique(), reverse=True)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    panels = [
        ("predicted", "smallest Delta error at init (β fixed)"),
        ("best_fixed", "best test loss, β fixed"),
        ("best_auto", "best test loss, β auto"),
    ]
    for axis, (column, panel_title) in zip(axes, panels):
        codes = frame.assign(code=frame[column].str.replace("_auto", "", regex=False).map(names.index)).pivot(
            index="n", columns="source", values="code"
        )
        codes = codes.reindex(index=sizes, columns=sources)
        labels = np.array(
            [["" if np.isnan(code) else names[int(code)].split("_")[0] for code in row] for row in codes.to_numpy()]
        )
        sns.heatmap(
            codes,
            ax=axis,
            cmap=ListedColormap(colours),
            vmin=-0.5,
            vmax=len(names) - 0.5,
            cbar=False,
            linewidths=0.5,
            linecolor="white",
            annot=labels,
            fmt="",
            annot_kws={"fontsize": 6},
        )
        axis.set_title(panel_title)
        axis.set_xlabel("source domain (shift grows →)")
        axis.set_ylabel("labelled target samples n")
    agreement = frame["agree"].mean()
    legend = [
        Patch(color=colour, label=name + (" / _auto" if name.startswith("fed") else ""))
        for name, colour in zip(names, colours)
    ]
    figure.legend(handles=legend, loc="outside lower center", ncols=4)
    figure.suptitle(
        (title + "\n" if title else "")
        + f"predicted winner = actual fixed-β winner in {agreement:.0%} of {len(frame)} settings"
    )
    save_figure(figure, output)
    plt.close(figure)


def theory_markdown(frame, title: str | None = None) -> str:
    agreement = frame["agree"].mean()
    auto_lifts_fedda = (frame["best_loss_fedda_auto"] < frame["best_loss_fedda"]).mean()
    auto_lifts_fedgp = (frame["best_loss_fedgp_auto"] < frame["best_loss_fedgp"]).mean()
    lines = [f"### {title}" if title else "### Theory check", ""]
    lines.append(
        f"- Predicted winner (smallest Delta error at initialisation) equals the best fixed-β rule in {agreement:.1%} "
        f"of {len(frame)} settings."
    )
    lines.append(
        f"- Auto-weighted FedDA tests better than FedDA(β) in {auto_lifts_fedda:.1%} of settings; auto FedGP better "
        f"than FedGP(β) in {auto_lifts_fedgp:.1%}."
    )
    for column, label in (("predicted", "predicted"), ("best_fixed", "best, β fixed"), ("best_auto", "best, β auto")):
        counts = frame[column].value_counts()
        lines.append(f"- Winners ({label}): " + ", ".join(f"{rule} {count}" for rule, count in counts.items()) + ".")
    lines += [
        "",
        "| source | n | d² | σ² | τ²d² | predicted | best (β fixed) | best (β auto) |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for row in frame.itertuples():
        lines.append(
            f"| {row.source} | {row.n} | {row.d2:.3g} | {row.sigma2:.3g} | {row.tau2d2:.3g} | {row.predicted} | "
            f"{row.best_fixed} | {row.best_auto} |"
        )
    return "\n".join(lines) + "\n"
