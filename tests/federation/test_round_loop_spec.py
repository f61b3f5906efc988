"""The round loop's contract with a method (Algorithm 1; `fdabench.federation.rounds`), clause by clause:
what it hands the method, which settings are in force when, where the server step goes, what happens to
buffers, what it records, and that every client's random stream is its own. A probe method records what
the loop gives it and returns server steps the test chooses."""

from dataclasses import replace

import pytest
import torch
from torch import nn

from fdabench.federation.client import Proximal, loss_function
from fdabench.federation.delivery import Delivery
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.roles import Roles
from fdabench.federation.rounds import build_cell_model, local_settings, run_rounds
from fdabench.federation.rule_interface import Aggregate, Objective
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.methods.base import RoundLoopMethod, default_phases
from tiny import TINY_TRAIN

CPU = torch.device("cpu")
SETTINGS = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 2, "warmup_rounds": 1})


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("+80")


class Probe(RoundLoopMethod):
    """Records what the loop hands it; its server step is the target's update, or `steps[round]`."""

    name = "probe"

    def __init__(self, steps=None, fda_lr=None, proximal=None, **roles):
        super().__init__()
        self.roles = Roles(**roles)
        self.steps, self.fda_lr, self.proximal = steps, fda_lr, proximal
        self.prepared, self.inputs, self.contexts, self.source_calls, self.source_buffers = [], [], [], [], {}
        self.source_contexts = []
        self.target_buffers = None

    def prepare_model(self, model, problem):
        self.prepared.append((model, problem))
        return model

    def phases(self, settings, has_sources):
        fda = None if self.fda_lr is None else replace(settings, source_lr=self.fda_lr, target_lr=self.fda_lr)
        return default_phases(self, settings, has_sources, fda_settings=fda)

    def local_objective(self, context):
        if context.role == "source":
            self.loss_fn = loss_fn = context.loss_fn
            if context.data is not None:  # (the cohort decision asks once, before any training, with no data)
                self.source_contexts.append((context.data.name, context.space))

            def loss(net, client, index):
                value = loss_fn(net(client.inputs(index)), client.labels(index))
                self.source_calls.append(client.name)
                self.source_buffers[client.name] = [b.detach().clone() for b in net.buffers()]
                return value

            return Objective(loss, self.proximal)
        self.contexts.append(context)

        def on_step(update):
            self.target_buffers = [b.detach().clone() for b in context.space.model.buffers()]

        return Objective(proximal=self.proximal, observer=on_step)

    def aggregate(self, inputs):
        self.inputs.append(inputs)
        if self.steps is not None:
            return Aggregate(self.steps[len(self.inputs) - 1].clone())
        return Aggregate(inputs.target_update)


