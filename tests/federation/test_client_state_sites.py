"""Client state at the sites, call by call: SCAFFOLD's control variates move by option II on every source (and on a
target that trains with state), the server's c reaches every training client, FedBN's target keeps and evaluates with
its own BatchNorm layers, each source scores its validation split with its own, and the shared model is left as the
loop set it. Round-level facts: a warm-up round sends no broadcast; a round with no source answering is the target's
update alone."""

import dataclasses
import time

import pytest
import torch

from fdabench.federation import rounds
from fdabench.federation.client import evaluate, loss_function
from fdabench.federation.client_state import client_view
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import LocalSites, TimedSites, train_source
from fdabench.federation.validation import SOURCE_PREFIX, mean_metrics
from fdabench.methods import Roles, get_method
from fdabench.methods.scaffold import Scaffold, control_update
from tiny import TINY_TRAIN

SGD = {**TINY_TRAIN, "optimizer": "sgd", "momentum": 0.0, "source_lr": 0.05, "target_lr": 0.05}
BATCHNORM = {**SGD, "model_options": {"hidden": [16], "norm": "batch"}}


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("-90")


def _sites(method, problem, train):
    torch.set_num_threads(1)
    settings = TrainSettings.from_dict(train)
    model = method.prepare_model(rounds.build_cell_model(problem, settings, 0, torch.device("cpu")), problem)
    space = ParameterSpace(model)
    sites = LocalSites(method, problem, space, loss_function(problem.task), 0, "off", torch.device("cpu"), 1024)
    return sites, space, settings


class ScaffoldWithTarget(Scaffold):
    """SCAFFOLD in which the target trains too (with its own control variate): what a stateful target receives."""

    roles = Roles(state="all")
    received: list

    def aggregate(self, inputs):
        self.received.append(inputs)
        return super().aggregate(inputs)


def test_every_source_moves_its_control_by_option_two_with_the_broadcast_it_got(problem):
    method = get_method("scaffold")
    sites, space, settings = _sites(method, problem, SGD)
    timed = TimedSites(sites, time.perf_counter)  # the bench's hook passes the broadcast on
    source_local, _ = rounds.local_settings(settings)
    start = space.get()
    server = torch.full((space.size,), 0.01)
    for _ in range(2):
        before = {name: state["control"].clone() for name, state in sites.states.items()}
        replies = timed.train_sources(start, source_local, 0, None, server)
        for name, result, message in zip(sites.source_names, replies.results, replies.messages, strict=True):
            expected = control_update(before[name], server, result.update, result.steps, source_local.lr)
            torch.testing.assert_close(sites.states[name]["control"], expected)
            torch.testing.assert_close(message, expected - before[name])
    timed.restore_client_states({"x": {"control": torch.zeros(1)}})
    assert set(sites.states) == {"x"}


def test_a_target_that_keeps_state_gets_the_broadcast_and_sends_its_message(problem):
    method = ScaffoldWithTarget()
    method.received = []
    history = run_rounds(method, problem, TrainSettings.from_dict({**SGD, "rounds": 2}), 0, torch.device("cpu"))
    m, sources = history["model_size"], len(history["sources"])
    for inputs, record in zip(method.received, history["rounds"], strict=True):
        assert inputs.target_message is not None and inputs.target_message.shape == (m,)
        assert bool(inputs.target_message.abs().sum() > 0)
        # θ and c down to every client, update (+ count) and Δc up from every client
        assert record["bytes_downlink"] == (sources + 1) * 2 * 4 * m
        assert record["bytes_uplink"] == (sources + 1) * (2 * 4 * m + 8)


def test_a_warm_up_round_sends_no_broadcast(problem):
    class WarmScaffold(Scaffold):
        roles = Roles(target=None, state="all", warmup=True)

    history = run_rounds(
        WarmScaffold(),
        problem,
        TrainSettings.from_dict({**SGD, "rounds": 1, "warmup_rounds": 1}),
        0,
        torch.device("cpu"),
    )
    m, sources = history["model_size"], len(history["sources"])
    warm, fda = history["rounds"]
    assert (warm["phase"], fda["phase"]) == ("warmup", "fda")
    assert warm["bytes_downlink"] == sources * 4 * m
    assert fda["bytes_downlink"] == sources * 2 * 4 * m


