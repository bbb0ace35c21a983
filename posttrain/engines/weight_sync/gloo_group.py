"""The gloo process group a ``posttrain-gloo`` weight transfer travels on (``weight_transfer.py``).

The group lives outside ``torch.distributed``'s global state, so it never mixes with the training group. Rank 0
(the trainer) hosts the rendezvous and listens on the address facing the workers only; the rendezvous and every
collective are bounded by a timeout, and a peer that died or does not answer raises ``WeightSyncError`` naming
the step of the protocol, never a hang.
"""

from __future__ import annotations

import secrets
import socket
from datetime import timedelta

import torch
import torch.distributed as torch_dist


class WeightSyncError(RuntimeError):
    """A weight sync failed or timed out; the message names the peer and the protocol step."""


def new_group_token() -> str:
    """A fresh one-time token for one transfer group's rendezvous keys (``open_gloo_group``)."""
    return secrets.token_hex(16)


def open_gloo_group(address: str, port: int, rank: int, world_size: int, timeout_s: float,
                    group_token: str) -> torch_dist.ProcessGroupGloo:
    """A gloo process group outside ``torch.distributed``'s global state (rank 0 hosts the store).

    Rank 0 listens on ``address`` only, the interface facing the workers, for the store and for gloo's own
    connections (a plain ``TCPStore`` master would listen on every interface). Both the store rendezvous and
    every later collective time out after ``timeout_s``. The group's rendezvous keys live under ``group_token``,
    a one-time token the trainer makes for this group and hands the workers with their init info (over the
    secret-guarded control route): a peer that reaches the port without it cannot take a rank in the group.
    The traffic itself is not encrypted (README, scale-out: the transfer plane is for a trusted network).
    """
    if not group_token:
        raise ValueError("open_gloo_group: a group token is required (new_group_token)")
    prefix = f"posttrain-weights/{group_token}"
    timeout = timedelta(seconds=timeout_s)
    try:
        if rank == 0:
            with socket.socket() as listener:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((address, port))
                listener.listen()
                store = torch_dist.TCPStore(address, port, world_size, is_master=True, timeout=timeout,
                                            master_listen_fd=listener.detach())
            options = torch_dist.ProcessGroupGloo._Options()
            options._timeout = timeout
            options._devices = [torch_dist.ProcessGroupGloo.create_device(hostname=address)]
            return torch_dist.ProcessGroupGloo(torch_dist.PrefixStore(prefix, store), rank, world_size, options)
        store = torch_dist.TCPStore(address, port, world_size, is_master=False, timeout=timeout)
        return torch_dist.ProcessGroupGloo(torch_dist.PrefixStore(prefix, store), rank, world_size, timeout)
    except (OSError, RuntimeError, torch_dist.DistStoreError) as err:
        raise WeightSyncError(f"weight-transfer group at {address}:{port} (rank {rank} of {world_size}): "
                              f"rendezvous failed or timed out after {timeout_s:.0f} s: {err}") from err


def broadcast_bucket(group: torch_dist.ProcessGroupGloo, buffer: torch.Tensor, what: str) -> None:
    """Broadcast ``buffer`` from rank 0 to every rank of ``group`` (``what``: the bucket, named in errors)."""
    opts = torch_dist.BroadcastOptions()
    opts.rootRank = 0
    try:
        group.broadcast([buffer], opts).wait()
    except RuntimeError as err:
        raise WeightSyncError(f"weight-transfer broadcast of {what} failed or timed out: {err}") from err