def test_the_loop_hands_the_method_its_model_problem_task_loss_and_round_inputs(problem):
    probe = Probe(warmup=True)
    history = run_rounds(probe, problem, SETTINGS, 0, CPU)
    [(model, given)] = probe.prepared
    assert given is problem
    logits, labels = torch.randn(5, 10), torch.tensor([0, 1, 2, 3, 4])
    assert torch.equal(probe.loss_fn(logits, labels), loss_function("classification")(logits, labels))
    space = ParameterSpace(model)
    assert len(probe.inputs) == 2  # FDA rounds only: warm-up rounds are FedAvg's
    for index, inputs in enumerate(probe.inputs, start=1):
        assert inputs.round_index == index
        assert inputs.layer_sizes == space.layer_sizes and inputs.layer_names == space.layer_names
        assert inputs.source_names == tuple(s.name for s in problem.sources)
        assert inputs.source_counts.tolist() == [len(s) for s in problem.sources]
        assert inputs.source_updates.shape == (len(problem.sources), space.size)
    # the method's batch loss is every source's, in every round; the target keeps the task loss
    steps_per_round = sum(-(-len(s) // SETTINGS.source_batch_size) for s in problem.sources)
    assert len(probe.source_calls) == 3 * steps_per_round
    assert set(probe.source_calls) == {s.name for s in problem.sources}
    # each source's objective is built where it trains, from its own samples and the model it trains in
    assert [name for name, _ in probe.source_contexts] == [s.name for s in problem.sources] * 3
    assert all(trained_in is not None and trained_in.model is model for _, trained_in in probe.source_contexts)
    assert history["metric"] == "accuracy" and history["sources"] == [s.name for s in problem.sources]
    assert history["layer_names"] == list(space.layer_names) and history["model_size"] == space.size


def test_the_target_trains_on_the_split_the_method_names(problem):
    labelled, everything = Probe(target="labelled"), Probe(target="all")
    run_rounds(labelled, problem, SETTINGS, 0, CPU)
    run_rounds(everything, problem, SETTINGS, 0, CPU)
    assert [len(c.data) for c in labelled.contexts] == [len(problem.target_labelled)] * 2
    assert [len(c.data) for c in everything.contexts] == [len(problem.target_all())] * 2
    assert len(problem.target_all()) > len(problem.target_labelled)
    nobody = Probe(target=None, sources="never")
    with pytest.raises(ValueError, match="^probe: no client trains$"):
        run_rounds(nobody, problem, SETTINGS, 0, CPU)


def test_warmup_rounds_use_the_experiments_settings_and_fda_rounds_the_methods(problem):
    settings = replace(SETTINGS, warmup_rounds=2, rounds=2)
    model = build_cell_model(problem, settings, 0, CPU)
    start = ParameterSpace(model).get()
    after_round = []
    probe = Probe(warmup=True, fda_lr=0.0)  # nothing moves in FDA rounds
    history = run_rounds(
        probe,
        problem,
        settings,
        0,
        CPU,
        on_round=lambda r, n: after_round.append(ParameterSpace(model).get()),
        model=model,
    )
    assert [r["phase"] for r in history["rounds"]] == ["warmup", "warmup", "fda", "fda"]
    assert not torch.equal(after_round[0], start) and not torch.equal(after_round[1], after_round[0])
    assert torch.equal(after_round[3], after_round[1])
    for inputs in probe.inputs:
        assert inputs.settings.source_lr == inputs.settings.target_lr == 0.0
        assert not inputs.source_updates.any() and not inputs.target_update.any()


def test_only_methods_with_warmup_and_sources_get_warmup_rounds(problem):
    settings = replace(SETTINGS, warmup_rounds=2, rounds=1)
    phases = {}
    for label, probe in {
        "no warmup": Probe(warmup=False),
        "warmup, no sources": Probe(warmup=True, sources="never"),
        "warmup": Probe(warmup=True),
    }.items():
        phases[label] = [r["phase"] for r in run_rounds(probe, problem, settings, 0, CPU)["rounds"]]
    assert phases == {"no warmup": ["fda"], "warmup, no sources": ["fda"], "warmup": ["warmup", "warmup", "fda"]}


@pytest.mark.parametrize("momentum, server_lr", [(0.0, 1.0), (0.0, 0.3), (0.5, 0.7)])
def test_the_server_step_is_applied_with_server_lr_and_momentum(problem, momentum, server_lr):
    settings = replace(SETTINGS, warmup_rounds=0, rounds=3, server_momentum=momentum, server_lr=server_lr)
    model = build_cell_model(problem, settings, 0, CPU)
    theta = ParameterSpace(model).get()
    direction = torch.linspace(-1, 1, theta.numel())
    steps = [direction * (r + 1) for r in range(3)]
    run_rounds(Probe(steps=steps), problem, settings, 0, CPU, model=model)
    velocity = torch.zeros_like(theta)
    for step in steps:  # v <- mu v + step; theta <- theta + server_lr v (docs/design/methods.md, rounds.py docstring)
        velocity = momentum * velocity + step
        theta = theta + server_lr * velocity
    assert torch.allclose(ParameterSpace(model).get(), theta, atol=1e-5)


def test_a_strong_proximal_pull_keeps_every_client_at_its_start(problem):
    free, pulled = Probe(warmup=True), Probe(warmup=True, proximal=Proximal(mu=1e9))
    run_rounds(free, problem, SETTINGS, 0, CPU)
    run_rounds(pulled, problem, SETTINGS, 0, CPU)
    for a, b in zip(free.inputs, pulled.inputs):
        assert a.source_updates.abs().max() > 1e-3 and a.target_update.abs().max() > 1e-3
        assert b.source_updates.abs().max() < 1e-6 and b.target_update.abs().max() < 1e-6


class _NormalisedMLP(nn.Module):
    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(), nn.Linear(inputs, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, outputs)
        )

    def forward(self, x):
        return self.layers(x)


def test_buffers_are_the_sources_weighted_average_in_warmup_and_the_targets_after_it_trains(problem):
    torch.manual_seed(0)
    model = _NormalisedMLP(int(torch.tensor(problem.input_shape).prod()), problem.num_outputs)
    seen = []
    probe = Probe(warmup=True)

    def after_round(record, total):
        buffers = [b.detach().clone() for b in model.buffers()]
        counts = torch.tensor([len(s) for s in problem.sources], dtype=torch.float64)
        sources = [probe.source_buffers[s.name] for s in problem.sources]
        seen.append((record["phase"], buffers, sources, counts, probe.target_buffers))

    run_rounds(probe, problem, SETTINGS, 0, CPU, on_round=after_round, model=model)
    assert [phase for phase, *_ in seen] == ["warmup", "fda", "fda"]
    phase, buffers, sources, counts, _ = seen[0]
    weights = counts / counts.sum()
    mean = sum(w * s[0].double() for w, s in zip(weights, sources))
    assert torch.allclose(buffers[0].double(), mean, atol=1e-6)  # running mean: sample-weighted
    assert not torch.allclose(sources[0][0], sources[1][0])  # (the sources do differ)
    assert buffers[2] == max(s[2] for s in sources)  # the batch counter: the largest
    for _, buffers, _, _, target in seen[1:]:
        assert all(torch.equal(b, t) for b, t in zip(buffers, target))


def test_records_are_handed_to_the_callback_as_they_are_made(problem):
    calls = []
    history = run_rounds(Probe(warmup=True), problem, SETTINGS, 0, CPU, on_round=lambda r, n: calls.append((r, n)))
    assert [r["round"] for r in history["rounds"]] == [0, 1, 2]
    assert [n for _, n in calls] == [3, 3, 3]
    assert [r for r, _ in calls] == history["rounds"]


def test_client_batches_come_from_their_own_streams_not_the_global_generator(problem):
    """Two runs from the same initial model give the same numbers whatever the global RNG holds."""
    results = []
    for global_seed in (1, 2):
        model = build_cell_model(problem, SETTINGS, 0, CPU)
        torch.manual_seed(global_seed)
        history = run_rounds(get_method("fedda", {"beta": 0.5}), problem, SETTINGS, 0, CPU, model=model)
        results.append(([r["accuracy"] for r in history["rounds"]], ParameterSpace(model).get()))
    assert results[0][0] == results[1][0] and torch.equal(results[0][1], results[1][1])


def test_the_cell_model_is_built_with_the_experiments_model_options(problem):
    settings = replace(SETTINGS, model="mlp", model_options={"hidden": [7]})
    inputs = int(torch.tensor(problem.input_shape).prod())
    model = build_cell_model(problem, settings, 0, CPU)
    assert ParameterSpace(model).size == inputs * 7 + 7 + 7 * problem.num_outputs + problem.num_outputs


def test_local_settings_carry_the_optimiser_to_sources_and_target():
    settings = replace(
        SETTINGS, optimizer="sgd", momentum=0.9, weight_decay=1e-3, source_lr=0.1, target_lr=0.2, target_local_epochs=3
    )
    source, target = local_settings(settings)
    for local in (source, target):
        assert (local.optimizer, local.momentum, local.weight_decay) == ("sgd", 0.9, 1e-3)
    assert (source.lr, source.batch_size, source.epochs) == (0.1, settings.source_batch_size, settings.local_epochs)
    assert (target.lr, target.batch_size, target.epochs) == (0.2, settings.target_batch_size, 3)
    assert source.phase == target.phase == ""  # outside the loop's rounds: no phase
    assert {local.phase for local in local_settings(settings, "dictionary")} == {"dictionary"}


def test_default_phases_are_the_warmup_then_the_rules_rounds():
    """FedAvg warm-up over the sources alone, then the method's rounds (sources only where they keep training)."""
    from fdabench.federation.rule_interface import Phase, default_phases

    settings = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 5, "warmup_rounds": 2})
    assert default_phases(get_method("warmup_target_only"), settings, True) == [
        Phase("warmup", 2, sources=True, target=False, step="fedavg"),
        Phase("fda", 5, sources=False, target=True, step="rule"),
    ]
    assert default_phases(get_method("fedgp"), settings, False)[1] == Phase("fda", 5, sources=True, target=True)
    assert default_phases(get_method("target_only"), settings, True)[0].rounds == 0  # no warm-up asked for


