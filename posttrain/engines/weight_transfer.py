"""Weight sync from the trainer into vLLM engines through vLLM's own weight-transfer protocol.

vLLM 0.30 defines the round trip (``init_weight_transfer_engine``, then per sync ``start_weight_update``,
``update_weights``, ``finish_weight_update(weight_version=...)``) and lets a transport plug in through
``WeightTransferEngineFactory`` (inference side) and ``WeightTransferTrainerFactory`` (trainer side).
Its built-in transports need CUDA (``nccl``, ``ipc``), so this module adds a gloo transport,
``posttrain-gloo``, that runs on CPU and over TCP between machines:

- The trainer is rank 0 of a small process group of its own (``1 + workers`` ranks, never the
  training group); inference workers join at ``rank_offset + worker rank``.
- Each sync sends the parameter list once (names, shapes, one wire dtype, bucket sizes) through
  ``update_weights``, then broadcasts one flat buffer per bucket (a decoder layer, or the embeddings /
  head: vLLM's ``layerwise_groups``), so at most one gathered layer sits in memory at a time, and the
  worker loads each bucket with ``model.load_weights`` inside vLLM's layerwise reload.
- Every collective carries ``timeout_s``; a peer that died or does not answer raises
  ``WeightSyncError`` naming the peer and the step of the protocol, never a hang.

The trainer-side sender (``WeightSender``) works the same for a colocated engine (its client is the
in-process ``LLM``) and for remote workers (any ``VLLMWeightSyncClient``, e.g. vLLM's HTTP client):
``trainer_sender`` picks the transport, gloo on CPU and vLLM's ``nccl`` on CUDA.

Engines in another process (vLLM's multiprocessing mode, ``vllm serve``) must import this module before
they build their worker; ``WORKER_EXTENSION`` is the ``worker_extension_cls`` that does it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, ClassVar

import torch
import torch.distributed as torch_dist
from vllm.distributed.weight_transfer.base import (
    ParamMeta,
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    VLLMWeightSyncClient,
    WeightSource,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
    layerwise_groups,
)
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

from posttrain.engines.weights import (
    TrainerWeights,
    canonical_name,
    canonical_named_tensors,
    is_adapter_tensor,
)

GLOO_BACKEND = "posttrain-gloo"
WORKER_EXTENSION = "posttrain.engines.weight_transfer.WorkerExtension"
DEFAULT_TIMEOUT_S = 300.0


class WeightSyncError(RuntimeError):
    """A weight sync failed or timed out; the message names the peer and the protocol step."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for the transfer group's rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def open_gloo_group(address: str, port: int, rank: int, world_size: int,
                    timeout_s: float) -> torch_dist.ProcessGroupGloo:
    """A gloo process group outside ``torch.distributed``'s global state (rank 0 hosts the store).

    Rank 0 listens on ``address`` only, the interface facing the workers, for the store and for gloo's own
    connections (a plain ``TCPStore`` master would listen on every interface). Both the store rendezvous and
    every later collective time out after ``timeout_s``.
    """
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
            return torch_dist.ProcessGroupGloo(torch_dist.PrefixStore("posttrain-weights", store), rank, world_size,
                                               options)
        store = torch_dist.TCPStore(address, port, world_size, is_master=False, timeout=timeout)
        return torch_dist.ProcessGroupGloo(torch_dist.PrefixStore("posttrain-weights", store), rank, world_size,
                                           timeout)
    except (OSError, RuntimeError, torch_dist.DistStoreError) as err:
        raise WeightSyncError(f"weight-transfer group at {address}:{port} (rank {rank} of {world_size}): "
                              f"rendezvous failed or timed out after {timeout_s:.0f} s: {err}") from err


def _broadcast(group: torch_dist.ProcessGroupGloo, buffer: torch.Tensor, what: str) -> None:
    opts = torch_dist.BroadcastOptions()
    opts.rootRank = 0
    try:
        group.broadcast([buffer], opts).wait()
    except RuntimeError as err:
        raise WeightSyncError(f"weight-transfer broadcast of {what} failed or timed out: {err}") from err


