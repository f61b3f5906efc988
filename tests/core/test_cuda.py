"""The CUDA paths, on a machine with a GPU (`pytest -m gpu`; skipped without CUDA): a cell trains there with its
data on the device, reruns bit for bit, and the aggregation math and the auto-weighting estimators give the CPU's
numbers up to float rounding."""

import pytest
import torch

from fdabench.federation.problem import build_problem
from fdabench.federation.rounds import run_rounds
from fdabench.tensor_math.aggregation import auto_weights, fedavg, fedda, fedgp
from workflows import prepare_cli_cells, train_cli_cell

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def cell_inputs(tmp_path_factory, repo_root):
    return prepare_cli_cells(tmp_path_factory.mktemp("cuda"), repo_root, seeds=(0,), rounds=4)


def _train(cell_inputs, method, device, name):
    return train_cli_cell(cell_inputs, method, 0, name, device=device)


@pytest.mark.parametrize("method", ["fedgp", "fedgp_auto", "fedda"])
def test_a_cell_trains_on_the_gpu_and_reruns_bit_for_bit(cell_inputs, method):
    first = _train(cell_inputs, method, "cuda", f"{method}_a.json")
    again = _train(cell_inputs, method, "cuda", f"{method}_b.json")
    on_cpu = _train(cell_inputs, method, "cpu", f"{method}_cpu.json")
    assert first["device"].startswith("cuda") and on_cpu["device"] == "cpu"
    numbers = lambda cell: [(r["accuracy"], r["loss"]) for r in cell["rounds"]]
    assert numbers(first) == numbers(again)
    # the same protocol on the other device: same rounds and messages, accuracy of the same order
    assert [r["phase"] for r in first["rounds"]] == [r["phase"] for r in on_cpu["rounds"]]
    assert first["bytes"] == on_cpu["bytes"]
    assert abs(first["final"] - on_cpu["final"]) < 0.15


def test_the_problem_keeps_its_tensors_on_the_gpu(colored_digits):
    from fdabench.data import get_partitioner

    partition = get_partitioner("leave_one_domain_out").split(
        colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48}
    )
    problem = build_problem(colored_digits, partition, "cuda")
    assert problem.target_labelled.x.is_cuda and problem.target_labelled.y.is_cuda
    assert problem.target_test.x.is_cuda


@pytest.mark.parametrize("method", ["scaffold", "fedbn"])
def test_client_state_trains_on_the_gpu_and_reruns_bit_for_bit(colored_digits, method):
    """SCAFFOLD's control variates and FedBN's BatchNorm layers live with the model on the GPU: the cell runs there,
    reruns bit for bit, and keeps its protocol's bytes on the CPU."""
    from fdabench.data import get_partitioner
    from fdabench.federation.settings import TrainSettings
    from fdabench.methods import get_method
    from tiny import TINY_TRAIN

    partition = get_partitioner("leave_one_domain_out").split(
        colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48}
    )
    train = {**TINY_TRAIN, "optimizer": "sgd", "momentum": 0.0, "source_lr": 0.05, "target_lr": 0.05}
    settings = TrainSettings.from_dict({**train, "model_options": {"hidden": [16], "norm": "batch"}})
    runs = {
        device: [
            run_rounds(
                get_method(method), build_problem(colored_digits, partition, device), settings, 0, torch.device(device)
            )
            for _ in range(2 if device == "cuda" else 1)
        ]
        for device in ("cuda", "cpu")
    }
    numbers = lambda history: [(r["accuracy"], r["loss"]) for r in history["rounds"]]
    first, again = runs["cuda"]
    assert numbers(first) == numbers(again)
    assert [r["bytes_uplink"] for r in first["rounds"]] == [r["bytes_uplink"] for r in runs["cpu"][0]["rounds"]]
    assert abs(first["rounds"][-1]["accuracy"] - runs["cpu"][0]["rounds"][-1]["accuracy"]) < 0.15


def _updates(device):
    generator = torch.Generator().manual_seed(0)
    sources = torch.randn(4, 10_000, generator=generator, dtype=torch.float64)
    target = torch.randn(10_000, generator=generator, dtype=torch.float64)
    return sources.to(device), target.to(device)


def test_aggregation_rules_give_the_cpus_numbers():
    cpu_sources, cpu_target = _updates("cpu")
    sources, target = _updates("cuda")
    weights = [1.0, 2.0, 3.0, 4.0]
    pairs = [
        (fedavg(sources, weights), fedavg(cpu_sources, weights)),
        (fedda(target, sources, 0.5, weights), fedda(cpu_target, cpu_sources, 0.5, weights)),
        (fedgp(target, sources, 0.5, weights), fedgp(cpu_target, cpu_sources, 0.5, weights)),
        (
            fedgp(target, sources, 0.5, weights, mode="cosine_scaled", layer_sizes=[4_000, 6_000]),
            fedgp(cpu_target, cpu_sources, 0.5, weights, mode="cosine_scaled", layer_sizes=[4_000, 6_000]),
        ),
    ]
    for on_gpu, on_cpu in pairs:
        assert on_gpu.is_cuda
        torch.testing.assert_close(on_gpu.cpu(), on_cpu, rtol=1e-9, atol=1e-12)


def test_auto_weights_give_the_cpus_estimates():
    generator = torch.Generator().manual_seed(1)
    steps = torch.randn(16, 1_000, generator=generator, dtype=torch.float64)
    sources = torch.randn(3, 1_000, generator=generator, dtype=torch.float64)
    for rule in ("fedda", "fedgp"):
        cpu_betas, on_cpu = auto_weights(steps, sources, rule)
        gpu_betas, on_gpu = auto_weights(steps.cuda(), sources.cuda(), rule)
        torch.testing.assert_close(gpu_betas.cpu(), cpu_betas, rtol=1e-9, atol=1e-12)
        assert on_cpu.keys() == on_gpu.keys()
        for key in on_cpu:
            torch.testing.assert_close(
                torch.as_tensor(on_gpu[key]).cpu(), torch.as_tensor(on_cpu[key]), rtol=1e-9, atol=1e-12
            )