def test_a_local_rounds_record_keeps_the_metric_the_loss_and_the_validation_scores_only():
    from fdabench.federation.rounds import local_record

    metrics = {"accuracy": 0.5, "loss": 1.0, "auc": 0.7, "global_accuracy": 0.1}
    metrics |= {"source_val_accuracy": 0.4, "target_val_loss": 0.3}
    assert local_record(metrics, "accuracy") == {
        "accuracy": 0.5,
        "loss": 1.0,
        "source_val_accuracy": 0.4,
        "target_val_loss": 0.3,
    }
    assert local_record({"mse": 2.0, "loss": 2.0}, "mse") == {"mse": 2.0, "loss": 2.0}


def _with_phases(method, phases):
    method.phases = lambda settings, has_sources: phases
    return method


def test_a_local_phase_makes_theta_the_targets_model_without_a_server_step(problem):
    """A "local" round: θ becomes the target's model whatever the server's learning rate (the same losses as a rule
    round that adds the target's update at server_lr 1), nothing is counted, and the record keeps the metric and the
    loss only."""
    from fdabench.federation.rule_interface import Phase

    local = _with_phases(Probe(), [Phase("finetune", 2, sources=False, step="local")])
    rule = _with_phases(Probe(), [Phase("fda", 2, sources=False, step="rule")])
    tuned = run_rounds(local, problem, replace(SETTINGS, server_lr=0.5), 0, CPU)["rounds"]
    stepped = run_rounds(rule, problem, replace(SETTINGS, server_lr=1.0), 0, CPU)["rounds"]
    assert [r["loss"] for r in tuned] == [r["loss"] for r in stepped]
    assert [r["accuracy"] for r in tuned] == [r["accuracy"] for r in stepped]
    assert all(r["bytes_uplink"] == r["bytes_downlink"] == 0 for r in tuned)
    assert set(stepped[0]) - set(tuned[0]) == {"auc"}  # what a local round's record leaves out


