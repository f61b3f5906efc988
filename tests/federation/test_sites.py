"""The round loop through its `Sites` interface: a transport that could not reach a source has the round aggregate
the others (their names, counts and bytes only), evaluation is handed the global parameters just set, and a
`sites_hook` (the bench's `TimedSites`) sees every call and changes nothing."""

import torch

from fdabench.federation import rounds
from fdabench.federation.delivery import COUNT_BYTES
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import ROUND_PARTS, LocalSites, TimedSites
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

    def train_sources(self, start, settings, round_index=0, asked=None, broadcast=None):
        replies = super().train_sources(start, settings, round_index, asked, broadcast)
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
    assert history["rounds"][1]["bytes_uplink"] - history["rounds"][2]["bytes_uplink"] == update + COUNT_BYTES
    assert history["rounds"][1]["bytes_downlink"] == history["rounds"][2]["bytes_downlink"]  # θ still goes to all


def test_evaluation_gets_the_global_parameters_just_set():
    history, _, sites, model = _run("fedgp", beta=0.5)
    assert len(sites.evaluated) == len(history["rounds"])
    final, buffers = sites.evaluated[-1]
    assert torch.equal(final, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert buffers == []  # the MLP has none; a transport sends what there is


class _Clock:
    """A clock that advances by `step` at each reading, so every timed call lasts a known time."""

    def __init__(self, step: float = 1.0):
        self.now, self.step, self.readings = 0.0, step, 0

    def __call__(self) -> float:
        self.now += self.step
        self.readings += 1
        return self.now


class _Inner:
    """Sites that answer at once and record what they were asked."""

    def __init__(self, cohorts: int):
        self.source_names, self.source_counts, self.has_target = ("a", "b"), torch.tensor([2.0, 3.0]), True
        self.cohorts_per_round, self.calls, self.streams = cohorts, [], [torch.Generator()]

    def train_sources(self, start, settings, round_index=0, asked=None, broadcast=None):
        self.calls.append(("sources", start, settings))
        return "sources reply"

    def train_target(self, inputs, start, settings):
        self.calls.append(("target", inputs, start, settings))
        return "target reply"

    def evaluate(self, params, buffers):
        self.calls.append(("evaluate", params, buffers))
        return {"accuracy": 0.5}

    def random_streams(self):
        return self.streams


def test_timed_sites_time_each_part_and_the_server_step_between_replies_and_evaluation():
    inner, clock = _Inner(cohorts=2), _Clock()
    timed = TimedSites(inner, clock)
    # an evaluation before anything trained (a fresh loop) has no server step to count
    fresh = TimedSites(_Inner(cohorts=0), _Clock())
    assert fresh.evaluate("params", []) == {"accuracy": 0.5}
    assert fresh.seconds == {"source_training": 0.0, "target_training": 0.0, "aggregation": 0.0, "evaluation": 1.0}
    assert (timed.source_names, timed.has_target) == (("a", "b"), True)
    assert torch.equal(timed.source_counts, inner.source_counts) and timed.random_streams() is inner.streams
    assert timed.seconds == dict.fromkeys(ROUND_PARTS, 0.0) and timed.cohorts == 0
    # a round: sources (readings 1, 2), target (3, 4), evaluation (5, 6); the server step is reading 4 to 5
    assert timed.train_sources("θ", "local") == "sources reply"
    assert timed.train_target("inputs", "θ_T", "target local") == "target reply"
    assert timed.evaluate("params", ["buffers"]) == {"accuracy": 0.5}
    assert inner.calls == [
        ("sources", "θ", "local"),
        ("target", "inputs", "θ_T", "target local"),
        ("evaluate", "params", ["buffers"]),
    ]
    assert timed.seconds == {"source_training": 1.0, "target_training": 1.0, "aggregation": 1.0, "evaluation": 1.0}
    assert timed.cohorts == 2
    # an evaluation with no training reply before it (nothing trained since the last one) adds no server step
    timed.evaluate("params", [])
    assert timed.seconds["aggregation"] == 1.0 and timed.seconds["evaluation"] == 2.0
    # a warm-up round (sources only), with a slower clock: the server step runs from the sources' reply
    clock.step = 3.0
    timed.train_sources("θ", "local")
    timed.evaluate("params", [])
    assert timed.seconds == {"source_training": 4.0, "target_training": 1.0, "aggregation": 4.0, "evaluation": 5.0}
    assert timed.cohorts == 4 and clock.readings == 12
    # sites that train no cohorts (e.g. over Flower: no `cohorts_per_round`) count none
    remote = _Inner(cohorts=0)
    del remote.cohorts_per_round
    other = TimedSites(remote, _Clock())
    other.train_sources("θ", "local")
    assert other.cohorts == 0


def test_a_sites_hook_sees_every_call_and_changes_no_result():
    problem, settings = _problem(), TrainSettings.from_dict(SETTINGS)
    plain = rounds.run_rounds(get_method("fedgp", {"beta": 0.5}), problem, settings, 0, torch.device("cpu"))
    hooked: list[TimedSites] = []

    def hook(sites):
        assert isinstance(sites, LocalSites)
        hooked.append(TimedSites(sites, _Clock()))
        return hooked[-1]

    timed = rounds.run_rounds(
        get_method("fedgp", {"beta": 0.5}), problem, settings, 0, torch.device("cpu"), sites_hook=hook
    )
    strip = lambda history: [{k: v for k, v in r.items() if k != "seconds"} for r in history["rounds"]]
    assert strip(timed) == strip(plain) and len(hooked) == 1
    # 1 warm-up and 2 FDA rounds: the sources train 3 times, the target twice, every round is evaluated
    assert hooked[0].seconds == {"source_training": 3.0, "target_training": 2.0, "aggregation": 3.0, "evaluation": 3.0}


def test_local_sites_count_the_cohorts_a_source_round_trains():
    problem = FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client("s0", 20, 0), aux_client("s1", 20, 1), aux_client("s2", 30, 2)],
        aux_client("t", 16, 10),
        aux_client("u", 10, 11),
        aux_client("test", 30, 12),
    )
    settings = TrainSettings.from_dict(SETTINGS)
    model = rounds.build_cell_model(problem, settings, 0, torch.device("cpu"))
    space = ParameterSpace(model)
    loss_fn = rounds.loss_function(problem.task)
    method = get_method("fedgp", {"beta": 0.5})
    make = lambda cohort: LocalSites(method, problem, space, loss_fn, 0, cohort, torch.device("cpu"), 1024)
    # the two sources of 20 samples train as one cohort, the one of 30 alone; one by one: no cohort
    assert make("on").cohorts_per_round == 1 and make("off").cohorts_per_round == 0


def test_the_unlabelled_split_is_every_training_input_with_no_label_at_all():
    """`Roles(target="unlabelled")` (f-DANN, f-WDGRL, Co-MDA): the labelled and the unlabelled inputs, in that order,
    every label -1 and no auxiliary label, under a name of its own; the other splits as named."""
    from fdabench.federation.sites import target_training_data

    labelled, unlabelled = aux_client("t_lab", 6, seed=1), aux_client("t_unl", 9, seed=2)
    data = target_training_data("unlabelled", labelled, unlabelled)
    assert data.name == "target_inputs" and torch.equal(data.x, torch.cat([labelled.x, unlabelled.x]))
    assert data.y.shape == (15,) and (data.y == -1).all() and data.aux == {}
    assert labelled.aux and (labelled.y >= 0).all()  # the clients' own data keep their labels
    assert target_training_data("labelled", labelled, unlabelled) is labelled
    assert target_training_data(None, labelled, unlabelled) is None
