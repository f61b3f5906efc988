"""What one site does when the server asks (fdabench's local training, Flower-free): a source trains from the
global parameters and returns its update; the target trains from its start with the method's observer (e.g.
auto-weighting's estimates from the forwarded source updates) and returns its update and the estimates; at
evaluation the target scores the global model on its test split and its validation split (where it keeps one), and
a source that holds a validation split scores it there (`Site.evaluate`): only the scores leave the site.

A site holds only its own file (`sitedata`), the cell's configuration and two random streams: its batch order
(`client_generator` at the position the in-process loop gives it) and, at the target, the noise generator its
splits redraw feature noise from. Both streams are saved after every call (`streams`) and restored before the
next, so a site that runs each call in a fresh process (Flower's deployment engine) draws what the in-process loop
draws."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from fdabench.cell.setup import cell_rules
from fdabench.federation.client import LocalResult, LocalSettings, evaluate, loss_function
from fdabench.federation.client_state import (
    ClientState,
    client_view,
    holds_state,
    personal_scorer,
    personalised_record,
)
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.records import primary_metric
from fdabench.federation.rounds import build_cell_model
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.sites import client_generator, target_training_data, train_source, train_target_round
from fdabench.flower.site_files import SiteData, problem_shape


@dataclass
class TargetReply:
    result: LocalResult
    estimates: dict[str, Tensor]  # auto-weighting: σ², d², τ²d², ... per source from the forwarded updates
    buffers: list[Tensor]
    message: Tensor | None = None  # the method's extra message (`federation.client_state`)


class Site:
    """One site of one cell, on the CPU."""

    def __init__(self, cell: dict[str, Any], data: SiteData):
        self.cell = cell
        rules = cell_rules(cell)
        self.method, self.settings = rules.method, rules.settings
        self.data = data
        self.problem = problem_shape(data.shape)
        device = torch.device("cpu")
        model = self.method.prepare_model(
            build_cell_model(self.problem, self.settings, cell["seed"], device), self.problem
        )
        self.space = ParameterSpace(model)
        self.loss_fn = loss_function(self.problem.task)
        self.batches: torch.Generator | None = None  # started by the first training request
        #: the method's state on this client between rounds (`federation.client_state`), made from the freshly
        #: built model as in the in-process loop; never sent
        self.state: ClientState | None = (
            self.method.client_state(self.space) if holds_state(self.method, data.role) else None
        )

    @property
    def training_samples(self) -> int:
        """The samples this site trains on: a source's, or the target's under its method's `roles.target` (its
        labelled samples where the target trains on none)."""
        if self.data.role == "source":
            return self.data.samples
        data = target_training_data(self.method.roles.target, self.data.labelled, self.data.unlabelled)
        return self.data.samples if data is None else len(data)

    # -- random streams, saved between calls ---------------------------------------------------------
    def start_stream(self, stream: int) -> None:
        """The batch order the in-process loop gives the client at position `stream` (a run's first call)."""
        self.batches = client_generator(self.cell["seed"], stream)

    def streams(self) -> dict[str, bytes]:
        saved = {} if self.batches is None else {"batches": self.batches.get_state().numpy().tobytes()}
        if self.data.noise_generator is not None:
            saved["noise"] = self.data.noise_generator.get_state().numpy().tobytes()
        return saved

    def restore_state(self, saved: dict[str, Tensor]) -> None:
        """The client state its last call left (`federation.client_state`), from the node state."""
        if saved:
            self.state = dict(saved)

    def restore_streams(self, saved: dict[str, bytes]) -> None:
        if "batches" in saved:
            self.batches = torch.Generator()
            self.batches.set_state(_state(saved["batches"]))
        if "noise" in saved and self.data.noise_generator is not None:
            self.data.noise_generator.set_state(_state(saved["noise"]))

    # -- calls ---------------------------------------------------------------------------------------
    def train_source(
        self, start: Tensor, settings: LocalSettings, buffers: list[Tensor], broadcast: Tensor | None = None
    ) -> tuple[LocalResult, list[Tensor], Tensor | None]:
        """(update, buffers, the method's message) of this source's local training (`sites.train_source`)."""
        if self.data.role != "source":
            raise ValueError("this site is the target; it does not train as a source")
        self._set_buffers(buffers)
        result, state, message = train_source(
            self.method,
            self.space,
            self.data.data,
            start,
            settings,
            self.loss_fn,
            self.batches,
            self.state,
            broadcast,
        )
        if state is not None:
            self.state = state
        return result, self.space.get_buffers(), message

    def train_target(
        self, inputs: RoundInputs, start: Tensor, settings: LocalSettings, buffers: list[Tensor]
    ) -> TargetReply:
        if self.data.role != "target":
            raise ValueError("this site is a source; only the target trains in an FDA round's target step")
        data = target_training_data(self.method.roles.target, self.data.labelled, self.data.unlabelled)
        self._set_buffers(buffers)
        reply = train_target_round(
            self.method,
            self.space,
            data,
            inputs,
            start,
            settings,
            self.loss_fn,
            self.batches,
            self.cell["seed"],
            self.state,
        )
        if reply.state is not None:
            self.state = reply.state
        estimates = {} if reply.statistics is None else reply.statistics.estimates()
        return TargetReply(reply.result, estimates, reply.buffers, reply.message)

    def evaluate(self, params: Tensor, buffers: list[Tensor]) -> dict[str, dict[str, float]]:
        """The global model's metrics on this site's splits, by split: the target's `test` split, then its
        `validation` split where it keeps one (in this order: they may redraw feature noise from one generator,
        as the in-process loop scores them); a source's `validation` split. A `personalised` method's target scores
        the global model on its test split first, then its personalised predictor on both (`personalised_record`)."""
        if self.method.roles.personalised and self.data.role == "target":
            return self._personalised_evaluation(params, buffers)
        splits = {"test": self.data.test} if self.data.role == "target" else {}
        if self.data.validation is not None and len(self.data.validation):
            splits["validation"] = self.data.validation
        if not splits:
            raise ValueError(f"{self.data.name} holds no validation split: it has nothing to evaluate on")
        view = client_view(self.method, self.state, params)
        self.space.set(view.params)
        self._set_buffers(buffers if view.buffers is None else view.buffers)
        task, batch_size = self.problem.task, self.settings.eval_batch_size
        return {split: evaluate(self.space.model, data, task, batch_size) for split, data in splits.items()}

    def _personalised_evaluation(self, params: Tensor, buffers: list[Tensor]) -> dict[str, dict[str, float]]:
        task, batch_size = self.problem.task, self.settings.eval_batch_size
        self.space.set(params)
        self._set_buffers(buffers)
        global_metrics = evaluate(self.space.model, self.data.test, task, batch_size)
        own = self.data.labelled
        personal = personal_scorer(self.method, self.space, self.state, params, buffers, task, batch_size, own)
        scores = {"test": personalised_record(primary_metric(task), personal(self.data.test), global_metrics)}
        if self.data.validation is not None and len(self.data.validation):
            scores["validation"] = personal(self.data.validation)
        return scores

    def _set_buffers(self, buffers: list[Tensor]) -> None:
        if self.space.buffers:
            self.space.set_buffers(buffers)


def _state(raw: bytes) -> Tensor:
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)
