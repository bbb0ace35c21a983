"""Where a weight-transfer group meets (``engines/weight_sync/rendezvous.py``): rank 0 hosts it on its address on
the route to the worker, both transports' rendezvous stores listen there and nowhere else (sockets opened for
real), and the NCCL path hands vLLM that address (checked on CPU with vLLM's NCCL group opener recorded, not
run)."""

from __future__ import annotations

import logging
from typing import Any

import psutil
import pytest

from posttrain.engines.weight_sync.rendezvous import (
    local_address_towards,
    log_nccl_interface,
    rendezvous_address,
)

pytest.importorskip("vllm")


def _own_addresses() -> list[str]:
    """This machine's IPv4 interface addresses, loopback last (it is always there)."""
    found = {a.address for addresses in psutil.net_if_addrs().values() for a in addresses if a.family.name == "AF_INET"}
    return sorted(found, key=lambda a: a.startswith("127."))


def _listening(port: int) -> list[str]:
    """The local addresses this process listens on at ``port``."""
    return [c.laddr.ip for c in psutil.Process().net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port]


def test_the_rendezvous_is_this_machines_address_facing_the_worker() -> None:
    for address in _own_addresses():  # a worker on one of our interfaces is reached through that interface
        assert local_address_towards(f"http://{address}:8100") == address
        assert rendezvous_address(f"http://{address}:8100") == address
    assert rendezvous_address("http://127.0.0.1:8100", master_address="10.1.2.3") == "10.1.2.3"
    for wildcard in ("0.0.0.0", "::"):
        with pytest.raises(ValueError, match="listen on every interface"):
            rendezvous_address("http://127.0.0.1:8100", master_address=wildcard)


@pytest.mark.parametrize("transport", ["gloo", "nccl"])
def test_each_transports_store_listens_on_the_workers_address_only(transport: str) -> None:
    """Ours (gloo) and vLLM's ``StatelessProcessGroup``, which its NCCL engine opens before the communicator, each
    opened as rank 0 of a one-rank group on the address the trainer picks for a worker on our first interface."""
    from vllm.distributed.utils import StatelessProcessGroup

    from posttrain.engines.weight_sync import free_port
    from posttrain.engines.weight_sync.gloo_group import open_gloo_group

    address = rendezvous_address(f"http://{_own_addresses()[0]}:8100")
    port = free_port(address)
    if transport == "gloo":
        group = open_gloo_group(address, port, rank=0, world_size=1, timeout_s=10, group_token="t")
    else:
        group = StatelessProcessGroup.create(host=address, port=port, rank=0, world_size=1)
    assert _listening(port) == [address]  # not 0.0.0.0 / :: (a plain TCPStore master listens on every interface)
    del group


def test_the_nccl_group_is_opened_on_the_workers_address(monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """``RemoteVLLMEngine``'s NCCL path hands vLLM's trainer-side engine the address facing the worker and a port
    free there, and says which interface that is (NCCL's own sockets are NCCL's choice)."""
    import torch
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

    from posttrain.engines.remote import RemoteVLLMEngine
    from posttrain.engines.weight_sync import ControlClient

    opened: list[Any] = []
    monkeypatch.setattr(WeightTransferTrainerFactory, "trainer_init",
                        staticmethod(lambda info, client, source: opened.append(info) or object()))
    monkeypatch.setattr(ControlClient, "world_size", lambda self: 1)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    address = _own_addresses()[0]
    engine = RemoteVLLMEngine([f"http://{address}:8100"], tokenizer=object(), transport="nccl", rank=0,
                              dtype=torch.float32)
    with caplog.at_level(logging.INFO, logger="posttrain.engines.weight_sync.rendezvous"):
        engine._weights._sender(0, source=None)
    (info,) = opened
    assert info.master_address == address and info.world_size == 2 and info.rank == 0
    assert _listening(info.master_port) == []  # free there (vLLM's store binds it)
    interface = next(name for name, addresses in psutil.net_if_addrs().items()
                     if any(a.address == address for a in addresses))
    assert f"NCCL_SOCKET_IFNAME={interface}" in caplog.text


def test_nothing_is_said_when_nccl_is_told_its_interface(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")
    with caplog.at_level(logging.INFO, logger="posttrain.engines.weight_sync.rendezvous"):
        log_nccl_interface("http://127.0.0.1:8100", "127.0.0.1")
    assert caplog.text == ""