# ---------------------------------------------------------------------------------------------------
# Wire format
# ---------------------------------------------------------------------------------------------------

@dataclass
class GlooWeightTransferInitInfo(WeightTransferInitInfo):
    """Worker-side handshake: where the trainer's group is, and this worker's place in it."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class GlooTrainerInitInfo(TrainerInitInfo):
    """Trainer-side init info (``rank`` 0 is the sender); ``world_size`` counts the trainer and workers."""

    backend: ClassVar[str] = GLOO_BACKEND

    master_address: str
    master_port: int
    world_size: int
    timeout_s: float = DEFAULT_TIMEOUT_S


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


def _numel(shape: list[int] | tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------------------------------------------
# Inference side
# ---------------------------------------------------------------------------------------------------

class GlooWeightTransferEngine(WeightTransferEngine[GlooWeightTransferInitInfo, GlooWeightTransferUpdateInfo]):
    """vLLM worker side of ``posttrain-gloo``: receives each bucket and loads it with the model's
    ``load_weights`` inside vLLM's layerwise reload (the path vLLM's own NCCL engine takes)."""

    init_info_cls = GlooWeightTransferInitInfo
    update_info_cls = GlooWeightTransferUpdateInfo

    def __init__(self, config: Any, vllm_config: Any, device: torch.device, model: torch.nn.Module) -> None:
        super().__init__(config, vllm_config, device, model)
        self.group: torch_dist.ProcessGroupGloo | None = None

    def init_transfer_engine(self, init_info: GlooWeightTransferInitInfo) -> None:
        parallel = self.parallel_config
        worker_rank = parallel.data_parallel_index * parallel.world_size + parallel.rank
        self.group = open_gloo_group(init_info.master_address, init_info.master_port,
                                     init_info.rank_offset + worker_rank, init_info.world_size, init_info.timeout_s)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        if self.device.type == "cpu":
            repack_cpu_heads(self.model)

    def receive_weights(self, update_info: GlooWeightTransferUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("posttrain-gloo weight transfer is not initialised; call init_weight_transfer_engine")
        dtype = getattr(torch, update_info.dtype_name)
        start = 0
        for size in update_info.bucket_sizes:
            names = update_info.names[start : start + size]
            shapes = update_info.shapes[start : start + size]
            start += size
            flat = torch.empty(sum(_numel(s) for s in shapes), dtype=dtype)
            _broadcast(self.group, flat, f"the bucket starting at {names[0]!r}")
            views, offset = [], 0
            for name, shape in zip(names, shapes):
                views.append((name, flat[offset : offset + _numel(shape)].view(shape).to(self.device)))
                offset += _numel(shape)
            self.model.load_weights(views)

    def shutdown(self) -> None:
        self.group = None


def repack_cpu_heads(model: torch.nn.Module) -> None:
    """Re-pack the CPU GEMM kernels of the layers that keep their weight (embeddings, LM heads).

    vLLM's CPU build packs every linear weight into a kernel closure (``layer.cpu_linear``) when a
    layer's weights are processed, which a reload does only for layers that were sent a weight. An LM
    head tied to the embeddings is sent nothing (its weight travels under the embedding's name), so it
    would keep computing logits with the old packed copy; we measured exactly that (new embeddings,
    old logits). Re-packing from the current, shared weight fixes it.
    """
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    for layer in model.modules():
        weight = getattr(layer, "weight", None)
        if hasattr(layer, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.numel():
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)


class WorkerExtension:
    """``worker_extension_cls`` for vLLM engines in another process: importing it registers
    ``posttrain-gloo`` in that process and asks for its AMX tile state (``_allow_amx``); its one method
    answers the trainer's dtype question (through vLLM's ``/collective_rpc``)."""

    model_config: Any  # the vLLM worker's, which this class is mixed into

    def posttrain_served_dtype(self) -> str:
        """The dtype this worker's model weights are in, e.g. ``"bfloat16"``."""
        return str(self.model_config.dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------------------------
# Trainer side
# ---------------------------------------------------------------------------------------------------

class TrainerWeightSource(WeightSource):
    """The policy's weights as vLLM expects them: checkpoint names (``weights.canonical_name``; LoRA
    adapter tensors skipped, so PEFT callers merge first), full shapes (ZeRO-3 partitions included),
    one wire dtype, gathered a bucket (decoder layer) at a time by the trainer's ``TrainerWeights.gather``.
    Under ZeRO-3 every training rank must iterate it together (the gathers are collectives)."""

    def __init__(self, weights: TrainerWeights, dtype: torch.dtype) -> None:
        self.weights = weights
        self.dtype = dtype
        self._params = [(n, shape) for n, shape in weights.shapes.items() if not is_adapter_tensor(n)]
        names = [canonical_name(n) for n, _ in self._params]
        if len(set(names)) != len(names):
            seen: set[str] = set()
            dup = next(n for n in names if n in seen or seen.add(n))
            raise ValueError(f"two trainer parameters map to the checkpoint name {dup!r}")
        self._canonical = dict(zip((n for n, _ in self._params), names))

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(self._canonical[n], self.dtype, tuple(shape)) for n, shape in self._params]

    def groups(self) -> list[list[str]]:
        return layerwise_groups([self._canonical[n] for n, _ in self._params])

    def iter_groups(self) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        by_canonical = {self._canonical[n]: n for n, _ in self._params}
        buckets = [[by_canonical[c] for c in group] for group in self.groups()]
        for bucket in self.weights.gather(buckets):
            tensors = [t.to(self.dtype) for _, t in bucket]
            if any(t.is_cuda for t in tensors):  # the gather and cast may run on other streams: land them first
                torch.cuda.synchronize(tensors[0].device)
            yield [self._canonical[n] for n, _ in bucket], tensors

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for names, tensors in self.iter_groups():
            yield from zip(names, tensors)


