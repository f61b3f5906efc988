"""Auto-weighted methods (`fdabench.methods.auto`), clause by clause: the settings check, the
gradient-batch estimates G_b, what a round logs, and which alignment the cosine-scaled rule uses."""

import numpy as np
import pytest
import torch

from fdabench.federation.client import ClientData, loss_function
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.rule_interface import LocalContext, RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.methods.auto import gradient_batch_updates
from fdabench.methods.fda import cosine_scale
from fdabench.tensor_math.aggregation import delta_error, fedgp
from tiny import TINY_TRAIN

SETTINGS = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 2, "warmup_rounds": 1})
FULL_BATCH_MESSAGE = (
    "fedda_auto estimates β from the target's per-step updates but the target trains full-batch for one epoch (one "
    "step per round); set target_batch_size, or estimation: gradient_batches"
)


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("+80")


@pytest.mark.parametrize(
    "hparams, train, problems",
    [
        ({}, {"target_batch_size": 0, "target_local_epochs": 1}, [FULL_BATCH_MESSAGE]),
        ({}, {"target_batch_size": 0}, [FULL_BATCH_MESSAGE]),  # one epoch when unset
        ({}, {}, [FULL_BATCH_MESSAGE]),  # full batch when unset
        ({}, {"target_batch_size": 16}, []),
        ({}, {"target_batch_size": 0, "target_local_epochs": 2}, []),
        ({"target_batch_size": 8}, {"target_batch_size": 0}, []),
        ({"estimation": "gradient_batches"}, {"target_batch_size": 0}, []),
    ],
)
def test_local_step_estimation_needs_more_than_one_target_step(hparams, train, problems):
    assert get_method("fedda_auto", hparams).check(train) == problems


def _context(problem, round_index=0, seed=0, lr=0.01):
    settings = TrainSettings.from_dict({**TINY_TRAIN, "target_lr": lr})
    model = build_cell_model(problem, settings, 0, torch.device("cpu"))
    space = ParameterSpace(model)
    inputs = RoundInputs(round_index, space.get(), space.layer_sizes, settings, space.layer_names)
    data = ClientData("target", problem.target_labelled.x[:48], problem.target_labelled.y[:48])
    return LocalContext("target", loss_function("classification"), inputs, space, data, seed), model


def test_gradient_batches_are_plain_gradient_steps_on_disjoint_batches_at_the_round_start(problem):
    context, model = _context(problem)
    start = context.space.get()
    batches = list(gradient_batch_updates(context, 6))
    assert len(batches) == 48 // 6
    assert torch.equal(context.space.get(), start)  # estimation does not move the model
    # equal-size disjoint batches covering the data: their mean step is one full-batch gradient step
    model.zero_grad()
    context.loss_fn(model(context.data.inputs()), context.data.labels()).backward()
    full = torch.cat([p.grad.reshape(-1) for p in context.space.parameters])
    assert torch.allclose(torch.stack(batches).mean(0), -0.01 * full, atol=1e-6)
    # ... and no two batches are the same
    assert len({tuple(b.tolist()) for b in batches}) == len(batches)
    # a batch size that does not divide the data gives floor(n / size) batches
    assert len(list(gradient_batch_updates(context, 10))) == 4


def test_gradient_batches_are_drawn_per_seed_and_round_and_not_from_the_global_generator(problem):
    def draws(round_index, seed, global_seed):
        context, _ = _context(problem, round_index, seed)
        torch.manual_seed(global_seed)
        return torch.stack(list(gradient_batch_updates(context, 6)))

    first = draws(0, 0, 1)
    assert torch.equal(first, draws(0, 0, 2))
    assert not torch.equal(first, draws(1, 0, 1)) and not torch.equal(first, draws(0, 1, 1))


@pytest.mark.parametrize("round_index", [0, 3])
def test_gradient_batches_draw_from_the_estimation_stream_at_the_round_plus_one(problem, round_index):
    """Round r's batches are the permutation of stream(seed, "auto_estimation", r + 1): an index the purpose registered
    (`ESTIMATION_STREAM`), so it meets no other stream of the cell."""
    from fdabench.core.streams import PURPOSES, stream
    from fdabench.methods.auto import ESTIMATION_STREAM

    context, _ = _context(problem, round_index, seed=5)
    order = torch.randperm(48, generator=torch.Generator().manual_seed(stream(5, ESTIMATION_STREAM, round_index + 1)))
    data = context.data
    expected = []
    for b in range(48 // 6):
        index = order[b * 6 : (b + 1) * 6]
        gradients = torch.autograd.grad(
            context.loss_fn(context.space.model(data.inputs(index)), data.labels(index)), context.space.parameters
        )
        expected.append(torch.cat([g.reshape(-1) for g in gradients]).mul_(-0.01))
    assert torch.equal(torch.stack(list(gradient_batch_updates(context, 6))), torch.stack(expected))
    assert round_index + 1 in PURPOSES[ESTIMATION_STREAM].indices


@pytest.mark.parametrize("name, rule", [("fedda_auto", "fedda"), ("fedgp_auto", "fedgp")])
def test_a_round_logs_beta_the_estimates_and_the_predicted_delta_error(problem, name, rule):
    history = run_rounds(get_method(name), problem, SETTINGS, 0, torch.device("cpu"))
    sources = len(problem.sources)
    for record in [r for r in history["rounds"] if r["phase"] == "fda"]:
        for key in ("betas", "d2_hat", "tau2d2_hat", "delta_hat", "delta_error_hat"):
            assert len(record[key]) == sources, key
        # β is logged as applied to the float32 updates
        assert all(float(np.float32(b)) == b for b in record["betas"])
        beta = torch.tensor(record["betas"], dtype=torch.float64)
        expected = delta_error(
            rule,
            record["sigma2_hat"],
            d2=torch.tensor(record["d2_hat"], dtype=torch.float64),
            tau2d2=torch.tensor(record["tau2d2_hat"], dtype=torch.float64),
            beta=beta,
        )
        assert np.allclose(record["delta_error_hat"], expected.numpy(), rtol=1e-9)
        assert all(0 <= d <= 1 for d in record["delta_hat"])


@pytest.mark.parametrize("alignment", ["steps_and_lr", "none"])
def test_cosine_scaled_fedgp_auto_uses_its_own_alignment(alignment):
    torch.manual_seed(0)
    settings = TrainSettings.from_dict({**TINY_TRAIN, "source_lr": 0.01, "target_lr": 0.005})
    inputs = RoundInputs(1, torch.zeros(6), (6,), settings)
    inputs.source_updates, inputs.target_update = torch.randn(2, 6), torch.randn(6)
    inputs.source_counts, inputs.source_steps, inputs.target_steps = torch.tensor([3.0, 1.0]), torch.tensor([8, 4]), 3
    method = get_method("fedgp_auto", {"mode": "cosine_scaled", "scale_alignment": alignment})
    betas = torch.tensor([0.3, 0.6])
    scale = cosine_scale(inputs, alignment)
    expected = fedgp(
        inputs.target_update, inputs.source_updates, betas, inputs.source_counts, mode="cosine_scaled", scale=scale
    )
    assert torch.allclose(method.combine(inputs, betas), expected)
    assert not torch.allclose(cosine_scale(inputs, "none"), cosine_scale(inputs, "steps_and_lr"))