class _RecordedSites:
    """Any sites, with the sources' and the target's replies and what the target was handed kept per round."""

    def __init__(self, inner):
        self.inner, self.rounds = inner, []
        self.source_names, self.source_counts, self.has_target = inner.source_names, inner.source_counts, True

    def train_sources(self, *args, **kwargs):
        replies = self.inner.train_sources(*args, **kwargs)
        self.rounds.append({"sources": replies})
        return replies

    def train_target(self, inputs, start, settings):
        reply = self.inner.train_target(inputs, start, settings)
        self.rounds[-1] |= {"forwarded": inputs.source_buffers, "target": reply}
        return reply

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_kd3a_gets_the_source_buffers_and_the_server_weighs_the_buffers_by_its_weights(problem):
    """KD3A's target receives each source's buffers with its model (its `delivery`); after the
    round the global buffers are the sources' and the target's averaged with the domain weights (`buffer_weights`)."""
    from fdabench.federation.parameters import average_buffers

    settings = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 2, "model_options": {"hidden": [16], "norm": "batch"}})
    recorded, after = [], []
    method = get_method("kd3a")

    def hook(sites):
        recorded.append(_RecordedSites(sites))
        return recorded[0]

    def after_round(record, total):
        after.append((record, [b.detach().clone() for b in model.buffers()]))

    model = build_cell_model(problem, settings, 0, CPU)
    run_rounds(method, problem, settings, 0, CPU, on_round=after_round, model=model, sites_hook=hook)
    assert len(after) == len(recorded[0].rounds) == 2
    for (record, buffers), seen in zip(after, recorded[0].rounds, strict=True):
        sources = seen["sources"].buffers
        assert len(sources) == len(problem.sources) and all(len(b) == len(buffers) for b in sources)
        assert all(
            all(torch.equal(f, s) for f, s in zip(forwarded, source))
            for forwarded, source in zip(seen["forwarded"], sources, strict=True)
        )
        weights = torch.tensor(record["domain_weights"])
        expected = average_buffers([*sources, seen["target"].buffers], weights)
        assert all(torch.allclose(b, e) for b, e in zip(buffers, expected, strict=True))
        assert not torch.allclose(buffers[0], sources[0][0])  # (not one client's buffers)


