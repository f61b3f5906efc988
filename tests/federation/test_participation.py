"""Partial participation and simulated dropout: seeded per round, recorded per round, and the rules combine only
the sources that answered."""

from collections import Counter

import torch

from fdabench.federation.participation import asked_sources, dropped_sources
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import AUX_TRAIN, aux_client

SETTINGS = {**AUX_TRAIN, "rounds": 8, "warmup_rounds": 1}


def _problem(sources: int = 6) -> FederatedProblem:
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client(f"s{index}", 20 + 2 * index, index) for index in range(sources)],
        aux_client("t", 16, 30),
        aux_client("u", 10, 31),
        aux_client("test", 30, 32),
    )


def test_a_round_asks_a_seeded_sample_of_the_sources():
    assert asked_sources(6, 1.0, 0, 3) == list(range(6))
    draws = [asked_sources(6, 0.5, 0, r) for r in range(200)]
    assert all(len(d) == 3 and d == sorted(set(d)) for d in draws)
    assert draws == [asked_sources(6, 0.5, 0, r) for r in range(200)]  # the same on every call
    assert draws != [asked_sources(6, 0.5, 1, r) for r in range(200)]  # another seed, other samples
    counts = Counter(index for d in draws for index in d)
    assert all(80 <= counts[index] <= 120 for index in range(6)), counts  # each asked about half the time
    assert asked_sources(6, 0.01, 0, 0) != [] and len(asked_sources(6, 0.01, 0, 0)) == 1  # at least one


def test_dropout_drops_each_asked_source_with_its_probability():
    assert dropped_sources([0, 1, 2], 0.0, 0, 5) == []
    drops = [dropped_sources(list(range(10)), 0.3, 0, r) for r in range(300)]
    assert drops == [dropped_sources(list(range(10)), 0.3, 0, r) for r in range(300)]
    rate = sum(len(d) for d in drops) / 3000
    assert 0.26 < rate < 0.34
    assert set(dropped_sources([4, 7], 0.999, 0, 0)) <= {4, 7}


def _run(name, **settings):
    seen = []
    method = get_method(name, {"beta": 0.5} if name in ("fedgp", "fedda") else {})
    aggregate = method.aggregate

    def recorded(inputs):
        seen.append((inputs.round_index, inputs.source_names, inputs.source_counts.tolist()))
        return aggregate(inputs)

    method.aggregate = recorded
    history = run_rounds(method, _problem(), TrainSettings.from_dict({**SETTINGS, **settings}), 0, torch.device("cpu"))
    return history, seen


def test_the_rule_combines_the_sources_that_answered_and_the_record_names_them():
    history, seen = _run("fedgp", participation=0.5, source_dropout=0.3)
    fda = [r for r in history["rounds"] if r["phase"] == "fda"]
    assert all(len(r["asked"]) == 3 and set(r["answered"]) <= set(r["asked"]) for r in history["rounds"])
    assert any(len(r["answered"]) < len(r["asked"]) for r in history["rounds"])  # some dropped
    by_round = {index: (names, counts) for index, names, counts in seen}
    sizes = {f"s{index}": 20.0 + 2 * index for index in range(6)}
    for record in fda:
        if record["answered"]:
            names, counts = by_round[record["round"]]
            assert list(names) == record["answered"] and counts == [sizes[n] for n in names]
        else:
            assert record["round"] not in by_round  # no source answered: the rule is not asked
    update = history["model_size"] * 4
    for record in history["rounds"]:
        assert record["bytes_downlink"] >= len(record["asked"]) * update  # θ went to every asked source
        assert record["bytes_uplink"] - (0 if record["phase"] == "warmup" else update + 8) == len(
            record["answered"]
        ) * (update + 8)
    again, _ = _run("fedgp", participation=0.5, source_dropout=0.3)
    assert [r["answered"] for r in again["rounds"]] == [r["answered"] for r in history["rounds"]]
    assert [r["accuracy"] for r in again["rounds"]] == [r["accuracy"] for r in history["rounds"]]


def test_auto_weights_are_over_the_sources_that_answered():
    history, _ = _run("fedgp_auto", participation=0.5)
    for record in history["rounds"]:
        if record["phase"] == "fda":
            assert len(record["betas"]) == len(record["answered"]) == 3


def test_a_round_where_no_source_answers_takes_the_target_step_alone():
    history, seen = _run("fedgp", source_dropout=0.97)
    silent = [r for r in history["rounds"] if not r["answered"]]
    assert silent and all(
        r["bytes_uplink"] == (0 if r["phase"] == "warmup" else history["model_size"] * 4 + 8) for r in silent
    )
    assert len(seen) == sum(1 for r in history["rounds"] if r["phase"] == "fda" and r["answered"])


def test_everyone_answering_records_nothing_extra():
    history, _ = _run("fedgp")
    assert all("asked" not in r and "answered" not in r for r in history["rounds"])


def test_after_a_round_without_the_target_the_buffers_average_the_sources_that_answered():
    """In a warm-up round (the target does not train) with half the sources asked, the global buffers (BatchNorm
    statistics) are the average of the answering sources' buffers, weighted by their own sample counts."""
    from fdabench.federation.parameters import average_buffers

    replies, after = [], []

    class Recorded:
        def __init__(self, inner):
            self.inner = inner

        def train_sources(self, *args, **kwargs):
            replies.append(self.inner.train_sources(*args, **kwargs))
            return replies[-1]

        def __getattr__(self, name):
            return getattr(self.inner, name)

    def after_round(record, total):
        after.append([b.detach().clone() for b in model.buffers()])

    from fdabench.federation.rounds import build_cell_model

    problem = _problem()
    model_options = {"hidden": [8], "norm": "batch"}
    settings = TrainSettings.from_dict({**SETTINGS, "rounds": 2, "participation": 0.5, "model_options": model_options})
    model = build_cell_model(problem, settings, 0, torch.device("cpu"))
    run_rounds(
        get_method("fedgp", {"beta": 0.5}),
        problem,
        settings,
        0,
        torch.device("cpu"),
        on_round=after_round,
        model=model,
        sites_hook=Recorded,
    )
    warmup = replies[0]
    assert warmup.present is not None and len(warmup.present) == 3  # half of the 6 sources answered
    counts = torch.tensor([float(len(problem.sources[index].y)) for index in warmup.present])
    expected = average_buffers(warmup.buffers, counts)
    assert expected and all(torch.allclose(b, e) for b, e in zip(after[0], expected, strict=True))