class NamedTensorSource(WeightSource):
    """A one-off ``WeightSource`` over already-full ``(name, tensor)`` pairs (names mapped by
    ``weights.canonical_name``, adapter tensors skipped), one bucket per decoder layer."""

    def __init__(self, named_tensors: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype) -> None:
        self.dtype = dtype
        self._tensors = {canonical: tensor for _, canonical, tensor in canonical_named_tensors(named_tensors)}
        if not self._tensors:
            raise ValueError("update_weights got no tensors to send")

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(n, self.dtype, tuple(t.shape)) for n, t in self._tensors.items()]

    def groups(self) -> list[list[str]]:
        return layerwise_groups(list(self._tensors))

    def iter_groups(self) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        for group in self.groups():
            yield group, [self._tensors[n].to(self.dtype) for n in group]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for names, tensors in self.iter_groups():
            yield from zip(names, tensors)


class WeightSender(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
    """Trainer side of ``posttrain-gloo``: drives start / update / finish through the client while it
    broadcasts one flat buffer per bucket. Built by ``trainer_init`` (or ``trainer_sender``)."""

    init_info_cls = GlooTrainerInitInfo

    def __init__(self, *, client: VLLMWeightSyncClient, source: WeightSource, init_info: GlooTrainerInitInfo,
                 peer: str) -> None:
        super().__init__(client=client, source=source, is_sender=init_info.is_sender)
        self.init_info = init_info
        self.peer = peer
        self.group: torch_dist.ProcessGroupGloo | None = None

    @classmethod
    def trainer_init(cls, init_info: GlooTrainerInitInfo, *, client: VLLMWeightSyncClient,
                     source: WeightSource | None = None, peer: str = "vLLM engine") -> WeightSender:
        if source is None:
            raise ValueError("the posttrain-gloo sender needs a WeightSource")
        sender = cls(client=client, source=source, init_info=init_info, peer=peer)
        if not sender.is_sender:
            return sender
        worker_info = GlooWeightTransferInitInfo(init_info.master_address, init_info.master_port, rank_offset=1,
                                                 world_size=init_info.world_size, timeout_s=init_info.timeout_s)
        # The workers block in the rendezvous until the trainer joins, so their init runs on a side thread.
        sender._call_beside("init_weight_transfer_engine", asdict(worker_info), lambda: sender._open_group())
        return sender

    def _open_group(self) -> None:
        info = self.init_info
        self.group = open_gloo_group(info.master_address, info.master_port, 0, info.world_size, info.timeout_s)

    def _call_beside(self, method: str, payload: Any, work: Any, call: Any = None) -> None:
        """Run ``client.method(payload)`` (or ``call(payload)``) on a side thread while ``work()`` runs here;
        a failure on either side raises ``WeightSyncError`` naming the peer, and waiting on the client is
        bounded by the timeout."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="posttrain-weight-sync")
        try:
            future = pool.submit(call or getattr(self.client, method), payload)
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

    def send_weights(self, weight_version: int | None = None) -> None:
        """Push the source's weights; ``weight_version`` (the trainer step) is recorded by the engine."""
        assert self.source is not None
        if not self.is_sender:
            for _ in self.source.iter_groups():  # stay in the ZeRO-3 gathers
                pass
            return
        meta = self.source.metadata()
        dtypes = {m.dtype for m in meta}
        if len(dtypes) != 1:
            raise ValueError(f"posttrain-gloo sends one wire dtype; the source declares {sorted(map(str, dtypes))}")
        groups = self.source.groups()
        shapes = {m.name: list(m.shape) for m in meta}
        order = [name for group in groups for name in group]  # bucket order, which may differ from meta's
        info = GlooWeightTransferUpdateInfo(names=order, shapes=[shapes[n] for n in order],
                                            dtype_name=str(meta[0].dtype).removeprefix("torch."),
                                            bucket_sizes=[len(g) for g in groups])
        self._guarded("start_weight_update", self.client.start_weight_update)
        self._call_beside("update_weights", asdict(info), lambda: self._broadcast_buckets(info))
        version = None if weight_version is None else str(weight_version)
        self._guarded("finish_weight_update", lambda: self.client.finish_weight_update(weight_version=version))

    def _guarded(self, method: str, call: Any) -> None:
        """A control-plane call bounded by the timeout; failures name the peer."""
        self._call_beside(method, None, lambda: None, call=lambda _: call())

    def _broadcast_buckets(self, info: GlooWeightTransferUpdateInfo) -> None:
        assert self.group is not None and self.source is not None
        start = 0
        for size, (names, tensors) in zip(info.bucket_sizes, self.source.iter_groups()):
            expected = info.names[start : start + size]
            if names != expected:
                raise ValueError(f"weight source yielded bucket {names[:2]}... but declared {expected[:2]}...")
            start += size
            flat = torch.cat([t.detach().reshape(-1).cpu() for t in tensors])
            _broadcast(self.group, flat, f"the bucket starting at {names[0]!r}")

    def shutdown(self) -> None:
        self.group = None


def _register() -> None:
    if GLOO_BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(GLOO_BACKEND, GlooWeightTransferEngine)
    if GLOO_BACKEND not in WeightTransferTrainerFactory._registry:
        WeightTransferTrainerFactory.register_engine(GLOO_BACKEND, WeightSender)


def _allow_amx() -> None:
    """Ask Linux for this process's AMX tile state (``arch_prctl(ARCH_REQ_XCOMP_PERM)``, through torch) on
    CPUs that have AMX.

    vLLM's CPU attention runs bf16 on AMX tiles there (``cpu_attn._get_attn_isa``) but never asks for the
    permission; oneDNN asks only when it happens to pick an AMX kernel for an earlier matmul. When it has
    not (small layers), the worker process dies with SIGILL at its first attention call: we saw every
    bf16 rollout worker of the tiny model die so on its first completion. Asking is idempotent and costs
    nothing, so every process that imports this module (vLLM's workers, through ``WORKER_EXTENSION``; the
    trainer, for a colocated engine) asks up front."""
    if torch.cpu._is_amx_tile_supported():
        torch.cpu._init_amx()


_register()
_allow_amx()
