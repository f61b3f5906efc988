"""The messages between the server and the sites, as Flower records, and the checks on what comes back.

Every message is a Flower `RecordDict`; tensors travel in `ArrayRecord`s (numpy `.npy` bytes: float32 arrives
bit for bit), settings in `ConfigRecord`s, counts and metrics in `MetricRecord`s. What each message holds:

- `query` (hello), server → every site: config `cell`, the cell's configuration as JSON (~2 KB). Reply: config
  name, role and the problem's shape; metrics position and samples (< 1 KB).
- `train`, server → source: arrays `params` θ (4m B) and the model's buffers, and for a method with client state
  its `broadcast` (SCAFFOLD's c, 4m B); config: the local settings, the round and the site's batch stream. Reply:
  arrays `update` g_i (4m B), buffers, and the method's `message` where it sends one (SCAFFOLD's Δc_i, 4m B);
  metrics samples, steps. A client's state (`federation.client_state`) stays in its node state.
- `train`, server → target: arrays `start` (4m B); for auto-weighting also `source_updates` (4Nm B),
  `source_counts` and `source_steps`; `global` θ (4m B) only where the start differs from it; config: the local
  and round settings, the round, the stream, the source names. Reply: arrays `update` g_T (4m B), for
  auto-weighting `estimates.*` (σ², d², τ²d², δ, ... per source: about 6N float64 values); metrics samples, steps.
- `evaluate`, server → target: arrays `params` θ (4m B) and buffers; config the round. Reply: metrics `metrics`,
  the global model on the target's test split: loss and accuracy (and AUC), or MSE (< 100 B); where the target
  keeps a validation split, also metrics `validation`, the same metrics on it (< 100 B).
- `evaluate`, server → each source that holds a validation split (its held-out samples), in the same round trip:
  arrays `params` θ (4m B) and buffers; config the round. Reply: metrics `validation`, the global model's metrics
  on the source's validation split (< 100 B). The server records the mean over the sources
  (`fdabench.federation.validation`), so only these scores leave a site, never its validation samples.

fdabench's own count (`bytes_uplink`, `bytes_downlink` in a round's record) is the updates, sample counts and
estimates Algorithm 1 sends: no evaluation, in process as through Flower. Flower's count (`ArrayRecord.count_bytes`
and friends, recorded per round as `flower_bytes_*`) adds the `.npy` headers, keys, settings, the evaluation round
trips (the target's and the sources' validation) and the hello."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from torch import Tensor

from fdabench.federation.client import LocalSettings


class RejectedReply(ValueError):
    """A site's reply that the server does not aggregate (wrong shape, non-finite values, missing parts)."""


def arrays(**tensors: Tensor | list[Tensor] | None) -> ArrayRecord:
    """Named tensors (a list of tensors becomes `<name>.<i>`; None is left out) as one ArrayRecord."""
    flat: dict[str, Tensor] = {}
    for name, value in tensors.items():
        if value is None:
            continue
        if isinstance(value, list):
            flat.update({f"{name}.{index}": item.detach().cpu() for index, item in enumerate(value)})
        else:
            flat[name] = value.detach().cpu()
    return ArrayRecord(flat)


def tensors(record: ArrayRecord) -> dict[str, Tensor]:
    return dict(record.to_torch_state_dict()) if len(record) else {}


def listed(values: dict[str, Tensor], name: str) -> list[Tensor]:
    """The tensors `arrays` stored for a list named `name`, in order."""
    count = sum(1 for key in values if key.startswith(f"{name}."))
    return [values[f"{name}.{index}"] for index in range(count)]


def local_config(settings: LocalSettings) -> dict[str, Any]:
    return dataclasses.asdict(settings)


def local_settings(config: ConfigRecord) -> LocalSettings:
    fields = {field.name for field in dataclasses.fields(LocalSettings)}
    return LocalSettings(**{key: config[key] for key in fields})


def content_bytes(content: RecordDict) -> int:
    """What Flower puts on the wire for a message's content (records' own byte counts)."""
    total = 0
    for record in content.values():
        total += record.count_bytes()
    return total


def cell_config(cell: dict[str, Any]) -> ConfigRecord:
    return ConfigRecord({"cell": json.dumps(cell, sort_keys=True)})


def check_update(update: Tensor, size: int, site: str, round_index: int) -> Tensor:
    """A site's update as the server aggregates it: a finite float32 vector of the model's size."""
    where = f"round {round_index + 1}: {site}"
    if tuple(update.shape) != (size,):
        raise RejectedReply(f"{where} sent an update of shape {tuple(update.shape)}; the model has {size} parameters")
    if update.dtype != torch.float32:
        raise RejectedReply(f"{where} sent a {update.dtype} update; expected torch.float32")
    bad = int((~torch.isfinite(update)).sum())
    if bad:
        raise RejectedReply(f"{where} sent an update with {bad} non-finite values (NaN or infinite)")
    return update


def check_message(message: Tensor, site: str, round_index: int) -> Tensor:
    """A site's extra message (`federation.client_state`, e.g. SCAFFOLD's Δc_i): a finite float vector."""
    where = f"round {round_index + 1}: {site}"
    if message.dim() != 1 or not message.is_floating_point():
        raise RejectedReply(f"{where} sent a message of shape {tuple(message.shape)} and type {message.dtype}")
    bad = int((~torch.isfinite(message)).sum())
    if bad:
        raise RejectedReply(f"{where} sent a message with {bad} non-finite values (NaN or infinite)")
    return message


def metrics_record(values: dict[str, Any]) -> MetricRecord:
    return MetricRecord({key: float(value) for key, value in values.items() if value is not None})


#: an evaluation reply's record of the target's test metrics, and of a site's validation metrics
TEST_METRICS, VALIDATION_METRICS = "metrics", "validation"


def evaluation_reply(scores: dict[str, dict[str, float]]) -> RecordDict:
    """A site's evaluation reply from its metrics by split (`Site.evaluate`: `test`, `validation`)."""
    names = {"test": TEST_METRICS, "validation": VALIDATION_METRICS}
    return RecordDict({names[split]: metrics_record(values) for split, values in scores.items()})


def evaluation_metrics(
    content: RecordDict, site: str, role: str, validation: bool, round_index: int
) -> dict[str, dict[str, float]]:
    """{"test": ..., "validation": ...} of a site's evaluation reply: the target's test metrics, and the validation
    metrics of a site that holds a validation split (`validation`); a reply without them is rejected."""
    expected = {"test": TEST_METRICS} if role == "target" else {}
    if validation:
        expected["validation"] = VALIDATION_METRICS
    missing = [record for record in expected.values() if record not in content.metric_records]
    if missing:
        raise RejectedReply(f"round {round_index + 1}: {site} sent no {' or '.join(missing)} metrics")
    return {split: dict(content.metric_records[record]) for split, record in expected.items()}