def test_fedbn_target_trains_and_evaluates_with_its_own_layers_and_leaves_the_shared_model(problem):
    method = get_method("fedbn")
    sites, space, settings = _sites(method, problem, BATCHNORM)
    _, target_local = rounds.local_settings(settings)
    initial = {name: {key: value.clone() for key, value in state.items()} for name, state in sites.states.items()}
    assert sites.target_name in sites.states
    inputs = rounds.RoundInputs(0, space.get(), space.layer_sizes, settings, space.layer_names)
    reply = sites.train_target(inputs, inputs.global_params, target_local)
    own = sites.states[sites.target_name]
    assert reply.state is own and not torch.equal(own["norm"], initial[sites.target_name]["norm"])
    assert reply.result.update[method.local].abs().sum() == 0  # its layers never leave it
    # a second round starts from its own layers: the first round's trained values, not the global ones
    sites.train_target(inputs, inputs.global_params, target_local)
    assert not torch.equal(sites.states[sites.target_name]["norm"], own["norm"])

    sites.train_sources(inputs.global_params, rounds.local_settings(settings)[0])
    params, buffers = space.get(), space.get_buffers()
    metrics = sites.evaluate(params, buffers)
    assert torch.equal(space.get(), params)  # the shared model is left as the loop set it
    assert all(torch.equal(a, b) for a, b in zip(space.get_buffers(), buffers, strict=True))

    def scored_as(state, split):
        view = client_view(method, state, params)
        space.set(view.params)
        space.set_buffers(view.buffers)
        return evaluate(space.model, split, problem.task)

    target = scored_as(sites.states[sites.target_name], problem.target_test)
    assert metrics["accuracy"] == target["accuracy"] and metrics["loss"] == pytest.approx(target["loss"], abs=0)
    assert problem.source_validation, "the fixture's partition holds source samples out"
    per_source = [
        scored_as(sites.states[source.name], split)
        for source, split in zip(problem.sources, problem.source_validation, strict=True)
    ]
    assert metrics[SOURCE_PREFIX + "loss"] == pytest.approx(mean_metrics(per_source)["loss"], abs=0)
    with_target_layers = [scored_as(sites.states[sites.target_name], split) for split in problem.source_validation]
    assert metrics[SOURCE_PREFIX + "loss"] != mean_metrics(with_target_layers)["loss"]


def test_a_round_no_source_answers_is_the_targets_update_alone(problem):
    """Every source drops out (source_dropout 1): each FDA round steps by the target's update alone, as FedDA with
    β = 0 does with every source answering (the target draws its batches from the same stream in both)."""
    silent = run_rounds(
        get_method("fedda"),
        problem,
        TrainSettings.from_dict({**TINY_TRAIN, "source_dropout": 1.0}),
        0,
        torch.device("cpu"),
    )
    alone = run_rounds(
        get_method("fedda", {"beta": 0.0}), problem, TrainSettings.from_dict(TINY_TRAIN), 0, torch.device("cpu")
    )
    assert [r["accuracy"] for r in silent["rounds"]] == [r["accuracy"] for r in alone["rounds"]]
    assert [r["loss"] for r in silent["rounds"]] == [r["loss"] for r in alone["rounds"]]


def test_a_targets_correction_is_applied_to_its_training(problem):
    """The server's c reaches a stateful target's local steps: another c, another update."""
    updates = []
    for level in (0.0, 0.5):
        method = ScaffoldWithTarget()
        sites, space, settings = _sites(method, problem, SGD)
        _, target_local = rounds.local_settings(settings)
        inputs = rounds.RoundInputs(0, space.get(), space.layer_sizes, settings, space.layer_names)
        inputs.broadcast = torch.full((space.size,), level)
        updates.append(sites.train_target(inputs, inputs.global_params, target_local).result.update)
    assert not torch.allclose(updates[0], updates[1])


def test_each_client_draws_its_batches_from_its_own_stream():
    from fdabench.federation.sites import client_generator

    draws = [torch.randperm(50, generator=client_generator(0, index)).tolist() for index in range(3)]
    assert len({tuple(d) for d in draws}) == 3
    assert torch.randperm(50, generator=client_generator(0, 1)).tolist() == draws[1]


def test_cohorts_and_the_timing_hook_answer_for_the_sources_asked(problem):
    """With cohorts on, a round that asks one source trains that one and says so; the bench's timing hook passes
    the round and the sources asked on (the simulated dropout reads the round's own stream)."""
    method = get_method("source_only")
    settings = TrainSettings.from_dict(TINY_TRAIN)
    model = rounds.build_cell_model(problem, settings, 0, torch.device("cpu"))
    space = ParameterSpace(model)
    loss = loss_function(problem.task)
    cohort = LocalSites(method, problem, space, loss, 0, "on", torch.device("cpu"), 1024)
    assert cohort.cohort
    source_local, _ = rounds.local_settings(settings)
    replies = TimedSites(cohort, time.perf_counter).train_sources(space.get(), source_local, 0, [1])
    assert replies.present == [1] and len(replies.results) == 1
    dropping = [
        LocalSites(method, problem, space, loss, 0, "off", torch.device("cpu"), 1024, dropout=0.5) for _ in range(2)
    ]
    direct = [dropping[0].train_sources(space.get(), source_local, r, None).present for r in range(6)]
    timed = TimedSites(dropping[1], time.perf_counter)
    assert [timed.train_sources(space.get(), source_local, r, None).present for r in range(6)] == direct
    assert len({tuple(p or ()) for p in direct}) > 1  # the rounds drop different sources


