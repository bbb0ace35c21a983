"""Pushing the trainer's weights into remote rollout workers (``engines/remote.py``): ``RemoteWeightSync``.

- Transport: vLLM's weight-transfer protocol, over our gloo transport on CPU (``weight_transfer.py``)
  and vLLM's ``nccl`` on CUDA (``default_transport``; the NCCL path has not run here: this machine has no GPU).
  Each sync stamps the workers with the trainer step (``weight_version``) and resets each worker's prefix cache
  (its cached blocks hold keys and values computed by the old weights; vLLM keeps them across a weight update,
  and on CPU a block is 128 tokens, so only longer prompts are cached).
- dtype: the weights travel in the dtype the workers serve, asked at the first sync (``wire_dtype``; a worker on
  ``--dtype auto`` serves a bf16 checkpoint in bf16): a trainer in another dtype is logged, workers serving
  different dtypes are refused.
- Rendezvous: rank 0 hosts each group's rendezvous on its address on the route to the worker
  (``rendezvous.rendezvous_address``), so workers on other machines can join it; each group spans rank 0 and all
  of the worker engine's ranks (``GET /get_world_size``).
- One transfer process group per worker, not one for all: vLLM's trainer-side engines address one server per
  group (``rank_offset`` 1), a dead or restarted worker then fails only its own group, named, and workers can be
  restarted independently. The cost is that rank 0 sends the weights once per worker (and under ZeRO-3 every
  rank gathers each layer once per worker), which is what a handful of workers per trainer affords; one group
  for many workers would broadcast once instead.
- Multi-rank trainers: rank 0 is the only sender; the other ranks join each sync's ZeRO-3 gathers
  (``TrainerWeightSource``). No rank generates before rank 0 has finished every worker (the trainer's barrier).
- Each worker is paused for its sync (``/pause?mode=abort``, then ``/resume``): every trainer rank has drained
  its own requests before a sync (the trainer's barrier), but a request its client gave up on (a timeout, a
  retry) may still run on the worker, and would run on the layers vLLM's layerwise reload puts on the meta
  device.
- ``sync_timeout_s`` bounds one worker's weight sync (the transfer group's rendezvous, every collective, every
  control call).
- A failed sync cleans up, best effort (``RemoteWeightSync._abandon``, ``worker_control.ControlClient
  .abandon_update``): the transfer group is aborted (which frees a worker blocked in the broadcast), the worker's
  update is closed (``finish_weight_update``, or ``start`` + ``finish`` when vLLM already closed it: either puts
  the old weights back on every layer not sent, where vLLM's layerwise reload had left them on the meta device)
  and its version is set to ``failed-sync-<step>`` so that no generation trusts it. A resumed run then syncs
  that same worker (a new transfer group, every weight re-sent) as it syncs a fresh one.
- NCCL (CUDA): the broadcast runs guarded (``nccl_sender.NCCLSender``, ``collective_guard``): the collective on a
  daemon thread on this rank's device, the worker's ``/update_weights`` call here, the communicator aborted on a
  timeout.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Protocol

import torch

from posttrain.engines.base import PROCESSED_LOGPROBS
from posttrain.engines.weight_sync.rendezvous import free_port, log_nccl_interface, rendezvous_address
from posttrain.engines.weight_sync.worker_control import ControlClient, WorkerError

if TYPE_CHECKING:  # vLLM is imported where a sync needs it, not when the trainer starts
    from vllm.distributed.weight_transfer.base import WeightSource

log = logging.getLogger(__name__)


class TransferSender(Protocol):
    """This trainer rank's side of one worker's transfer group, kept across syncs: ``WeightSender``
    (``posttrain-gloo``) or ``NCCLSender`` (vLLM's ``nccl``)."""

    def send_weights(self, source: WeightSource, weight_version: int) -> None:
        """Send ``source`` as ``weight_version`` through the worker's whole update (start, update, finish)."""
        ...

    def abort(self) -> None:
        """Abort this rank's side of the group, which frees a worker blocked in the broadcast."""
        ...


class RemoteWeightSync:
    """This trainer rank's side of the weight syncs into the workers at ``urls`` (see the module docstring), over
    their control clients ``control`` (one per URL, shared with the engine that generates on them)."""

    def __init__(self, urls: list[str], control: list[ControlClient], *, sync_timeout_s: float,
                 dtype: torch.dtype, rank: int | None = None, master_address: str | None = None,
                 transport: str | None = None) -> None:
        self.urls = list(urls)
        self.control = control
        self.sync_timeout_s = sync_timeout_s
        self.dtype = dtype
        self.rank = _trainer_rank() if rank is None else rank
        self.master_address = master_address
        self.transport = transport or default_transport()
        if self.transport not in ("gloo", "nccl"):
            raise ValueError(f"RemoteVLLMEngine: transport {self.transport!r} must be 'gloo' or 'nccl'")
        self.served_dtype: torch.dtype | None = None
        self._senders: list[TransferSender | None] = [None] * len(self.urls)

    def wire_dtype(self) -> torch.dtype:
        """The workers' served dtype, asked at the first sync (``wire_dtype``: logged where it is not the
        trainer's ``dtype``, refused where the workers disagree); sent in from then on. The first sync also checks
        that every worker reports processed log-probs (``check_logprobs_mode``)."""
        if self.served_dtype is None:
            for url, control in zip(self.urls, self.control):
                check_logprobs_mode(url, control.logprobs_mode())
            served = {url: control.served_dtype() for url, control in zip(self.urls, self.control)}
            self.served_dtype = wire_dtype(self.dtype, served)
        return self.served_dtype

    def _sender(self, worker: int, source: WeightSource) -> TransferSender:
        """This rank's trainer-side sender for ``worker``'s transfer group (opened on first use; vLLM's NCCL
        engine is handed ``source``, the first sync's weights, which it requires)."""
        sender = self._senders[worker]
        if sender is not None:
            return sender
        url, control = self.urls[worker], self.control[worker]
        sender_rank = self.rank == 0
        # The group spans the trainer's rank 0 and every rank of the worker's engine (tensor / data parallel).
        world_size = 1 + (control.world_size() if sender_rank else 1)
        address = rendezvous_address(url, self.master_address)
        port = free_port(address) if sender_rank else 0
        if self.transport == "nccl":
            from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

            from posttrain.engines.weight_sync.nccl_sender import NCCLSender

            if sender_rank:
                log_nccl_interface(url, address)
            sender = NCCLSender.open(NCCLTrainerInitInfo(master_address=address, master_port=port,
                                                         world_size=world_size, rank=self.rank),
                                     control, source, self.sync_timeout_s, _local_rank())
        else:
            from posttrain.engines.weight_sync.weight_sender import WeightSender
            from posttrain.engines.weight_sync.weight_transfer import GlooTrainerInitInfo

            info = GlooTrainerInitInfo(master_address=address, master_port=port, world_size=world_size,
                                       timeout_s=self.sync_timeout_s, rank=self.rank)
            sender = WeightSender.trainer_init(info, client=control, peer=f"rollout worker {url}")
        self._senders[worker] = sender
        return sender

    def push(self, source: WeightSource, version: int) -> None:
        """Send ``source`` to every worker as ``version``, one worker after the other; every trainer rank calls
        it together. A failed worker is cleaned up (``_abandon``) and raises ``WorkerError`` naming it."""
        from posttrain.engines.weight_sync.collective_guard import CollectiveTimeout
        from posttrain.engines.weight_sync.gloo_group import WeightSyncError

        for worker, url in enumerate(self.urls):
            try:
                sender = self._sender(worker, source)
                if self.rank == 0:
                    self.control[worker].pause()
                sender.send_weights(source, weight_version=version)
                if self.rank == 0:
                    self.control[worker].reset_prefix_cache()
                    self.control[worker].resume()
            except Exception as err:
                self._abandon(worker, version)
                if isinstance(err, (WeightSyncError, WorkerError, CollectiveTimeout)):
                    raise WorkerError(url, f"weight sync to version {version} failed: {err}") from err
                raise
        _trainer_barrier()  # no rank generates before rank 0 has finished every worker's update and cache reset

    def _abandon(self, worker: int, version: int) -> None:
        """Clean up after a failed sync to ``worker`` (best effort): abort this rank's side of the transfer
        group, which frees a worker blocked in the broadcast (a retry opens a new group), then on rank 0 close
        the worker's update (``ControlClient.abandon_update``)."""
        sender, self._senders[worker] = self._senders[worker], None
        if sender is not None:
            try:
                sender.abort()
            except (RuntimeError, OSError) as err:  # the sync's error is the one raised; this one is logged
                log.warning("aborting the weight-transfer group of %s failed: %s", self.urls[worker], err)
        if self.rank == 0:
            self.control[worker].abandon_update(str(version))


WIRE_DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes the trainer sends weights in (a worker serving another, e.g. a quantised one, is refused)."""


def wire_dtype(trainer_dtype: torch.dtype, served: dict[str, str]) -> torch.dtype:
    """The dtype the trainer sends its weights in: the one every worker serves (``served``: URL -> dtype
    name), so each worker holds the trainer's weights rounded once, as its own dtype stores them. Workers
    that disagree, or serve a dtype outside ``WIRE_DTYPES``, raise ``WorkerError`` naming them.

    >>> wire_dtype(torch.float32, {"http://a:1": "bfloat16"})
    torch.bfloat16
    """
    for url, name in served.items():
        if name not in WIRE_DTYPES:
            raise WorkerError(url, f"serves {name} weights; the trainer sends {', '.join(WIRE_DTYPES)} only: restart "
                                   "it with `posttrain rollout-worker --dtype` set to one of them")
    names = set(served.values())
    if len(names) != 1:
        raise WorkerError(", ".join(served), f"the workers serve different dtypes ({served}): start every worker "
                                             "with the same --dtype")
    dtype = getattr(torch, names.pop())
    if dtype != trainer_dtype:
        log.warning("rollout workers serve %s weights: the trainer's %s weights are sent as %s (cast before "
                    "sending), so the workers hold them rounded to %s", dtype, trainer_dtype, dtype, dtype)
    return dtype


def default_transport() -> str:
    """The weight transport trainer and workers use: vLLM's ``nccl`` on CUDA, our gloo transport
    (``weight_transfer.GLOO_BACKEND``) on CPU. Both sides decide the same way, so trainer and workers must
    both be on CUDA or both on CPU."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def _trainer_barrier() -> None:
    """Wait for every rank of the trainer's process group (none to wait for outside one)."""
    import torch.distributed as torch_dist

    if torch_dist.is_initialized() and torch_dist.get_world_size() > 1:
        torch_dist.barrier()


def _trainer_rank() -> int:
    import torch.distributed as torch_dist

    return torch_dist.get_rank() if torch_dist.is_initialized() else 0


def _local_rank() -> int | None:
    """This rank's CUDA device index (the launcher's ``LOCAL_RANK``); None without CUDA."""
    return int(os.environ.get("LOCAL_RANK", "0")) if torch.cuda.is_available() else None


def check_logprobs_mode(url: str, mode: str) -> None:
    """Refuse a worker whose completions report other log-probs than ``PROCESSED_LOGPROBS`` (as TRL asserts of its
    vLLM server): the behaviour weights compare them with the trainer's log-probs at the sampling temperature."""
    if mode != PROCESSED_LOGPROBS:
        raise WorkerError(url, f"reports {mode} log-probs; the trainer's importance weights need {PROCESSED_LOGPROBS} "
                               "(start the worker with `posttrain rollout-worker`, which sets it)")
