"""FedProx and Finetune_Offline: source FedAvg variants evaluated on the target."""

import pytest
import torch
import torch.nn.functional as F

from fdabench.federation.client import LocalSettings, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.sites import client_generator
from fdabench.methods import get_method
from fdabench.methods.baselines import SourceOnly


def _losses(history):
    return [r["loss"] for r in history["rounds"]]


def test_fedprox_mu0_is_source_only(run_method):
    assert _losses(run_method("fedprox", {"mu": 0.0})) == _losses(run_method("source_only"))


def test_fedprox_default_mu_differs_from_fedavg_but_only_slightly(run_method):
    fedprox, fedavg = _losses(run_method("fedprox")), _losses(run_method("source_only"))
    assert fedprox != fedavg and fedprox == pytest.approx(fedavg, rel=1e-2)


def test_fedprox_infinite_mu_keeps_the_global_model(run_method):
    """μ → ∞: every local model stays at the global model it received, so the global model never moves."""
    initial = _losses(run_method("target_only", target_lr=1e-12))[
        0
    ]  # the initial model (a step of 1e-12 moves nothing measurable)
    losses = _losses(run_method("fedprox", {"mu": 1e12}))
    assert losses == pytest.approx([initial] * len(losses), rel=1e-5)


def test_fedprox_bytes_are_fedavg_bytes_over_the_sources(run_method):
    fedprox, fedavg = run_method("fedprox")["rounds"], run_method("source_only")["rounds"]
    assert [(r["bytes_uplink"], r["bytes_downlink"]) for r in fedprox] == [
        (r["bytes_uplink"], r["bytes_downlink"]) for r in fedavg
    ]


def test_finetune_offline_with_zero_epochs_is_source_only(run_method):
    finetune, source_only = run_method("finetune_offline", {"finetune_epochs": 0}), run_method("source_only")
    assert finetune["rounds"] == [
        {**r, "seconds": f["seconds"]} for r, f in zip(source_only["rounds"], finetune["rounds"])
    ]


def test_finetune_epochs_default_to_the_targets_epochs_in_an_fda_run(run_method):
    rounds = run_method("finetune_offline", target_local_epochs=2)["rounds"]
    assert [r["phase"] for r in rounds] == ["fda"] * 4 + ["finetune"] * 8
    assert all(r["bytes_uplink"] == r["bytes_downlink"] == 0 for r in rounds[4:])


@pytest.mark.parametrize("head_only, order", [(False, "shuffled"), (True, "shuffled"), (False, "fixed")])
def test_finetune_is_target_training_from_the_source_model(tiny_problem, tiny_settings, run_method, head_only, order):
    """Reference: the source-only model, then the target's local epochs (its own batch stream, in the target's
    order), by hand."""
    history = run_method("finetune_offline", {"finetune_epochs": 3, "head_only": head_only}, target_order=order)
    settings = tiny_settings
    model = build_cell_model(tiny_problem, settings, 0, torch.device("cpu"))
    run_rounds(SourceOnly(), tiny_problem, settings, 0, torch.device("cpu"), model=model)
    body_before = ParameterSpace(model, prefix="features.").get()
    data = tiny_problem.target_labelled
    if head_only:
        with torch.no_grad():
            data = ClientData("t", model.features(data.x), data.y)
    space = ParameterSpace(model.head if head_only else model)
    params, generator, expected = space.get(), client_generator(0, len(tiny_problem.sources)), []
    for _ in range(3):
        params = (
            params
            + train_locally(
                space, params, data, LocalSettings(1e-3, 16, 1, shuffle=order == "shuffled"), F.cross_entropy, generator
            ).update
        )
        space.set(params)
        model.eval()
        with torch.no_grad():
            expected.append(float(F.cross_entropy(model(tiny_problem.target_test.x), tiny_problem.target_test.y)))
    assert [r["loss"] for r in history["rounds"][4:]] == pytest.approx(expected, rel=1e-6)
    body_after = ParameterSpace(model, prefix="features.").get()
    assert torch.equal(body_before, body_after) == head_only


def test_unknown_finetune_hyper_parameter_is_rejected():
    with pytest.raises(ValueError, match="unknown hyper-parameters"):
        get_method("finetune_offline", {"epochs": 3})
