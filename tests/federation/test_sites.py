"""The round loop through its `Sites` interface: a transport that could not reach a source has the round aggregate
the others (their names, counts and bytes only), and evaluation is handed the global parameters just set."""

import torch

from fdabench.federation import rounds
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import LocalSites
from fdabench.methods import get_method
from tiny import AUX_TRAIN, aux_client

SETTINGS = {**AUX_TRAIN, "rounds": 2, "warmup_rounds": 1, "optimizer": "sgd", "source_lr": 0.05, "target_lr": 0.05}


def _problem() -> FederatedProblem:
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client(f"s{index}", 20 + 10 * index, index) for index in range(3)],
        aux_client("t", 16, 10),
        aux_client("u", 10, 11),
        aux_client("test", 30, 12),
    )


class WithoutSource(LocalSites):
    """LocalSites that, in round `round_index`, could not reach source `missing`; it records what evaluation got."""

    def __init__(self, *args, missing: int, round_index: int):
        super().__init__(*args)
        self.missing, self.round_index, self.calls, self.evaluated = missing, round_index, 0, []

    def train_sources(self, start, settings):
        replies = super().train_sources(start, settings)
        self.calls += 1
        if self.calls - 1 == self.round_index:
            present = [index for index in range(len(replies.results)) if index != self.missing]
            replies.results = [replies.results[index] for index in present]
            replies.present = present
        return replies

    def evaluate(self, params, buffers):
        self.evaluated.append((params.clone(), buffers))
        return super().evaluate(params, buffers)


def _run(name, **hparams):
    problem, settings = _problem(), TrainSettings.from_dict(SETTINGS)
    method = get_method(name, hparams)
    seen, made = [], []
    aggregate = method.aggregate

    def recorded(inputs):
        seen.append((inputs.source_names, inputs.source_counts.clone(), inputs.source_updates.shape[0]))
        return aggregate(inputs)

    method.aggregate = recorded

    def make(space):
        made.append(
            WithoutSource(
                method,
                problem,
                space,
                rounds.loss_function(problem.task),
                0,
                "off",
                torch.device("cpu"),
                1024,
                missing=1,
                round_index=2,
            )
        )
        return made[0]

    model = rounds.build_cell_model(problem, settings, 0, torch.device("cpu"))
    history = rounds.run_rounds(method, problem, settings, 0, torch.device("cpu"), model=model, sites=make)
    return history, seen, made[0], model


def test_a_round_without_a_source_aggregates_the_others():
    history, seen, sites, _ = _run("fedgp_auto")
    full, partial = seen[0], seen[1]  # FDA rounds 1 (all sources) and 2 (s1 missing)
    assert full[0] == ("s0", "s1", "s2") and full[2] == 3
    assert partial[0] == ("s0", "s2") and partial[2] == 2
    assert torch.equal(partial[1], torch.tensor([20.0, 40.0]))
    assert len(history["rounds"][2]["betas"]) == 2 and len(history["rounds"][1]["betas"]) == 3
    # one update (and count) less comes up; the target, forwarded the updates that came, receives one less
    # (fixed β: no estimates, whose size grows with the sources)
    update = history["model_size"] * 4
    assert history["rounds"][1]["bytes_downlink"] - history["rounds"][2]["bytes_downlink"] == update
    history, _, _, _ = _run("fedgp", beta=0.5)
    assert history["rounds"][1]["bytes_uplink"] - history["rounds"][2]["bytes_uplink"] == update + rounds.COUNT_BYTES
    assert history["rounds"][1]["bytes_downlink"] == history["rounds"][2]["bytes_downlink"]  # θ still goes to all


def test_evaluation_gets_the_global_parameters_just_set():
    history, _, sites, model = _run("fedgp", beta=0.5)
    assert len(sites.evaluated) == len(history["rounds"])
    final, buffers = sites.evaluated[-1]
    assert torch.equal(final, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert buffers == []  # the MLP has none; a transport sends what there is
