"""Cells trained together (`federation.lockstep`): a cell's result does not depend on its group, its position in it or
whether it has one; cells that cannot compute stacked (a proximal term, an observer, a model with buffers) run in the
group as alone; `batching: off` cells in a group are the one-by-one cells of today; one cell's failure is its own."""

import time

import pytest
import torch

from fdabench.federation.client import cpu_seconds
from fdabench.federation.lockstep import Lockstep, batching_scope, run_together
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import AUX_TRAIN, aux_client

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the stacked kernels compute on one CPU thread


SETTINGS = {**AUX_TRAIN, "rounds": 3, "warmup_rounds": 1, "source_lr": 0.05, "target_lr": 0.05}


def _problem(seed=0, sizes=(40, 40)) -> FederatedProblem:
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client(f"s{index}", size, 10 * seed + index) for index, size in enumerate(sizes)],
        aux_client("t", 16, 10 * seed + 5),
        aux_client("u", 10, 10 * seed + 6),
        aux_client("test", 30, 10 * seed + 7),
        aux_classes={"sex": 2, "age_decade": 5},
    )


def _cell(name, seed, batching="stacked", hparams=None, sizes=(40, 40), **train):
    """A job that runs one cell's round loop; its per-round records without their timing."""
    settings = TrainSettings.from_dict({**SETTINGS, **train, "batching": batching})

    def job():
        history = run_rounds(
            get_method(name, hparams or {}), _problem(seed, sizes), settings, seed, torch.device("cpu")
        )
        return [{k: v for k, v in record.items() if k != "seconds"} for record in history["rounds"]]

    return job


CELLS = [
    ("source_only", 0),
    ("fedgp", 1, "stacked", {"beta": 0.5}),
    ("target_only", 2),
    ("fedda", 3, "stacked", {"beta": 0.5}),
    ("fedgp_auto", 4),  # the target trains with an observer: alone, in the cell's thread
    ("fedprox", 5, "stacked", {"mu": 0.1}),  # a proximal term: alone
    ("source_only", 6, "stacked", None, (40, 24)),  # sources of unequal sizes: other groups, every step kept
    ("fedgp", 7, "off", {"beta": 0.5}),  # one by one, in the group
]


def _jobs(indices):
    return [_cell(*CELLS[index]) for index in indices]


def test_a_cell_does_not_depend_on_its_group():
    alone = [job() for job in _jobs(range(len(CELLS)))]
    first, stats = run_together(_jobs(range(len(CELLS))))
    second, _ = run_together(_jobs([7, 5, 3, 1, 6]))
    assert first == alone
    assert second == [alone[index] for index in [7, 5, 3, 1, 6]]
    # it did compute together: stacked trainings and evaluations of several cells each
    assert stats.stacked_calls > 0 and stats.stacked_requests > stats.stacked_calls
    assert set(stats.by_kind) == {"train", "evaluate"}


def test_batching_off_in_a_group_is_one_by_one():
    """A `batching: off` cell computes with the one-by-one kernels in a group as alone: today's results, untouched."""
    off = _cell("fedgp", 1, "off", {"beta": 0.5})
    (together,), stats = run_together([off])
    assert together == off()
    assert stats.requests == 0


def test_stacked_is_close_to_one_by_one():
    """The stacked kernels round otherwise only in the last bits: the same cell's accuracy curves agree."""
    stacked = _cell("fedgp", 1, "stacked", {"beta": 0.5})()
    off = _cell("fedgp", 1, "off", {"beta": 0.5})()
    assert [r["accuracy"] for r in stacked] == pytest.approx([r["accuracy"] for r in off], abs=0.04)
    assert [r["loss"] for r in stacked] == pytest.approx([r["loss"] for r in off], rel=1e-4)


def test_a_failing_cell_fails_alone():
    def broken():
        raise RuntimeError("this cell's own error")

    outcomes, _ = run_together([_cell("source_only", 0), broken, _cell("fedgp", 1, "stacked", {"beta": 0.5})])
    assert isinstance(outcomes[1], RuntimeError)
    assert outcomes[0] == _cell("source_only", 0)()
    assert outcomes[2] == _cell("fedgp", 1, "stacked", {"beta": 0.5})()


def test_each_cell_sees_its_own_global_random_state():
    """A cell that draws from torch's global generator between its trainings draws what it draws alone."""

    def drawing(seed):
        inner = _cell("source_only", seed)

        def job():
            torch.manual_seed(seed)
            before = torch.rand(3)
            records = inner()
            return before, torch.rand(3), records

        return job

    alone = [drawing(seed)() for seed in (0, 1)]
    together, _ = run_together([drawing(0), drawing(1)])
    for mine, theirs in zip(together, alone, strict=True):
        assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1]) and mine[2] == theirs[2]


def test_an_unknown_batching_is_refused():
    with pytest.raises(ValueError, match="unknown batching 'vmap'"), batching_scope("vmap"):
        pass


def test_stacked_on_several_cpu_threads_is_refused():
    """Refused before any training step (nothing runs on the two threads: a forked test worker, as mutation testing
    uses, would hang in a new OpenMP pool)."""
    problem, settings = _problem(1), TrainSettings.from_dict({**SETTINGS, "batching": "stacked"})
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="one CPU thread"):
            run_rounds(get_method("fedgp", {"beta": 0.5}), problem, settings, 1, torch.device("cpu"))
    finally:
        torch.set_num_threads(1)  # the module's other tests run on one thread (`one_torch_thread`)


def test_lockstep_returns_results_in_job_order():
    results = Lockstep().run([lambda: 1, lambda: 2, lambda: 3])
    assert results == [1, 2, 3]


def test_partial_participation_computes_the_sources_that_answered():
    """With half the sources asked each round, a stacked cell trains and weighs those that answered, as one by one
    does (the same participation records, curves to rounding), alone as in a group."""
    make = lambda batching: _cell("fedgp", 8, batching, {"beta": 0.5}, (40, 40, 40, 40), participation=0.5)
    alone, off = make("stacked")(), make("off")()
    (together, _), _ = run_together([make("stacked"), _cell("source_only", 0)])
    assert together == alone
    assert [r["answered"] for r in alone] == [r["answered"] for r in off]
    assert [r["loss"] for r in alone] == pytest.approx([r["loss"] for r in off], rel=1e-4)


def test_the_cells_cpu_times_add_up_to_the_groups():
    """In a group each cell's CPU time (`client.cpu_seconds`: what `train_cpu_seconds` records) is its own turns and
    its share of what the group computed for it, so the cells' times add up to the process's CPU time for the
    group, not to several times it (the process's clock in every cell would count every cell's work in each)."""

    def timed(job):
        def run():
            started = cpu_seconds()
            job()
            return cpu_seconds() - started

        return run

    started = time.process_time()
    times, stats = run_together([timed(job) for job in _jobs([0, 1, 3, 6])])
    group = time.process_time() - started
    assert stats.stacked_calls > 0 and all(seconds > 0 for seconds in times)
    assert sum(times) <= group * 1.02 + 0.01
    assert sum(times) >= group * 0.5  # the accounting misses little: hand-overs and the scheduler's own work
    assert cpu_seconds() == pytest.approx(time.process_time(), abs=0.01)  # a cell alone: the process's clock