def test_ditto_keeps_its_personal_model_at_the_target_and_reports_it_beside_the_global_model(problem):
    """Only the target keeps state (`Roles.state`): its personal model moves in its round while the update it sends
    is the global copy's; the record is the personal model's metric and loss with the global model's beside them."""
    method = get_method("ditto")
    sites, space, settings = _sites(method, problem, TINY_TRAIN)
    assert set(sites.states) == {sites.target_name}
    source_local, target_local = rounds.local_settings(settings)
    start = space.get()
    inputs = RoundInputs(0, start, space.layer_sizes, settings, space.layer_names)
    reply = sites.train_target(inputs, start, target_local)
    personal = sites.states[sites.target_name]["personal"]
    assert not torch.equal(personal, start) and not torch.equal(personal, start + reply.result.update)
    params = start + reply.result.update
    space.set(params)
    metrics = sites.evaluate(params, [])
    assert metrics["global_loss"] == evaluate(space.model, problem.target_test, problem.task)["loss"]
    space.set(personal)
    assert metrics["loss"] == evaluate(space.model, problem.target_test, problem.task)["loss"]
    assert torch.equal(space.get(), personal) and "auc" not in metrics  # the record keeps the metric and loss only
    space.set(params)
    sites.evaluate(params, [])
    assert torch.equal(space.get(), params)  # evaluation leaves the shared model as the loop set it


def test_fedrep_heads_trained_together_equal_each_clients_own_round(problem):
    """In process the sources' heads train together (`local_rounds`); over Flower each site trains its own
    (`local_round`): the same heads and updates, to float rounding."""
    method = get_method("fedrep")
    sites, space, settings = _sites(method, problem, TINY_TRAIN)
    source_local, _ = rounds.local_settings(settings)
    start = space.get()
    together = sites.train_sources(start, source_local)
    heads = [sites.states[name]["head"] for name in sites.source_names]
    alone, _, _ = _sites(method, problem, TINY_TRAIN)
    for index, name in enumerate(alone.source_names):
        data, generator = alone.sources[index], alone.generators[index]
        result, state, _ = train_source(
            method, space, data, start, source_local, alone.loss_fn, generator, alone.states[name]
        )
        torch.testing.assert_close(state["head"], heads[index], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(result.update, together.results[index].update, rtol=1e-5, atol=1e-7)
        assert not result.update[method.body_size :].any()  # the head never leaves its client


def test_fedrep_sources_of_a_model_without_buffers_train_their_heads_in_one_call(problem, monkeypatch):
    """In process the sources' rounds go to `local_rounds` together, once per source round (the vectorised heads),
    and a source's own `local_round` is not called."""
    method = get_method("fedrep")
    sites, space, settings = _sites(method, problem, TINY_TRAIN)
    together, alone = [], []
    local_rounds, local_round = method.local_rounds, method.local_round
    monkeypatch.setattr(
        method, "local_rounds", lambda clients, *rest: together.append(len(clients)) or local_rounds(clients, *rest)
    )
    monkeypatch.setattr(
        method, "local_round", lambda client, *rest: alone.append(client.role) or local_round(client, *rest)
    )
    sites.train_sources(space.get(), rounds.local_settings(settings)[0])
    assert together == [len(problem.sources)] and alone == []


def test_a_source_s_own_round_gets_the_broadcast(problem):
    """Co-MDA's sources answer the queries the server broadcast, from their own round (`local_round`)."""
    method = get_method("comda")
    sites, space, settings = _sites(method, problem, TINY_TRAIN)
    queries = torch.cat([problem.target_labelled.x, problem.target_unlabelled.x])
    replies = sites.train_sources(space.get(), rounds.local_settings(settings)[0], broadcast=queries.reshape(-1))
    assert [m.shape for m in replies.messages] == [(len(queries) * problem.num_outputs,)] * len(problem.sources)


def test_a_target_s_own_round_draws_from_the_target_s_batch_stream(problem):
    """Finetune_Offline's epoch at the target (its `local_round`) is the target's local training from its own stream."""
    from fdabench.federation.client import train_locally
    from fdabench.federation.sites import client_generator

    method = get_method("finetune_offline")
    sites, space, settings = _sites(method, problem, TINY_TRAIN)
    _, target_local = rounds.local_settings(settings)
    start = space.get()
    inputs = RoundInputs(0, start, space.layer_sizes, settings, space.layer_names)
    reply = sites.train_target(inputs, start, target_local)
    expected = train_locally(
        space,
        start,
        problem.target_labelled,
        dataclasses.replace(target_local, epochs=1),
        sites.loss_fn,
        client_generator(0, len(problem.sources)),
    )
    assert target_local.batch_size < len(problem.target_labelled)  # the batch order is drawn
    assert torch.equal(reply.result.update, expected.update)
