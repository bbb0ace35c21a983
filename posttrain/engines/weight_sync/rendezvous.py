"""Where a weight-transfer group meets: the address rank 0 hosts its rendezvous on, for the remote rollout workers
(``engines/remote.py``), and a port free there (``free_port``).

Rank 0 hosts each worker's transfer group on its own address on the route to that worker
(``local_address_towards``), or on the address the user gives; the rendezvous store of either transport listens
there only (``rendezvous_address``). NCCL's own sockets are NCCL's choice (``log_nccl_interface``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket

import httpx

from posttrain.engines.weight_sync.worker_control import WorkerError

log = logging.getLogger(__name__)


def rendezvous_address(url: str, master_address: str | None = None) -> str:
    """Where rank 0 hosts the transfer group of the worker at ``url``: ``master_address`` when given, else its
    address on the route to the worker (``local_address_towards``). Both transports' rendezvous stores listen on
    this address only: ours (``gloo_group.open_gloo_group``) and vLLM's ``StatelessProcessGroup`` for NCCL
    (vLLM 0.30-0.32 bind its listening socket to ``master_address``), never on every interface; a wildcard
    ``master_address`` (``0.0.0.0``, ``::``) would listen everywhere and is refused."""
    if master_address is None:
        return local_address_towards(url)
    try:
        wildcard = ipaddress.ip_address(master_address).is_unspecified
    except ValueError:  # a host name: the store listens on the address it resolves to
        wildcard = False
    if wildcard:
        raise ValueError(f"RemoteVLLMEngine: master_address {master_address!r} would make the transfer group's "
                         "rendezvous store listen on every interface; give the address that faces the workers")
    return master_address


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for a transfer group's rendezvous, or a server's port)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_nccl_interface(url: str, address: str) -> None:
    """Say which interface faces the worker at ``url`` when NCCL may pick another one.

    The NCCL group's rendezvous store listens on ``address`` (``rendezvous_address``), but NCCL's own bootstrap
    and socket transport listen on the interface NCCL picks for the whole process (``NCCL_SOCKET_IFNAME``, read
    once, when the process's first communicator starts): on a trainer with several interfaces that may be one the
    workers cannot reach, or one facing another network."""
    if os.environ.get("NCCL_SOCKET_IFNAME"):
        return
    import psutil  # a dependency of vLLM, whose NCCL path this is

    names = [name for name, addresses in psutil.net_if_addrs().items() if any(a.address == address for a in addresses)]
    log.info("rollout worker %s is reached through %s (%s); NCCL picks its own interface for its bootstrap and "
             "socket transport: on a trainer with several interfaces set NCCL_SOCKET_IFNAME=%s before the run starts",
             url, address, names[0] if names else "no local interface", names[0] if names else "<interface>")


def local_address_towards(url: str) -> str:
    """This machine's address on the route to ``url``'s host: where a worker there can reach the transfer
    group's rendezvous, which rank 0 hosts (no packet is sent; connecting a UDP socket only picks the route)."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError as err:
        raise WorkerError(url, f"no network route to the worker's host {host!r}: {err}") from err
