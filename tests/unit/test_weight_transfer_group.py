"""The trainer's side of the gloo weight-transfer group (``gloo_group.open_gloo_group``): rank 0 listens on
the address it is given only (the interface facing the workers), for the rendezvous store and for gloo's own
connections, and a broadcast over the group arrives."""

from __future__ import annotations

import os
import threading

import pytest
import torch

pytest.importorskip("vllm")
psutil = pytest.importorskip("psutil")
TOKEN = "0123456789abcdef"


def test_rank_0_listens_on_the_given_address_only() -> None:
    from posttrain.engines.weight_sync import free_port
    from posttrain.engines.weight_sync.gloo_group import broadcast_bucket, open_gloo_group

    before = {c.laddr for c in psutil.Process(os.getpid()).net_connections("tcp") if c.status == "LISTEN"}
    port = free_port("127.0.0.1")
    groups = {}
    joiner = threading.Thread(target=lambda: groups.update({1: open_gloo_group("127.0.0.1", port, 1, 2, 30.0, TOKEN)}))
    joiner.start()
    groups[0] = open_gloo_group("127.0.0.1", port, 0, 2, 30.0, TOKEN)
    joiner.join()
    listening = {c.laddr for c in psutil.Process(os.getpid()).net_connections("tcp") if c.status == "LISTEN"} - before
    assert (("127.0.0.1", port)) in listening  # the store, on the given port
    assert listening and all(address.ip == "127.0.0.1" for address in listening)  # nothing on 0.0.0.0 / ::
    received = torch.zeros(3)
    receiver = threading.Thread(target=lambda: broadcast_bucket(groups[1], received, "a test bucket"))
    receiver.start()
    broadcast_bucket(groups[0], torch.tensor([1.0, 2.0, 3.0]), "a test bucket")
    receiver.join()
    assert received.tolist() == [1.0, 2.0, 3.0]


def test_a_peer_without_the_groups_token_cannot_take_a_rank() -> None:
    """Rank 1 knocks with another token: its keys are not the group's, so neither side completes the rendezvous
    (each times out) and no collective runs between them."""
    from posttrain.engines.weight_sync import free_port
    from posttrain.engines.weight_sync.gloo_group import WeightSyncError, open_gloo_group

    port = free_port("127.0.0.1")
    failures: list[BaseException] = []

    def intruder() -> None:
        try:
            open_gloo_group("127.0.0.1", port, 1, 2, 5.0, "not-the-token")
        except WeightSyncError as err:
            failures.append(err)

    joiner = threading.Thread(target=intruder)
    joiner.start()
    with pytest.raises(WeightSyncError, match="rendezvous failed or timed out"):
        open_gloo_group("127.0.0.1", port, 0, 2, 5.0, TOKEN)
    joiner.join()
    assert failures
    with pytest.raises(ValueError, match="group token is required"):
        open_gloo_group("127.0.0.1", port, 0, 1, 5.0, "")
