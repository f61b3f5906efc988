"""Rehearsing failures: a ClientApp that is fdabench's site except in the rounds where a fault is planned, so a
dropout policy can be tried (and tested) before real sites fail.

A fault is `SITE:ROUND:KIND[:TIMES]`: at site SITE, in round ROUND (counted from 1, as the server's messages count
them), the first TIMES (default 1) training requests, or evaluation requests for `drop-eval` (the server numbers
its attempts), fail with KIND:

- `drop`: the site answers with an error and does not train (as a site that went away); its random streams do
  not move, so a retried request trains exactly as it would have;
- `nan`: the site trains, then sends an update with a NaN in it;
- `shape`: the site trains, then sends its update cut short by one value;
- `drop-eval`: the site trains as asked, then answers the round's evaluation request with an error and scores
  nothing (a source that went away before scoring its validation split; its streams do not move either)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fdabench.flower import apps, messages

KINDS = ("drop", "nan", "shape", "drop-eval")
#: the kinds that fail an evaluation request (the others fail training requests)
EVALUATION_KINDS = ("drop-eval",)


class SiteDropped(RuntimeError):
    """A planned `drop`: the site does not answer this request."""


@dataclass(frozen=True)
class Fault:
    site: str
    round: int
    kind: str
    times: int = 1

    @classmethod
    def parse(cls, text: str) -> Fault:
        parts = text.split(":")  # site names have no colon (NAME_PATTERN)
        valid = len(parts) in (3, 4) and parts[1].isdigit() and int(parts[1]) >= 1 and parts[2] in KINDS
        if valid and len(parts) == 4:
            valid = parts[3].isdigit() and int(parts[3]) >= 1
        if not valid:
            raise ValueError(
                f"a fault is SITE:ROUND:KIND[:TIMES] (ROUND and TIMES from 1, KIND one of {', '.join(KINDS)}); "
                f"got {text!r}"
            )
        times = int(parts[3]) if len(parts) == 4 else 1
        return cls(parts[0], int(parts[1]), parts[2], times)


def _due(faults: list[Fault], site: str, round_number: int, attempt: int, evaluation: bool) -> Fault | None:
    """The fault planned for this request: its site and round, one of the first `times` attempts, and a kind of
    fault of its message (an evaluation request, or a training request)."""
    for fault in faults:
        if (fault.kind in EVALUATION_KINDS) != evaluation:
            continue
        if fault.site == site and fault.round == round_number and attempt < fault.times:
            return fault
    return None


def make_faulty_client_app(faults: list[Fault], defaults: dict[str, Any] | None = None) -> ClientApp:
    """fdabench's site (`apps.make_client_app`) with `faults` in its training requests."""
    defaults = dict(defaults or {})
    app = ClientApp()

    @app.query()
    def hello(message: Message, context: Context) -> Message:
        return apps.handle_hello(message, context, defaults)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        site = apps.site_for(context, defaults).data.name
        config = message.content.config_records["config"]
        fault = _due(faults, site, int(config["round"]) + 1, int(config["attempt"]), evaluation=False)
        if fault is not None and fault.kind == "drop":
            raise SiteDropped(f"{site} dropped out in round {fault.round} (a planned fault)")
        reply = apps.handle_train(message, context, defaults)
        if fault is not None:
            record = reply.content.array_records["arrays"]
            values = messages.tensors(record)
            update = values["update"].clone()
            if fault.kind == "nan":
                update[0] = torch.nan
            else:
                update = update[:-1]
            values["update"] = update
            reply.content["arrays"] = messages.arrays(**values)
        return reply

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        site = apps.site_for(context, defaults).data.name
        config = message.content.config_records["config"]
        fault = _due(faults, site, int(config["round"]) + 1, int(config["attempt"]), evaluation=True)
        if fault is not None:
            raise SiteDropped(f"{site} dropped out of the evaluation in round {fault.round} (a planned fault)")
        return apps.handle_evaluate(message, context, defaults)

    return app
