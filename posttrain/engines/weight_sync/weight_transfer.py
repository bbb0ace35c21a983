"""``posttrain-gloo``: our weight transport for vLLM's weight-transfer protocol, and its wire format.

vLLM 0.30 defines the round trip (``init_weight_transfer_engine``, then per sync ``start_weight_update``,
``update_weights``, ``finish_weight_update(weight_version=...)``) and lets a transport plug in through
``WeightTransferEngineFactory`` (inference side) and ``WeightTransferTrainerFactory`` (trainer side).
Its built-in transports need CUDA (``nccl``, ``ipc``), so we add a gloo transport, ``posttrain-gloo``, that
runs on CPU and over TCP between machines:

- The trainer is rank 0 of a small process group of its own (``1 + workers`` ranks, never the training group;
  ``gloo_group.py``); inference workers join at ``rank_offset + worker rank``.
- Each sync sends the parameter list once (names, shapes, one wire dtype, bucket sizes:
  ``GlooWeightTransferUpdateInfo``) through ``update_weights``, then broadcasts one flat buffer per bucket (a
  decoder layer, or the embeddings / head: vLLM's ``layerwise_groups``), so at most one gathered layer sits in
  memory at a time, and the worker loads each bucket with ``model.load_weights`` inside vLLM's layerwise reload.
- Every collective carries ``timeout_s``; a peer that died or does not answer raises ``WeightSyncError`` naming
  the peer and the step of the protocol, never a hang.

The pieces, one file each: this module (the transport's name and the messages of its handshake and updates),
``gloo_group.py`` (the process group and its bounded broadcast), ``weight_sources.py`` (the trainer's weights
as vLLM expects them, bucket by bucket), ``weight_sender.py`` (the trainer side, ``WeightSender``, the same for
a colocated engine, whose client is the in-process ``LLM``, and for remote workers, any
``VLLMWeightSyncClient``) and ``weight_receiver.py`` (the inference side, and ``WORKER_EXTENSION``, the
``worker_extension_cls`` that registers it in engines in another process). On CUDA remote workers use vLLM's
own ``nccl`` transport instead (``remote_sync.default_transport``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from vllm.distributed.weight_transfer.base import (
    TrainerInitInfo,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

from posttrain.engines.weight_sync.gloo_group import new_group_token

GLOO_BACKEND = "posttrain-gloo"
DEFAULT_TIMEOUT_S = 300.0


@dataclass
class GlooWeightTransferInitInfo(WeightTransferInitInfo):
    """Worker-side handshake: where the trainer's group is, and this worker's place in it."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    group_token: str
    """The one-time token of the group's rendezvous keys (``gloo_group.open_gloo_group``)."""
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class GlooTrainerInitInfo(TrainerInitInfo):
    """Trainer-side init info (``rank`` 0 is the sender); ``world_size`` counts the trainer and workers."""

    backend: ClassVar[str] = GLOO_BACKEND

    master_address: str
    master_port: int
    world_size: int
    timeout_s: float = DEFAULT_TIMEOUT_S
    group_token: str = field(default_factory=new_group_token)
    """Made fresh for each group (``gloo_group.new_group_token``) and handed to the workers with their init info."""


@dataclass
class GlooWeightTransferUpdateInfo(WeightTransferUpdateInfo):
    """One sync's parameter list: all tensors travel in ``dtype_name``, ``bucket_sizes`` parameters per
    broadcast, in order."""

    names: list[str]
    shapes: list[list[int]]
    dtype_name: str
    bucket_sizes: list[int]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.names):
            raise ValueError(f"update_info: {len(self.names)} names but {len(self.shapes)} shapes")
        if sum(self.bucket_sizes) != len(self.names):
            raise ValueError(f"update_info: bucket_sizes add up to {sum(self.bucket_sizes)}, "
                             f"not the {len(self.names)} parameters named")
        if not isinstance(getattr(torch, self.dtype_name, None), torch.dtype):
            raise TypeError(f"update_info: dtype_name {self.dtype_name!r} is not a torch dtype")

