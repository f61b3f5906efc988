"""The synthetic theory check (FedGP paper, appendix B, Figure 5): does the rule with the smallest Delta
error at initialisation test best?

At the initial parameters θ0 of a cell (π = point mass at θ0), with g_T the gradient of the loss over the
whole target domain, g_S over the source, and ĝ_T over n labelled target samples:
    d_π² = ‖g_T − g_S‖²,  σ_π² = E‖ĝ_T − g_T‖² (Monte Carlo over draws of n samples from the target's
    training pool),  τ²d_π² = ‖g_T − ⟨g_T, u⟩u‖² with u = g_S / ‖g_S‖,
and the Delta errors of target-only, source-only, FedDA(β) and FedGP(β) follow in closed form
(`fdabench.aggregation.delta_error`). The report compares the predicted winner with the rules' best
target test losses from training.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from fdabench.aggregation import delta_error
from fdabench.federation.client import loss_function
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem, concatenate
from fdabench.federation.settings import TrainSettings
from fdabench.models import build_model

FIXED_RULES = ("target_only", "source_only", "fedda", "fedgp")
AUTO_RULES = ("target_only", "source_only", "fedda_auto", "fedgp_auto")
DEFAULT_ROLES = {rule: rule for rule in FIXED_RULES + AUTO_RULES}


def _gradient(space: ParameterSpace, loss_fn, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    gradients = torch.autograd.grad(loss_fn(space.model(x), y), space.parameters)
    return torch.cat([g.reshape(-1) for g in gradients]).double()


def initial_quantities(
    problem: FederatedProblem, settings: TrainSettings, seed: int, beta: float, draws: int = 100
) -> dict[str, Any]:
    """d_π², σ_π², τ²d_π² and each rule's Delta error at the cell's initial parameters."""
    if len(problem.sources) != 1:
        raise ValueError("the theory check compares one source with the target")
    torch.manual_seed(seed)  # the same initial model as the cell's training run (run_rounds)
    model = build_model(settings.model, problem.input_shape, problem.num_outputs, **settings.model_options)
    model = model.to(problem.target_test.x.device)
    space = ParameterSpace(model)
    loss_fn = loss_function(problem.task)
    source = problem.sources[0]
    pool = problem.target_all()
    population = concatenate("target_domain", [pool, problem.target_test])
    g_source = _gradient(space, loss_fn, source.inputs(), source.labels())
    g_target = _gradient(space, loss_fn, population.inputs(), population.labels())
    n = len(problem.target_labelled)
    generator = torch.Generator().manual_seed(seed + 1)
    squared_errors = []
    for _ in range(draws):
        index = torch.randperm(len(pool), generator=generator)[:n].to(pool.x.device)
        squared_errors.append((_gradient(space, loss_fn, pool.inputs(index), pool.labels(index)) - g_target).square().sum())
    sigma2 = torch.stack(squared_errors).mean()
    d2 = (g_target - g_source).square().sum()
    unit = g_source / g_source.norm()
    tau2d2 = (g_target - (g_target @ unit) * unit).square().sum()
    errors = {
        "target_only": delta_error("target_only", sigma2),
        "source_only": delta_error("source_only", sigma2, d2=d2),
        "fedda": delta_error("fedda", sigma2, d2=d2, beta=beta),
        "fedgp": delta_error("fedgp", sigma2, tau2d2=tau2d2, beta=beta, model_dim=space.size),
    }
    return {
        "target_samples": n,
        "beta": beta,
        "model_dim": space.size,
        "draws": draws,
        "d2": float(d2),
        "sigma2": float(sigma2),
        "tau2d2": float(tau2d2),
        "delta_errors": {rule: float(value) for rule, value in errors.items()},
        "predicted_winner": min(errors, key=lambda rule: float(errors[rule])),
    }


def theory_frame(initial: Iterable[dict[str, Any]], cells: Iterable[dict[str, Any]], roles: dict[str, str]):
    """One row per target: mean (over seeds) d², σ², Delta errors, best test losses per role, winners."""
    import pandas as pd

    init = pd.DataFrame(
        [
            {"target": record["target"], "seed": record["seed"], "d2": record["d2"], "sigma2": record["sigma2"], "tau2d2": record["tau2d2"],
             "target_samples": record["target_samples"], **{f"delta_error_{rule}": v for rule, v in record["delta_errors"].items()}}
            for record in initial
        ]
    )
    role_of = {method: role for role, method in roles.items()}
    losses = pd.DataFrame(
        [
            {"target": c["cell"]["target"], "seed": c["cell"]["seed"], "role": role_of[c["cell"]["method"]],
             "best_loss": min(r[c["metric"]] for r in c["rounds"])}
            for c in cells
            if c["cell"]["method"] in role_of
        ]
    )
    best = losses.pivot_table(index="target", columns="role", values="best_loss", aggfunc="mean").add_prefix("best_loss_")
    frame = init.drop(columns="seed").groupby("target", sort=False).mean().join(best)
    delta_columns = [f"delta_error_{rule}" for rule in FIXED_RULES]
    frame["predicted"] = frame[delta_columns].idxmin(axis=1).str.replace("delta_error_", "", regex=False)
    frame["best_fixed"] = frame[[f"best_loss_{rule}" for rule in FIXED_RULES]].idxmin(axis=1).str.replace("best_loss_", "", regex=False)
    frame["best_auto"] = frame[[f"best_loss_{rule}" for rule in AUTO_RULES]].idxmin(axis=1).str.replace("best_loss_", "", regex=False)
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

    from fdabench.report.figures import save_figure

    names = ["target_only", "source_only", "fedda", "fedgp"]
    colours = sns.color_palette("Set2", len(names))
    sources = sorted(frame["source"].unique(), key=lambda s: int(s[1:]))
    sizes = sorted(frame["n"].unique(), reverse=True)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    panels = [("predicted", "smallest Delta error at init (β fixed)"), ("best_fixed", "best test loss, β fixed"), ("best_auto", "best test loss, β auto")]
    for axis, (column, panel_title) in zip(axes, panels):
        codes = frame.assign(code=frame[column].str.replace("_auto", "", regex=False).map(names.index)).pivot(index="n", columns="source", values="code")
        codes = codes.reindex(index=sizes, columns=sources)
        labels = np.array([["" if np.isnan(code) else names[int(code)].split("_")[0] for code in row] for row in codes.to_numpy()])
        sns.heatmap(codes, ax=axis, cmap=ListedColormap(colours), vmin=-0.5, vmax=len(names) - 0.5, cbar=False, linewidths=0.5,
                    linecolor="white", annot=labels, fmt="", annot_kws={"fontsize": 6})
        axis.set_title(panel_title)
        axis.set_xlabel("source domain (shift grows →)")
        axis.set_ylabel("labelled target samples n")
    agreement = frame["agree"].mean()
    legend = [Patch(color=colour, label=name + (" / _auto" if name.startswith("fed") else "")) for name, colour in zip(names, colours)]
    figure.legend(handles=legend, loc="outside lower center", ncols=4)
    figure.suptitle((title + "\n" if title else "") + f"predicted winner = actual fixed-β winner in {agreement:.0%} of {len(frame)} settings")
    save_figure(figure, output)
    plt.close(figure)


def theory_markdown(frame, title: str | None = None) -> str:
    agreement = frame["agree"].mean()
    auto_lifts_fedda = (frame["best_loss_fedda_auto"] < frame["best_loss_fedda"]).mean()
    auto_lifts_fedgp = (frame["best_loss_fedgp_auto"] < frame["best_loss_fedgp"]).mean()
    lines = [f"### {title}" if title else "### Theory check", ""]
    lines.append(f"- Predicted winner (smallest Delta error at initialisation) equals the best fixed-β rule in {agreement:.1%} of {len(frame)} settings.")
    lines.append(f"- Auto-weighted FedDA tests better than FedDA(β) in {auto_lifts_fedda:.1%} of settings; auto FedGP better than FedGP(β) in {auto_lifts_fedgp:.1%}.")
    for column, label in (("predicted", "predicted"), ("best_fixed", "best, β fixed"), ("best_auto", "best, β auto")):
        counts = frame[column].value_counts()
        lines.append(f"- Winners ({label}): " + ", ".join(f"{rule} {count}" for rule, count in counts.items()) + ".")
    lines += ["", "| source | n | d² | σ² | τ²d² | predicted | best (β fixed) | best (β auto) |", "|---|---:|---:|---:|---:|---|---|---|"]
    for row in frame.itertuples():
        lines.append(f"| {row.source} | {row.n} | {row.d2:.3g} | {row.sigma2:.3g} | {row.tau2d2:.3g} | {row.predicted} | {row.best_fixed} | {row.best_auto} |")
    return "\n".join(lines) + "\n"
