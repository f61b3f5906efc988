"""Who receives what in a round, beside θ and the clients' updates, and the bytes each round sends.

Every client that trains receives θ (or the part of it the round shares, the method's `update_bytes`) and the server's
broadcast, and sends back its update, its sample count and its message, if the method has one. What else reaches the
target is the method's `Delivery`, one declarative value: the loop forwards accordingly (`federation.rounds`,
`fdabench.flower`), and counts the bytes from the same value (`sources_traffic`, `target_traffic`). Buffers (BatchNorm
statistics) are not counted: they are not updates, and the record counts what a method's updates and messages cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

COUNT_BYTES = 8  # each client also reports its sample count (int64)


@dataclass(frozen=True)
class Delivery:
    """What the server forwards to the target before it trains, and whether the broadcast reaches it.

    `source_updates`: the answered sources' updates, counts and steps (auto-weighting's estimates, KD3A's source
    models); `source_buffers`: their buffers with them (KD3A's source models are whole models); `source_messages`: the
    sources' messages (Co-MDA's predictions on the target's queries); `broadcast_to_target`: the method's `broadcast`
    goes to the target too (False: to the sources only, as Co-MDA's queries)."""

    source_updates: bool = False
    source_buffers: bool = False
    source_messages: bool = False
    broadcast_to_target: bool = True

    def __post_init__(self):
        if self.source_buffers and not self.source_updates:
            raise ValueError("Delivery: source_buffers travel with the source updates; set source_updates too")


@dataclass(frozen=True)
class Traffic:
    """Bytes that reached the server (uplink) and left it (downlink)."""

    uplink: int = 0
    downlink: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(self.uplink + other.uplink, self.downlink + other.downlink)


def tensor_bytes(tensor: Tensor | None) -> int:
    """Bytes of `tensor` on the wire (0 for none)."""
    return 0 if tensor is None else tensor.numel() * tensor.element_size()


def sources_traffic(asked: int, answered: int, update_bytes: int, broadcast_bytes: int, message_bytes: int) -> Traffic:
    """The sources' bytes of a round: θ and the broadcast down to each asked source; an update, a sample count and
    (`message_bytes`, all of them together) the messages up from each that answered."""
    return Traffic(
        uplink=answered * (update_bytes + COUNT_BYTES) + message_bytes,
        downlink=asked * (update_bytes + broadcast_bytes),
    )


def target_traffic(
    delivery: Delivery,
    update_bytes: int,
    broadcast_bytes: int,
    message_bytes: int,
    forwarded_updates: int,
    forwarded_message_bytes: int,
    counted: bool = True,
) -> Traffic:
    """The target's bytes of a round in which it trained: θ and (where `delivery` sends it there) the broadcast down,
    its update, sample count and message (`message_bytes`) up, unless the round is not `counted` (the target's local
    fine-tuning sends nothing); then what the server forwards to it: `forwarded_updates` source updates and
    `forwarded_message_bytes` of source messages, where `delivery` says so."""
    traffic = Traffic()
    if counted:
        down = update_bytes + (broadcast_bytes if delivery.broadcast_to_target else 0)
        traffic = Traffic(uplink=update_bytes + COUNT_BYTES + message_bytes, downlink=down)
    forwarded = (forwarded_updates * update_bytes if delivery.source_updates else 0) + (
        forwarded_message_bytes if delivery.source_messages else 0
    )
    return traffic + Traffic(downlink=forwarded)
