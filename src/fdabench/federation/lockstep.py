"""Cells trained as one computation, each still its own cell: their round loops run side by side, and what they ask
of local training and evaluation at the same moment is computed together (`federation.stacked`).

A cell whose `batching` setting is `stacked` computes its plain local training and its evaluation with the stacked
kernels (`stacked.train_stacked`, `stacked.evaluate_stacked`), alone (`Solo`) or in a group (`Lockstep`), and its
result is the same either way; `off` (the default) trains one by one, as before.

In a group, each cell runs its whole job (set-up, `run_rounds`, its result) in a thread of its own, but only one thread
runs at a time: a cell runs until it asks for a local training or an evaluation that it computes stacked
(`client.train_locally`, `client.evaluate` hand the call to the cell's `client.Group`), then the next cell runs. When
every cell is waiting or done, the waiting requests are computed, those with the same signature together
(`stacked.groups_by_signature`), and every waiting cell gets its answer and runs on. Everything else a cell does (its
method's aggregation, local training with an observer or a proximal term, the records, its checkpoints) runs in its
own thread exactly as alone. A cell sees its own torch global random state (saved and restored at every switch). So a
cell's result does not depend on its group, its position in it or whether it has one
(tests/federation/test_lockstep.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from fdabench.federation.client import LocalResult, LocalSettings, active_group, join_group
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.stacked import (
    EvaluationRequest,
    TrainRequest,
    evaluate_stacked,
    groups_by_signature,
    stackable_model,
    train_stacked,
)

#: the `batching` setting's values: one by one (the default), or the stacked kernels (`federation.stacked`)
BATCHING_MODES = ("off", "stacked")


@dataclass
class GroupStatistics:
    """What a group computed together: requests answered, and how many stacked computations (of how many
    requests in all) and lone ones served them."""

    requests: int = 0
    stacked_calls: int = 0
    stacked_requests: int = 0
    lone_calls: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class _RandomState:
    """torch's global random states (CPU, and CUDA once it is in use) of one cell: what a model's initialisation and
    dropout draw from. NumPy's and Python's global generators are not kept per cell (saving NumPy's costs 80 µs a
    switch, as much as the switch itself): fdabench's training draws from its own seeded generators
    (`core.streams`), and a plugin must too, or its draws would depend on its group (docs/extending.md)."""

    def __init__(self):
        self.saved: tuple | None = None

    def save(self) -> None:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        self.saved = (torch.get_rng_state(), cuda)

    def restore(self) -> None:
        if self.saved is None:
            return
        cpu, cuda = self.saved
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


class _Cell:
    """One cell's thread and its hand-over with the scheduler."""

    def __init__(self, job: Callable[[], Any]):
        self.job = job
        self.turn = threading.Lock()  # held while the cell must wait; the scheduler releases it to let the cell run
        self.turn.acquire()
        self.random = _RandomState()
        self.requests: list[TrainRequest | EvaluationRequest] = []
        self.answers: list[Any] = []
        self.error: BaseException | None = None
        self.done = False
        self.outcome: Any = None
        #: CPU seconds the cell has used: while its thread ran, and its share of what the group computed for it
        self.cpu_seconds = 0.0
        self.running_since: float | None = None  # process CPU time when its thread last started to run

    def cpu_clock(self) -> float:
        """`cpu_seconds` so far, the turn it is running included."""
        since = self.running_since
        return self.cpu_seconds + (0.0 if since is None else time.process_time() - since)


class Lockstep:
    """Runs jobs (each one cell, start to end) side by side, and computes their local training and evaluation
    together (module docstring). `run` returns each job's return value, or the exception it raised, in job order."""

    def __init__(self):
        self.statistics = GroupStatistics()
        self._back = threading.Lock()  # held while a cell runs; the cell releases it when it asks or ends
        self._back.acquire()

    def run(self, jobs: Sequence[Callable[[], Any]]) -> list[Any]:
        cells = [_Cell(job) for job in jobs]
        start_state = _RandomState()
        start_state.save()
        for cell in cells:
            cell.random.saved = start_state.saved
        threads = [threading.Thread(target=self._serve, args=(cell,), daemon=True) for cell in cells]
        for thread in threads:
            thread.start()
        try:
            waiting = list(cells)
            while waiting:
                for cell in waiting:
                    self._hand_over(cell)
                waiting = [cell for cell in waiting if not cell.done]
                if waiting:
                    self._answer(waiting)
        finally:
            start_state.restore()
        for thread in threads:
            thread.join()
        return [cell.outcome for cell in cells]

    def _hand_over(self, cell: _Cell) -> None:
        """Let `cell` run until it asks for something or ends (the process's CPU meanwhile is the cell's)."""
        cell.running_since = time.process_time()
        cell.turn.release()
        self._back.acquire()
        cell.cpu_seconds += time.process_time() - cell.running_since
        cell.running_since = None

    def _serve(self, cell: _Cell) -> None:
        cell.turn.acquire()
        cell.random.restore()
        join_group(_Member(self, cell))
        try:
            cell.outcome = cell.job()
        except BaseException as error:  # the job's failure is its outcome; the group goes on
            cell.outcome = error
        finally:
            join_group(None)
            cell.done = True
            self._back.release()

    def wait_for_answers(self, cell: _Cell, requests: list[TrainRequest | EvaluationRequest]) -> list[Any]:
        """Called in `cell`'s thread: hand `requests` to the scheduler, wait for the group's answers (in order)."""
        cell.requests, cell.answers, cell.error = requests, [None] * len(requests), None
        cell.random.save()
        self._back.release()
        cell.turn.acquire()
        cell.random.restore()
        if cell.error is not None:
            raise cell.error
        return cell.answers

    def _answer(self, cells: list[_Cell]) -> None:
        """Compute every waiting cell's requests, those with the same signature together."""
        asked = [(cell, position) for cell in cells for position in range(len(cell.requests))]
        requests = [cell.requests[position] for cell, position in asked]
        stats = self.statistics
        for group in groups_by_signature(requests):
            members = [asked[index] for index in group]
            batch = [requests[index] for index in group]
            kind = "train" if isinstance(batch[0], TrainRequest) else "evaluate"
            stats.requests += len(batch)
            stats.by_kind[kind] = stats.by_kind.get(kind, 0) + len(batch)
            started = time.process_time()
            try:
                answers = _compute(batch)
            except Exception as error:  # each cell of the group raises it in its own thread
                for cell, _ in members:
                    cell.error = error
                continue
            if len(batch) > 1:
                stats.stacked_calls += 1
                stats.stacked_requests += len(batch)
            else:
                stats.lone_calls += 1
            share = (time.process_time() - started) / len(batch)  # each request's part of the computation
            for (cell, position), answer in zip(members, answers, strict=True):
                cell.answers[position] = answer
                cell.cpu_seconds += share
        for cell in cells:
            cell.requests = []


