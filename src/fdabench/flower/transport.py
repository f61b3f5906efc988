"""The round loop's `Sites`, over Flower: each call becomes messages to the sites' SuperNodes (`messages`), and
their replies come back checked (`check_update`).

A site that does not answer (no reply within the timeout, an error reply, a SuperNode that left) or whose reply is
rejected is handled by the run's dropout policy:

- `fail` (default): the run stops with an error naming the site, the round and the reason;
- `wait`: the server asks that site again, and keeps asking (re-identifying SuperNodes that restarted under a
  new node id) until it answers or `wait_seconds` have passed, then fails;
- `skip`: a source that does not answer is left out of the round: the round aggregates the sources that answered,
  weighted as if they were all there were (and the target, where it receives them, sees only theirs). The target
  is the site the model is for: without it a round has no target step and no evaluation, so a missing target
  fails the run under `skip` as under `fail`.

Evaluation follows the same policy. The target scores the global model on its test split (and its validation
split), and each source that holds a validation split scores it on its held-out samples, all in one round trip. A
missing target fails the run under every policy. Under `skip`, a source that does not answer is left out of that
round's `source_val_*`: the mean over the sources that answered (each counts once, as in process); where none did,
the round records no `source_val_*`. A personalised method's cell reports the target's personalised predictor, which
never leaves the target: its sources score nothing and the rounds record no `source_val_*` over Flower (in process,
where every client is at hand, the predictor scores every validation split).

Every drop and rejection is logged in the round's record (`flower_events`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid
from torch import Tensor

from fdabench.federation.client import LocalResult, LocalSettings
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rule_interface import RoundInputs, target_broadcast
from fdabench.federation.sites import SourceRound, TargetRound
from fdabench.federation.validation import SOURCE_PREFIX, TARGET_PREFIX, mean_metrics
from fdabench.flower import DEFAULT_DROPOUT, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WAIT_SECONDS, DROPOUT_POLICIES, messages
from fdabench.flower.messages import RejectedReply
from fdabench.tensor_math.aggregation import auto_betas


def error_reason(reason: str) -> str:
    """A site's error in one line: the exception's own message, where Flower wraps it (the deployment engine as
    `<class 'E'>:<'message'>`, the simulation engine in Ray's traceback)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", reason)
    kind = ""
    wrapped = re.fullmatch(r"\s*<class '([^']+)'>:<'(.*)'>\s*", text, flags=re.DOTALL)
    if wrapped:
        kind, text = wrapped.group(1).rsplit(".", 1)[-1], wrapped.group(2)
    if "Message: " in text:  # the simulation engine: the site's exception inside Ray's
        kind, text = "", text.rsplit("Message: ", 1)[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    text = (lines[-1] if lines else text).rstrip("'>").strip()
    return f"{kind}: {text}" if kind else text


class SiteFailure(RuntimeError):
    """A site did not answer, or answered what the server rejects, and the dropout policy does not go on."""


@dataclass
class SiteInfo:
    """A site as its hello described it."""

    name: str
    role: str  # "source" | "target"
    index: int  # its position among the sources (the target: after them)
    samples: int
    node_id: int
    shape: dict[str, Any] = field(default_factory=dict)
    validation: int = 0  # samples of its validation split (0: it holds none)


class ReceivedEstimates:
    """The target's auto-weighting estimates as they reach the server; β follows from them (`auto_betas`), as
    `StreamingAutoWeights.result` gives it in one process."""

    def __init__(self, estimates: dict[str, Tensor]):
        self.values = estimates

    def result(self, rule: str) -> tuple[Tensor, dict[str, Tensor]]:
        return auto_betas(rule, self.values), self.values


class FlowerSites:
    """The sites of one cell behind a Flower `Grid`."""

    def __init__(
        self,
        grid: Grid,
        method: Any,
        sites: list[SiteInfo],
        space: ParameterSpace,
        device: torch.device,
        policy: str = DEFAULT_DROPOUT,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        hello: Callable[[], dict[str, SiteInfo]] | None = None,
    ):
        if policy not in DROPOUT_POLICIES:
            raise ValueError(f"unknown dropout policy {policy!r}; allowed: {', '.join(DROPOUT_POLICIES)}")
        self.grid, self.method, self.space, self.device = grid, method, space, device
        self.policy, self.timeout, self.wait_seconds = policy, timeout, wait_seconds
        self.hello = hello
        every_source = sorted((site for site in sites if site.role == "source"), key=lambda site: site.index)
        self.sources = every_source if method.roles.sources_train else []
        # the sources that score the global model on their held-out samples (whether or not they train), in order;
        # none for a personalised method: the cell's predictor is the target's, which never leaves the target
        self.validators = [] if method.roles.personalised else [site for site in every_source if site.validation]
        targets = [site for site in sites if site.role == "target"]
        self.target = targets[0] if targets and method.roles.target is not None else None
        self.evaluator = targets[0] if targets else None
        if self.evaluator is None:
            raise SiteFailure("no target site answered the hello: the model is evaluated at the target")
        self.source_names = tuple(site.name for site in self.sources)
        self.source_counts = torch.tensor([site.samples for site in self.sources], dtype=torch.float32, device=device)
        self.has_target = self.target is not None
        # the batch-order stream of each site: its position in the in-process loop (LocalSites)
        self.streams = {site.name: index for index, site in enumerate(self.sources)}
        if self.target is not None:
            self.streams[self.target.name] = len(self.sources)
        self.round_index = 0
        self.round_bytes = {"uplink": 0, "downlink": 0}
        self.events: list[dict[str, Any]] = []

    # -- the round loop's calls ------------------------------------------------------------------------
    def train_sources(
        self,
        start: Tensor,
        settings: LocalSettings,
        round_index: int = 0,
        asked: list[int] | None = None,
        broadcast: Tensor | None = None,
    ) -> SourceRound:
        """The `asked` sources (default: all; the loop's participation sample) train; `present` are those that
        answered (the dropout policy decides about the others). `broadcast` (the method's, e.g. SCAFFOLD's c) goes
        with θ; each reply's `message` comes back beside its update."""
        asked_sites = self.sources if asked is None else [self.sources[index] for index in asked]
        buffers = self.space.get_buffers()
        config = {**messages.local_config(settings), "round": self.round_index}

        def request(site: SiteInfo) -> RecordDict:
            return RecordDict(
                {
                    "arrays": messages.arrays(params=start, buffers=buffers, broadcast=broadcast),
                    "config": ConfigRecord({**config, "stream": self.streams[site.name]}),
                }
            )

        replies = self._ask(asked_sites, MessageType.TRAIN, request, self._source_reply)
        present = [index for index, site in enumerate(self.sources) if site.name in replies]
        if not present:
            raise SiteFailure(f"round {self.round_index + 1}: no source answered")
        results = [replies[self.sources[index].name][0] for index in present]
        round_buffers = [replies[self.sources[index].name][1] for index in present]
        sent = [self._message(replies[self.sources[index].name][2]) for index in present]
        return SourceRound(
            results,
            round_buffers if self.space.buffers else [],
            present=present,
            messages=[m for m in sent if m is not None],
        )

    def train_target(self, inputs: RoundInputs, start: Tensor, settings: LocalSettings) -> TargetRound:
        assert self.target is not None
        forwarded = self.method.delivery.source_updates and inputs.source_updates is not None
        content = messages.arrays(
            start=start,
            buffers=self.space.get_buffers(),
            source_updates=inputs.source_updates if forwarded else None,
            source_counts=inputs.source_counts if forwarded else None,
            source_steps=inputs.source_steps if forwarded else None,
            # the sources' buffers, source after source, where the method forwards them (KD3A's source models)
            source_buffers=[b for buffers in inputs.source_buffers for b in buffers]
            if forwarded and inputs.source_buffers
            else None,
            # the sources' messages, where the server forwards them (Co-MDA's predictions on the target's queries)
            source_messages=inputs.source_messages if self.method.delivery.source_messages else None,
            broadcast=target_broadcast(self.method, inputs),
            **({} if torch.equal(start, inputs.global_params) else {"global": inputs.global_params}),
        )
        config = {
            **messages.local_config(settings),
            "round": inputs.round_index,
            "stream": self.streams[self.target.name],
            "settings": json.dumps(inputs.settings.to_dict(), sort_keys=True),
            "source_names": json.dumps(list(inputs.source_names)),
        }

        def request(site: SiteInfo) -> RecordDict:
            return RecordDict({"arrays": content, "config": ConfigRecord(config)})

        replies = self._ask([self.target], MessageType.TRAIN, request, self._target_reply)
        result, estimates, buffers, message = replies[self.target.name]
        return TargetRound(result, ReceivedEstimates(estimates) if estimates else None, buffers, self._message(message))

    def evaluate(self, params: Tensor, buffers: list[Tensor]) -> dict[str, float]:
        """The global model on the target's test split, with the validation metrics of the in-process loop
        (`validation.validation_metrics`): `source_val_*` the mean over the sources that answered of each source's
        metrics on its held-out samples, `target_val_*` the target's on its validation split."""
        assert self.evaluator is not None

        def request(site: SiteInfo) -> RecordDict:
            return RecordDict(
                {
                    "arrays": messages.arrays(params=params, buffers=buffers),
                    "config": ConfigRecord({"round": self.round_index}),
                }
            )

        replies = self._ask([self.evaluator, *self.validators], MessageType.EVALUATE, request, self._evaluation_reply)
        target = replies[self.evaluator.name]
        metrics = dict(target["test"])
        if self.validators:
            answered = [replies[site.name]["validation"] for site in self.validators if site.name in replies]
            metrics.update({SOURCE_PREFIX + name: value for name, value in mean_metrics(answered).items()})
        if "validation" in target:
            metrics.update({TARGET_PREFIX + name: value for name, value in target["validation"].items()})
        self.round_index += 1
        return metrics

    def random_streams(self) -> list[torch.Generator]:
        return []  # the streams live at the sites

    def client_states(self) -> dict[str, Any]:
        return {}  # each client's state lives at its site (its node state), never at the server

    def restore_client_states(self, states: dict[str, Any]) -> None:
        if states:
            raise ValueError(
                "a Flower run keeps client state at the sites; a checkpoint with client states is not its own"
            )

    def take_round_log(self) -> dict[str, Any]:
        """Flower's byte counts and the events of the round just finished; reset for the next."""
        log = {
            "flower_bytes_uplink": self.round_bytes["uplink"],
            "flower_bytes_downlink": self.round_bytes["downlink"],
            "flower_events": self.events,  # the round just finished (evaluate moved round_index on)
        }
        self.round_bytes = {"uplink": 0, "downlink": 0}
        self.events = []
        return log

    # -- replies ---------------------------------------------------------------------------------------
    def _evaluation_reply(self, site: SiteInfo, content: RecordDict) -> dict[str, dict[str, float]]:
        return messages.evaluation_metrics(content, site.name, site.role, bool(site.validation), self.round_index)

    def _message(self, message: Tensor | None) -> Tensor | None:
        return None if message is None else message.to(self.device)

    def _source_reply(self, site: SiteInfo, content: RecordDict) -> tuple[LocalResult, list[Tensor], Tensor | None]:
        values = messages.tensors(content["arrays"])
        if "update" not in values:
            raise RejectedReply(f"round {self.round_index + 1}: {site.name} sent no update")
        update = messages.check_update(values["update"], self.space.size, site.name, self.round_index)
        counts = content["metrics"]
        samples = int(counts["samples"])
        if samples != site.samples:
            raise RejectedReply(
                f"round {self.round_index + 1}: {site.name} trained on {samples} samples; its hello said {site.samples}"
            )
        result = LocalResult(update.to(self.device), int(counts["steps"]), samples)
        message = None
        if self.method.roles.state is not None and "message" in values:
            message = messages.check_message(values["message"], site.name, self.round_index)
        return result, [value.to(self.device) for value in messages.listed(values, "buffers")], message

    def _target_reply(
        self, site: SiteInfo, content: RecordDict
    ) -> tuple[LocalResult, dict[str, Tensor], list[Tensor], Tensor | None]:
        result, buffers, message = self._source_reply(site, content)
        values = messages.tensors(content["arrays"])
        estimates = {
            key.split(".", 1)[1]: value.to(self.device) for key, value in values.items() if key.startswith("estimates.")
        }
        bad = [name for name, value in estimates.items() if not bool(torch.isfinite(value.double()).all())]
        if bad:
            raise RejectedReply(
                f"round {self.round_index + 1}: {site.name} sent non-finite estimates ({', '.join(bad)})"
            )
        return result, estimates, buffers, message

    # -- asking, with the dropout policy ----------------------------------------------------------------
    def _ask(
        self,
        sites: list[SiteInfo],
        kind: str,
        request: Callable[[SiteInfo], RecordDict],
        read: Callable[[SiteInfo, RecordDict], Any],
    ) -> dict[str, Any]:
        """Each site's read reply, by name; sites that did not answer are handled by the policy."""
        answered: dict[str, Any] = {}
        pending = list(sites)
        deadline = time.monotonic() + self.wait_seconds
        attempt = 0
        while True:
            failures = self._send(pending, kind, request, read, answered, attempt)
            attempt += 1
            if not failures:
                return answered
            for site, reason in failures.items():
                self.events.append({"round": self.round_index, "site": site, "event": reason})
            retry = self.policy == "wait" and time.monotonic() < deadline
            if retry:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                self._reidentify()
                pending = [site for site in sites if site.name in failures]
                continue
            target_failed = any(site.role == "target" for site in sites if site.name in failures)
            if self.policy == "skip" and not target_failed:
                return answered
            detail = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
            waited = f" after waiting {self.wait_seconds:g} s" if self.policy == "wait" else ""
            raise SiteFailure(f"round {self.round_index + 1}{waited} (dropout policy {self.policy}): {detail}")

    def _send(
        self,
        sites: list[SiteInfo],
        kind: str,
        request: Callable[[SiteInfo], RecordDict],
        read: Callable[[SiteInfo, RecordDict], Any],
        answered: dict[str, Any],
        attempt: int = 0,
    ) -> dict[str, str]:
        """Send one message per site (its `attempt` in this round, from 0, in its config) and read the replies into
        `answered`; {site name: why not} for the others."""
        outgoing: dict[int, SiteInfo] = {}
        messages_out = []
        for site in sites:
            content = request(site)
            if "config" not in content:
                content["config"] = ConfigRecord({})
            content.config_records["config"]["attempt"] = attempt
            self.round_bytes["downlink"] += messages.content_bytes(content)
            messages_out.append(
                Message(content, dst_node_id=site.node_id, message_type=kind, group_id=str(self.round_index))
            )
            outgoing[site.node_id] = site
        failures = {site.name: f"no reply within {self.timeout:g} s" for site in sites}
        for reply in self.grid.send_and_receive(messages_out, timeout=self.timeout):
            site = outgoing.get(reply.metadata.src_node_id)
            if site is None:
                continue
            if reply.has_error():
                failures[site.name] = f"error reply (code {reply.error.code}): {error_reason(reply.error.reason)}"
                continue
            self.round_bytes["uplink"] += messages.content_bytes(reply.content)
            try:
                answered[site.name] = read(site, reply.content)
            except RejectedReply as error:
                failures[site.name] = f"rejected: {error}"
                continue
            del failures[site.name]
        return failures

    def _reidentify(self) -> None:
        """Point sites at their SuperNodes again (a SuperNode that restarted has a new node id)."""
        if self.hello is None:
            return
        current = self.hello()
        for site in [*self.sources, *self.validators, *([self.target] if self.target else []), self.evaluator]:
            if site is not None and site.name in current:
                site.node_id = current[site.name].node_id
