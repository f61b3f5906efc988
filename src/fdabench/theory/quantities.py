"""The synthetic theory check (FedGP paper, appendix B, Figure 5): does the rule with the smallest Delta
error at initialisation test best?

At the initial parameters θ0 of a cell (π = point mass at θ0), with g_T the gradient of the loss over the
whole target domain, g_S over the source, and ĝ_T over n labelled target samples:
    d_π² = ‖g_T − g_S‖²,  σ_π² = E‖ĝ_T − g_T‖² (Monte Carlo over draws of n samples from the target's
    training pool),  τ²d_π² = ‖g_T − ⟨g_T, u⟩u‖² with u = g_S / ‖g_S‖,
and the Delta errors of target-only, source-only, FedDA(β) and FedGP(β) follow in closed form
(`fdabench.tensor_math.aggregation.delta_error`). The report compares the predicted winner with the rules' best
target test losses from training.
"""

from __future__ import annotations

from typing import Any

import torch

from fdabench.core.streams import stream
from fdabench.federation.client import loss_function
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem, concatenate
from fdabench.federation.settings import TrainSettings
from fdabench.models import build_model
from fdabench.tensor_math.aggregation import delta_error


def _gradient(space: ParameterSpace, loss_fn, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    gradients = torch.autograd.grad(loss_fn(space.model(x), y), space.parameters)
    return torch.cat([g.reshape(-1) for g in gradients]).double()


def initial_quantities(
    problem: FederatedProblem, settings: TrainSettings, seed: int, beta: float, draws: int
) -> dict[str, Any]:
    """d_π², σ_π², τ²d_π² and each rule's Delta error at the cell's initial parameters."""
    if len(problem.sources) != 1:
        raise ValueError("the theory check compares one source with the target")
    torch.manual_seed(stream(seed, "model_init"))  # the same initial model as the cell's training run (run_rounds)
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
    generator = torch.Generator().manual_seed(stream(seed, "theory_draws"))
    squared_errors = []
    for _ in range(draws):
        index = torch.randperm(len(pool), generator=generator)[:n].to(pool.x.device)
        squared_errors.append(
            (_gradient(space, loss_fn, pool.inputs(index), pool.labels(index)) - g_target).square().sum()
        )
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
