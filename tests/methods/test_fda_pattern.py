"""Behaviour that matters: on ColoredDigits with -90 as target, FedGP (β=0.5) beats FedAvg over the
sources, as FedGP beats source-only on ColoredMNIST -90% in the papers (89.8 vs 27.8)."""

import torch

from fdabench.config import Params
from fdabench.data import get_dataset, get_partitioner
from fdabench.federation.problem import build_problem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method


def test_fedgp_beats_source_only_on_colored_digits_minus90(colored_digits, repo_root):
    import yaml

    params = Params(yaml.safe_load((repo_root / "params.yaml").read_text()))
    settings = TrainSettings.from_dict(params.train_settings("colored_digits"))
    source = get_dataset("colored_digits")
    partition = get_partitioner(source.partitioner).split(
        colored_digits, "-90", 0, params.partition_options("colored_digits")
    )
    problem = build_problem(colored_digits, partition, "cpu")
    finals = {}
    for method in ("source_only", "fedgp"):
        rounds = run_rounds(
            get_method(method, params.method_variant(method)[1]), problem, settings, 0, torch.device("cpu")
        )["rounds"]
        finals[method] = sum(r["accuracy"] for r in rounds[-5:]) / 5
    assert finals["fedgp"] > finals["source_only"] + 0.3, finals