def test_the_broadcast_reaches_the_target_only_where_the_method_sends_it_there():
    """Co-MDA's queries go to the sources only (its `delivery`): the target gets no broadcast."""
    from types import SimpleNamespace

    from fdabench.federation.rule_interface import target_broadcast

    inputs = SimpleNamespace(broadcast=torch.ones(3))
    assert target_broadcast(SimpleNamespace(delivery=Delivery(broadcast_to_target=False)), inputs) is None
    assert target_broadcast(SimpleNamespace(delivery=Delivery()), inputs) is inputs.broadcast


def test_after_a_round_in_which_the_target_trained_the_buffers_are_the_targets(problem):
    """BatchNorm statistics are not averaged with the sources' after a round in which the target trained: the model is
    evaluated on the target domain, so the global buffers become the target's."""
    settings = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 2, "model_options": {"hidden": [16], "norm": "batch"}})
    recorded, after = [], []

    def hook(sites):
        recorded.append(_RecordedSites(sites))
        return recorded[0]

    def after_round(record, total):
        after.append([b.detach().clone() for b in model.buffers()])

    model = build_cell_model(problem, settings, 0, CPU)
    run_rounds(get_method("fedgp"), problem, settings, 0, CPU, on_round=after_round, model=model, sites_hook=hook)
    assert len(after) == len(recorded[0].rounds) == 2
    for buffers, seen in zip(after, recorded[0].rounds, strict=True):
        target = seen["target"].buffers
        assert target and all(torch.equal(b, t) for b, t in zip(buffers, target, strict=True))
        assert not all(torch.equal(b, s) for b, s in zip(buffers, seen["sources"].buffers[0], strict=True))


def test_a_target_that_receives_the_source_updates_is_sent_only_those_that_came():
    """The target's bytes of a round (`rounds.train_target`): θ down and its update and count up; forwarded source
    updates down only where there are some (none answered: nothing forwarded)."""
    from types import SimpleNamespace

    from fdabench.federation.delivery import COUNT_BYTES, Traffic
    from fdabench.federation.rounds import train_target
    from fdabench.federation.rule_interface import Phase, RoundInputs

    result = SimpleNamespace(update=torch.zeros(5), samples=3, steps=1)
    reply = SimpleNamespace(result=result, statistics=None, buffers=[], message=None)
    clients = SimpleNamespace(has_target=True, train_target=lambda inputs, start, local: reply)
    method = SimpleNamespace(delivery=Delivery(source_updates=True), target_start=lambda inputs: inputs.global_params)
    inputs = RoundInputs(0, torch.zeros(5), (5,), None)
    trained = train_target(clients, method, inputs, None, Phase("fda", 1), update_bytes=20, broadcast_bytes=0)
    assert trained.trained and trained.traffic == Traffic(uplink=20 + COUNT_BYTES, downlink=20)
    inputs.source_updates = torch.zeros(2, 5)
    forwarded = train_target(clients, method, inputs, None, Phase("fda", 1), update_bytes=20, broadcast_bytes=0)
    assert forwarded.traffic == Traffic(uplink=20 + COUNT_BYTES, downlink=20 + 2 * 20)
