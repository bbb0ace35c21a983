"""The trainer side of ``posttrain-gloo`` (``weight_transfer.py``): ``WeightSender`` drives vLLM's start /
update / finish round trip through a client while it broadcasts the weight source's buckets.

The client is the in-process ``LLM`` for a colocated engine (``colocated.py``) or a remote worker's control client
(any ``VLLMWeightSyncClient``); every call to it is bounded by the transport's timeout and a failure names the
peer. The sender (and its process group) lives across syncs; each sync's weights are the ``source`` handed to
``send_weights``, vLLM's way for a sender whose payload changes every round. Importing this module registers the
sender with vLLM's ``WeightTransferTrainerFactory``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import torch
import torch.distributed as torch_dist
from vllm.distributed.weight_transfer.base import (
    TrainerWeightTransferEngine,
    VLLMWeightSyncClient,
    WeightSource,
)
from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

from posttrain.engines.weight_sync.gloo_group import WeightSyncError, broadcast_bucket, open_gloo_group
from posttrain.engines.weight_sync.weight_transfer import (
    GLOO_BACKEND,
    GlooTrainerInitInfo,
    GlooWeightTransferInitInfo,
    GlooWeightTransferUpdateInfo,
)


class WeightSender(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
    """Trainer side of ``posttrain-gloo``: drives start / update / finish through the client while it
    broadcasts one flat buffer per bucket. Built by ``trainer_init``; ``source`` (optional) is the one
    ``send_weights`` sends when it is given none (vLLM's factory protocol)."""

    init_info_cls = GlooTrainerInitInfo

    def __init__(self, *, client: VLLMWeightSyncClient, source: WeightSource | None, init_info: GlooTrainerInitInfo,
                 peer: str) -> None:
        super().__init__(client=client, source=source, is_sender=init_info.is_sender)
        self.init_info = init_info
        self.peer = peer
        self.group: torch_dist.ProcessGroupGloo | None = None

    @classmethod
    def trainer_init(cls, init_info: GlooTrainerInitInfo, *, client: VLLMWeightSyncClient,
                     source: WeightSource | None = None, peer: str = "vLLM engine") -> WeightSender:
        sender = cls(client=client, source=source, init_info=init_info, peer=peer)
        if not sender.is_sender:
            return sender
        worker_info = GlooWeightTransferInitInfo(init_info.master_address, init_info.master_port, rank_offset=1,
                                                 world_size=init_info.world_size, group_token=init_info.group_token,
                                                 timeout_s=init_info.timeout_s)
        # The workers block in the rendezvous until the trainer joins, so their init runs on a side thread.
        sender._call_beside("init_weight_transfer_engine",
                            lambda: client.init_weight_transfer_engine(asdict(worker_info)), sender._open_group)
        return sender

    def _open_group(self) -> None:
        info = self.init_info
        self.group = open_gloo_group(info.master_address, info.master_port, 0, info.world_size, info.timeout_s,
                                     info.group_token)

    def _call_beside(self, method: str, call: Callable[[], None], work: Callable[[], None]) -> None:
        """Run ``call()`` (the client's ``method``) on a side thread while ``work()`` runs here; a failure on
        either side raises ``WeightSyncError`` naming the peer, and waiting on the client is bounded by the
        timeout."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="posttrain-weight-sync")
        try:
            future = pool.submit(call)
            try:
                work()
            except WeightSyncError as err:
                if future.done() and future.exception() is not None:
                    raise WeightSyncError(f"{self.peer}: {method} failed: {future.exception()}") from err
                raise WeightSyncError(f"{self.peer}: {err}") from err
            try:
                future.result(timeout=self.init_info.timeout_s)
            except TimeoutError as err:
                raise WeightSyncError(f"{self.peer}: {method} did not answer within "
                                      f"{self.init_info.timeout_s:.0f} s") from err
            except Exception as err:
                raise WeightSyncError(f"{self.peer}: {method} failed: {err}") from err
        finally:
            pool.shutdown(wait=False)  # a hung peer's thread must not turn the error into a hang

    def send_weights(self, source: WeightSource | None = None, weight_version: int | None = None) -> None:
        """Push ``source``'s weights (default: the one given to ``trainer_init``); ``weight_version`` (the
        trainer step) is recorded by the engine."""
        source = self.source if source is None else source
        if source is None:
            raise ValueError(f"{self.peer}: the posttrain-gloo sender has no WeightSource to send")
        if not self.is_sender:
            for _ in source.iter_groups():  # stay in the ZeRO-3 gathers
                pass
            return
        meta = source.metadata()
        dtypes = {m.dtype for m in meta}
        if len(dtypes) != 1:
            raise ValueError(f"posttrain-gloo sends one wire dtype; the source declares {sorted(map(str, dtypes))}")
        groups = source.groups()
        shapes = {m.name: list(m.shape) for m in meta}
        order = [name for group in groups for name in group]  # bucket order, which may differ from meta's
        info = GlooWeightTransferUpdateInfo(names=order, shapes=[shapes[n] for n in order],
                                            dtype_name=str(meta[0].dtype).removeprefix("torch."),
                                            bucket_sizes=[len(g) for g in groups])
        self._guarded("start_weight_update", self.client.start_weight_update)
        self._call_beside("update_weights", lambda: self.client.update_weights(asdict(info)),
                          lambda: self._broadcast_buckets(source, info))
        version = None if weight_version is None else str(weight_version)
        self._guarded("finish_weight_update", lambda: self.client.finish_weight_update(weight_version=version))

    def _guarded(self, method: str, call: Callable[[], None]) -> None:
        """A control-plane call bounded by the timeout; failures name the peer."""
        self._call_beside(method, call, lambda: None)

    def _broadcast_buckets(self, source: WeightSource, info: GlooWeightTransferUpdateInfo) -> None:
        assert self.group is not None
        start = 0
        for size, (names, tensors) in zip(info.bucket_sizes, source.iter_groups()):
            expected = info.names[start : start + size]
            if names != expected:
                raise ValueError(f"weight source yielded bucket {names[:2]}... but declared {expected[:2]}...")
            start += size
            flat = torch.cat([t.detach().reshape(-1).cpu() for t in tensors])
            broadcast_bucket(self.group, flat, f"the bucket starting at {names[0]!r}")

    def abort(self) -> None:
        """Abort this rank's side of the transfer group (frees a peer blocked in a broadcast); the sender is
        unusable afterwards."""
        if self.group is not None:
            self.group.abort()
        self.group = None

    def shutdown(self) -> None:
        self.group = None


if GLOO_BACKEND not in WeightTransferTrainerFactory._registry:
    WeightTransferTrainerFactory.register_engine(GLOO_BACKEND, WeightSender)