def compute_grouped(requests: Sequence[TrainRequest | EvaluationRequest]) -> list[Any]:
    """Every request's answer, in order: those of one signature computed together (`_compute`)."""
    answers: list[Any] = [None] * len(requests)
    for group in groups_by_signature(requests):
        for index, answer in zip(group, _compute([requests[i] for i in group]), strict=True):
            answers[index] = answer
    return answers


def _compute(batch: list[TrainRequest | EvaluationRequest]) -> list[Any]:
    """The answers to requests of one signature, computed stacked (one request too: the same kernels as many)."""
    if isinstance(batch[0], TrainRequest):
        return train_stacked(batch)
    return evaluate_stacked(batch)


class _StackedComputation:
    """A cell's `client.Group`: where the cell computes stacked (`stacked`, its `batching` setting) and the models are
    stackable, its plain local trainings and evaluations become requests that `_answers` computes; anything else is
    computed one by one in the cell's thread (None)."""

    stacked = False

    def _answers(self, requests: list[TrainRequest | EvaluationRequest]) -> list[Any]:
        raise NotImplementedError

    def train(
        self,
        space: ParameterSpace,
        start: Tensor,
        data: ClientData,
        settings: LocalSettings,
        loss_fn: Callable[[Tensor, Tensor], Tensor],
        generator: torch.Generator,
    ) -> LocalResult | None:
        answers = self._trained([TrainRequest(space, start, data, settings, loss_fn, generator)])
        return None if answers is None else answers[0]

    def train_all(self, requests: list[TrainRequest]) -> list[LocalResult] | None:
        return self._trained(requests)

    def _trained(self, requests: list[TrainRequest]) -> list[LocalResult] | None:
        if not (self.stacked and requests and all(stackable_model(r.space.model) for r in requests)):
            return None
        return self._answers(requests)

    def evaluate(self, model: nn.Module, data: ClientData, task: str, batch_size: int) -> dict[str, float] | None:
        if not (self.stacked and stackable_model(model)):
            return None
        return self._answers([EvaluationRequest(model, data, task, batch_size)])[0]


class Solo(_StackedComputation):
    """A `batching: stacked` cell alone: its plain local training and its evaluation computed with the stacked kernels,
    as a group of one (so its result is the one it has in any group)."""

    stacked = True

    def _answers(self, requests: list[TrainRequest | EvaluationRequest]) -> list[Any]:
        return compute_grouped(requests)

    def cpu_seconds(self) -> float:
        return time.process_time()


class _Member(_StackedComputation):
    """A cell's view of its group: its requests go to the scheduler, which computes them with the other cells'."""

    def __init__(self, lockstep: Lockstep, cell: _Cell):
        self.lockstep, self.cell = lockstep, cell
        self.stacked = False  # the cell's `batching` setting, as its round loop declares it (`batching_scope`)

    def _answers(self, requests: list[TrainRequest | EvaluationRequest]) -> list[Any]:
        return self.lockstep.wait_for_answers(self.cell, requests)

    def cpu_seconds(self) -> float:
        return self.cell.cpu_clock()


@contextmanager
def batching_scope(mode: str, device: torch.device | None = None) -> Iterator[None]:
    """Where a cell's round loop runs under its `batching` setting: `stacked` computes with the stacked kernels, in
    the cell's group (`Lockstep`) or alone (`Solo`); `off` computes one by one, in a group too. On a CPU, `stacked`
    needs one torch thread: with more, the batched kernels split a group's work otherwise than a lone cell's, and a
    cell's result would depend on its group."""
    if mode not in BATCHING_MODES:
        raise ValueError(f"unknown batching {mode!r}; allowed: {', '.join(BATCHING_MODES)}")
    if mode == "stacked" and (device is None or device.type == "cpu") and torch.get_num_threads() > 1:
        raise ValueError(
            f"batching: stacked computes on one CPU thread (this cell has {torch.get_num_threads()}): with more, a "
            "cell's result would depend on the cells it is batched with; set threads_per_cell: 1, or batching: off"
        )
    group = active_group()
    if group is None:
        if mode == "off":
            yield
            return
        join_group(Solo())
        try:
            yield
        finally:
            join_group(None)
        return
    before = group.stacked
    group.stacked = mode == "stacked"
    try:
        yield
    finally:
        group.stacked = before


def run_together(jobs: Sequence[Callable[[], Any]]) -> tuple[list[Any], GroupStatistics]:
    """Run `jobs` as one group (`Lockstep`); (each job's return value or exception, what the group computed
    together)."""
    lockstep = Lockstep()
    return lockstep.run(jobs), lockstep.statistics
