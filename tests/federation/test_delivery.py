"""Who receives what (`federation.delivery.Delivery`) and the bytes a round counts from it, on hand-computed cases."""

import pytest
import torch

from fdabench.federation.delivery import (
    COUNT_BYTES,
    Delivery,
    Traffic,
    sources_traffic,
    target_traffic,
    tensor_bytes,
)


def test_buffers_travel_only_with_the_updates():
    with pytest.raises(ValueError, match=r"^Delivery: source_buffers travel with the source updates; set source_"):
        Delivery(source_buffers=True)
    assert Delivery(source_updates=True, source_buffers=True).source_buffers


def test_a_tensor_counts_its_elements_times_their_size():
    assert tensor_bytes(None) == 0
    assert tensor_bytes(torch.zeros(3, 5)) == 60
    assert tensor_bytes(torch.zeros(7, dtype=torch.float64)) == 56
    assert tensor_bytes(torch.zeros(0)) == 0


def test_traffic_adds_up_and_down_apart():
    assert Traffic(1, 2) + Traffic(10, 20) == Traffic(11, 22)
    assert Traffic() == Traffic(0, 0)


def test_sources_receive_theta_and_the_broadcast_and_send_an_update_a_count_and_messages():
    # 4 asked, 3 answered; θ 100 bytes, broadcast 12, 30 bytes of messages from those that answered
    assert sources_traffic(4, 3, 100, 12, 30) == Traffic(uplink=3 * (100 + COUNT_BYTES) + 30, downlink=4 * 112)
    assert sources_traffic(0, 0, 100, 12, 0) == Traffic()
    assert COUNT_BYTES == 8  # a sample count is an int64


@pytest.mark.parametrize(
    ("delivery", "expected_down"),
    [
        (Delivery(), 100 + 12),  # θ and the broadcast
        (Delivery(broadcast_to_target=False), 100),  # θ only (Co-MDA's queries go to the sources)
        (Delivery(source_updates=True), 100 + 12 + 3 * 100),  # and the 3 forwarded source updates
        (Delivery(source_updates=True, source_buffers=True), 100 + 12 + 3 * 100),  # buffers are not counted
        (Delivery(source_messages=True, broadcast_to_target=False), 100 + 40),  # and the forwarded messages
    ],
)
def test_the_target_receives_what_its_delivery_says(delivery, expected_down):
    traffic = target_traffic(delivery, 100, 12, 20, forwarded_updates=3, forwarded_message_bytes=40)
    assert traffic == Traffic(uplink=100 + COUNT_BYTES + 20, downlink=expected_down)


def test_a_local_round_counts_only_what_is_forwarded():
    """The target's local fine-tuning sends nothing; only what the server forwards would be counted."""
    assert target_traffic(Delivery(), 100, 12, 20, 3, 40, counted=False) == Traffic()
    forwarding = Delivery(source_updates=True, source_messages=True)
    assert target_traffic(forwarding, 100, 12, 20, 3, 40, counted=False) == Traffic(downlink=3 * 100 + 40)
