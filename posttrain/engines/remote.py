"""Remote rollout workers (``--rollout vllm-remote:http://h1:8100,http://h2:8100``).

Each worker is a vLLM OpenAI server started with ``posttrain rollout-worker`` (``engines/worker.py``):
dev-mode RLHF routes on, our weight transport registered, processed (sampling) log-probs. The trainer side
is ``RemoteVLLMEngine``, the same ``RolloutEngine`` contract as the HF and colocated vLLM engines:

- ``generate`` spreads the prompts over the N workers in contiguous, balanced, order-preserving slices
  (``balanced_slices``) and sends each worker its whole slice at once through the OpenAI-compatible client
  (``engines/http.py``): one request per group of identical prompts with ``n`` samples (``request_runs``),
  all of them in flight together (at most ``concurrency`` requests per worker), so vLLM schedules the
  share as one batch; the samples come back in input order. Sample ``i`` of a call seeded ``s`` gets the
  seed ``base.sample_seeds(s, prompts)[i]`` (the colocated engine's) whichever worker and request serve it,
  so the samples depend neither on the worker count nor on how the prompts are split into requests; the
  request stops at the tokenizer's eos and ``stop_token_ids`` (``base.stop_token_ids``), as the colocated
  engine (workers serve vLLM's neutral sampling defaults, ``--generation-config vllm``, not the checkpoint's).
- Weights: ``sync_from`` / ``update_weights`` push the trainer's weights into every worker through
  vLLM's weight-transfer protocol, over our gloo transport on CPU (``engines/weight_transfer.py``) and
  vLLM's ``nccl`` on CUDA (``default_transport``; the NCCL path has not run here: this machine has no
  GPU), stamp them with the trainer step (``weight_version``) and reset each worker's prefix cache (its
  cached blocks hold keys and values computed by the old weights; vLLM keeps them across a weight update,
  and on CPU a block is 128 tokens, so only longer prompts are cached). The constructor pushes the trainer's
  initial weights (version 0), so workers serve exactly the trainer's model whatever checkpoint (or
  ``--load-format dummy``) they were started with. The weights travel in the dtype the workers serve,
  asked at the first sync (``wire_dtype``; a worker on ``--dtype auto`` serves a bf16 checkpoint in bf16):
  a trainer in another dtype is logged, workers serving different dtypes are refused. Rank 0 hosts each group's rendezvous on its address
  on the route to the worker (``rendezvous.rendezvous_address``), so workers on other machines can join it;
  each group spans rank 0 and all of the worker engine's ranks (``GET /get_world_size``).
- One transfer process group per worker, not one for all: vLLM's trainer-side engines address one server
  per group (``rank_offset`` 1), a dead or restarted worker then fails only its own group, named, and
  workers can be restarted independently. The cost is that rank 0 sends the weights once per worker
  (and under ZeRO-3 every rank gathers each layer once per worker), which is what a handful of workers
  per trainer affords; one group for many workers would broadcast once instead.
- Multi-rank trainers: rank 0 is the only sender; the other ranks join each sync's ZeRO-3 gathers
  (``TrainerWeightSource``) and generate their own share of prompts on the same workers.
- Failures and timeouts: two bounds. ``sync_timeout_s`` bounds one worker's weight sync (the transfer
  group's rendezvous, every collective, every control call); ``generation_timeout_s`` bounds each
  generation request, and a worker with requests in flight that answers none of them for that long fails
  the call: its queued requests (and every other worker's) are cancelled and ``WorkerError`` names it, so
  a silent worker fails the step within one timeout, not after each queued request has timed out in turn.
  After each ``generate`` every worker that served it is asked for its weight version (``GET
  /weight_info``); a worker not on the version the call started with (restarted, synced by someone else,
  or synced while the call ran) raises ``WorkerError`` naming it and both versions.
- Each worker is paused for its sync (``/pause?mode=abort``, then ``/resume``): every trainer rank has
  drained its own requests before a sync (the trainer's barrier), but a request its client gave up on (a
  timeout, a retry) may still run on the worker, and would run on the layers vLLM's layerwise reload puts on
  the meta device.
- A failed sync cleans up, best effort (``_abandon_sync``, ``worker_control.ControlClient.abandon_update``): the transfer group is aborted (which frees a
  worker blocked in the broadcast), the worker's update is closed (``finish_weight_update``, or ``start`` +
  ``finish`` when vLLM already closed it: either puts the old weights back on every layer not sent, where
  vLLM's layerwise reload had left them on the meta device) and its version is set to
  ``failed-sync-<step>`` so that no generation trusts it. A resumed run then syncs that same worker (a new
  transfer group, every weight re-sent) as it syncs a fresh one.
- NCCL (CUDA): the broadcast runs guarded (``collective_guard``): the collective on a daemon thread on this
  rank's device, the worker's ``/update_weights`` call here, the communicator aborted on a timeout.
- Security: with a shared secret (``worker_auth``) every request carries it; workers started with one refuse
  requests without it (401).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import torch

from posttrain.engines.base import Rollouts, SamplingParams, check_prompts, sample_seeds, stop_token_ids
from posttrain.engines.http import Completion, OpenAIHTTPEngine
from posttrain.engines.rendezvous import log_nccl_interface, rendezvous_address
from posttrain.engines.weights import TrainerWeights
from posttrain.engines.worker_auth import secret_headers
from posttrain.engines.worker_control import ControlClient, WorkerError

T = TypeVar("T")

log = logging.getLogger(__name__)

SERVED_MODEL_NAME = "default"
"""The model name ``posttrain rollout-worker`` serves under (``--served-model-name``)."""


def balanced_slices(n_items: int, n_parts: int) -> list[slice]:
    """``n_parts`` contiguous slices covering ``range(n_items)`` in order, sizes differing by at most one
    (the first ``n_items % n_parts`` slices take the extra item).

    >>> balanced_slices(5, 2)
    [slice(0, 3, None), slice(3, 5, None)]
    """
    if n_parts < 1:
        raise ValueError(f"balanced_slices needs at least one part, got {n_parts}")
    base, extra = divmod(n_items, n_parts)
    slices, start = [], 0
    for part in range(n_parts):
        size = base + (1 if part < extra else 0)
        slices.append(slice(start, start + size))
        start += size
    return slices


class RemoteVLLMEngine:
    """A ``RolloutEngine`` over N ``posttrain rollout-worker`` servers (see the module docstring).

    ``secret``: the workers' shared secret (``worker_auth``), sent on every request; None sends none."""

    def __init__(self, urls: list[str], tokenizer: Any, model: torch.nn.Module | None = None, *,
                 sync_timeout_s: float = 120.0, generation_timeout_s: float = 120.0, retries: int = 1,
                 concurrency: int = 256, dtype: torch.dtype = torch.float32, rank: int | None = None,
                 master_address: str | None = None, transport: str | None = None, secret: str | None = None) -> None:
        if not urls:
            raise ValueError("RemoteVLLMEngine needs at least one worker URL")
        for name, value in (("sync_timeout_s", sync_timeout_s), ("generation_timeout_s", generation_timeout_s)):
            if value <= 0:
                raise ValueError(f"RemoteVLLMEngine: {name} must be > 0, got {value}")
        self.urls = list(urls)
        self.tokenizer = tokenizer
        self.sync_timeout_s = sync_timeout_s
        self.generation_timeout_s = generation_timeout_s
        self.dtype = dtype
        self.rank = _trainer_rank() if rank is None else rank
        self.master_address = master_address
        self.transport = transport or default_transport()
        if self.transport not in ("gloo", "nccl"):
            raise ValueError(f"RemoteVLLMEngine: transport {self.transport!r} must be 'gloo' or 'nccl'")
        self.concurrency = concurrency
        headers = secret_headers(secret)
        self._clients = [OpenAIHTTPEngine(url, tokenizer, model=SERVED_MODEL_NAME, concurrency=concurrency,
                                          max_retries=retries, timeout_s=generation_timeout_s, headers=headers)
                         for url in self.urls]
        self._control = [ControlClient(url, sync_timeout_s, headers) for url in self.urls]
        self._senders: list[Any] = [None] * len(self.urls)
        self._served_dtype: torch.dtype | None = None
        self._version = 0
        if model is not None:
            self.update_weights(model.named_parameters(), version=0)

    # -- generation ----------------------------------------------------------------------------------
    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """One completion per prompt, in input order. Worker ``w`` serves slice ``w`` of the prompts, all of
        it at once: one request per run of identical prompts (a GRPO group) with ``n`` its length
        (``request_runs``), every request in flight together, so vLLM schedules the whole share as one batch.
        Sample ``i`` is seeded ``base.sample_seeds(seed)[i]`` however the prompts are split into requests."""
        check_prompts(prompt_ids)
        version = self._version  # a sync while this call runs fails its version check
        seeds = None if params.seed is None else sample_seeds(params.seed, prompt_ids)
        slices = balanced_slices(len(prompt_ids), len(self.urls))
        requests = [(w, start, count) for w, sl in enumerate(slices) for start, count in
                    request_runs(prompt_ids, seeds, sl)]

        # the colocated engine's stop ids (the tokenizer's eos added) and seeds: the same seed gives the same
        # samples on either placement
        sent = dataclasses.replace(params, stop_token_ids=stop_token_ids(params, self.tokenizer.eos_token_id))

        def one(request: tuple[int, int, int]) -> list[Completion]:
            worker, start, count = request
            try:
                return self._clients[worker].complete(prompt_ids[start], sent, n=count,
                                                      seed=None if seeds is None else seeds[start],
                                                      what=f"prompts {start}..{start + count - 1}")
            except RuntimeError as err:
                raise WorkerError(self.urls[worker], f"generation failed: {err}") from err

        parts = self._run_requests([lambda request=request: one(request) for request in requests],
                                   [worker for worker, _, _ in requests])
        samples = [c for part in parts for c in part]
        self.check_versions([w for w, sl in enumerate(slices) if sl.stop > sl.start], expected=version)
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=[c[0] for c in samples],
                        texts=[c[1] for c in samples], logprobs=[c[2] for c in samples],
                        finish_reasons=[c[3] for c in samples], weight_version=version)

    def _run_requests(self, requests: list[Callable[[], T]], owner: list[int]) -> list[T]:
        """Run ``requests`` (request ``i`` goes to worker ``owner[i]``), ``concurrency`` at a time per worker;
        their results in order. The first failure, or a worker with requests in flight that answers none for
        ``generation_timeout_s``, cancels every queued request and raises ``WorkerError`` naming the worker;
        requests already sent are not waited for (their threads end within their own HTTP timeout)."""
        results: list[Any] = [None] * len(requests)
        pools = {w: ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="posttrain-remote-generate")
                 for w in sorted(set(owner))}
        try:
            futures: dict[Future[T], int] = {pools[owner[i]].submit(request): i for i, request in enumerate(requests)}
            pending = set(futures)
            last_answer = dict.fromkeys(pools, time.monotonic())
            while pending:
                deadline = min(last_answer[owner[futures[f]]] for f in pending) + self.generation_timeout_s
                done, pending = wait(pending, timeout=max(0.0, deadline - time.monotonic()),
                                     return_when=FIRST_COMPLETED)
                now = time.monotonic()
                for future in done:
                    index = futures[future]
                    results[index] = future.result()  # a failed request raises here, naming its worker
                    last_answer[owner[index]] = now
                for w in sorted({owner[futures[f]] for f in pending}):
                    if now - last_answer[w] >= self.generation_timeout_s:
                        stuck = sum(owner[futures[f]] == w for f in pending)
                        raise WorkerError(self.urls[w], f"answered none of its {stuck} outstanding generation "
                                                        f"requests within {self.generation_timeout_s:.0f} s "
                                                        "(generation_timeout_s); its queued requests were cancelled")
        finally:
            for pool in pools.values():
                pool.shutdown(wait=False, cancel_futures=True)
        return results

    def check_versions(self, workers: Iterable[int] | None = None, expected: int | None = None) -> None:
        """Raise ``WorkerError`` for the first worker whose weight version is not ``expected`` (default: the
        version the trainer synced last)."""
        expected = self._version if expected is None else expected
        for w in range(len(self.urls)) if workers is None else workers:
            held = self._control[w].weight_version()
            if held != str(expected):
                raise WorkerError(self.urls[w], f"holds weight version {held!r} but the trainer expected version "
                                                f"{expected} (synced {self._version}): the worker was restarted, "
                                                "synced by another trainer or synced while generating; restart "
                                                "the run with --resume auto to sync it again")

    # -- weights -------------------------------------------------------------------------------------
    @property
    def weight_version(self) -> int:
        """The trainer step whose weights every worker holds (0 = the trainer's initial weights)."""
        return self._version

    def _wire_dtype(self) -> torch.dtype:
        """The workers' served dtype, asked at the first sync (``wire_dtype``: logged where it is not the
        trainer's ``dtype``, refused where the workers disagree); sent in from then on."""
        if self._served_dtype is None:
            served = {url: control.served_dtype() for url, control in zip(self.urls, self._control)}
            self._served_dtype = wire_dtype(self.dtype, served)
        return self._served_dtype

    def _sender(self, worker: int, source: Any) -> Any:
        """This rank's trainer-side engine for ``worker``'s transfer group (opened on first use)."""
        if self._senders[worker] is not None:
            return self._senders[worker]
        url, control = self.urls[worker], self._control[worker]
        sender_rank = self.rank == 0
        # The group spans the trainer's rank 0 and every rank of the worker's engine (tensor / data parallel).
        world_size = 1 + (control.world_size() if sender_rank else 1)
        address = rendezvous_address(url, self.master_address)
        if self.transport == "nccl":
            from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
            from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

            from posttrain.engines.collective_guard import run_guarded_collective
            from posttrain.engines.weight_transfer import free_port

            info = NCCLTrainerInitInfo(master_address=address, master_port=free_port(address) if sender_rank else 0,
                                       world_size=world_size, rank=self.rank)
            if sender_rank:
                log_nccl_interface(url, address)
            opened: list[Any] = []
            try:
                run_guarded_collective(lambda: opened.append(WeightTransferTrainerFactory.trainer_init(
                    info, client=control, source=source)), None, self.sync_timeout_s,
                    "opening the NCCL transfer group", device_index=_local_rank())
            except Exception as err:
                raise WorkerError(url, f"opening the NCCL transfer group failed: {err}") from err
            sender = opened[0]
        else:
            from posttrain.engines.weight_transfer import GlooTrainerInitInfo, WeightSender, free_port

            info = GlooTrainerInitInfo(master_address=address, master_port=free_port(address) if sender_rank else 0,
                                       world_size=world_size, timeout_s=self.sync_timeout_s, rank=self.rank)
            sender = WeightSender.trainer_init(info, client=control, source=source, peer=f"rollout worker {url}")
        self._senders[worker] = sender
        return sender

    def _send_nccl(self, worker: int, sender: Any, version: int) -> None:
        """vLLM's NCCL ``send_weights``, guarded (``collective_guard``): the ZeRO-3 gathers and the broadcast
        on a daemon thread on this rank's device, each gathered bucket synchronised before it is sent
        (``TrainerWeightSource``), the worker's ``/update_weights`` here, the communicator aborted on a
        timeout. It drives vLLM's own ``_broadcast`` / ``_post_send_sync`` (vLLM 0.30)."""
        from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferUpdateInfo

        from posttrain.engines.collective_guard import run_guarded_collective

        source, control = sender.source, self._control[worker]
        meta = source.metadata()

        def collective() -> None:
            sender._broadcast(source, meta)
            sender._post_send_sync()

        what = f"the NCCL weight broadcast to version {version}"
        if not sender.is_sender:  # other ranks only join the gathers
            run_guarded_collective(collective, None, self.sync_timeout_s, what, device_index=_local_rank())
            return
        info = NCCLWeightTransferUpdateInfo(names=[m.name for m in meta],
                                            dtype_names=[str(m.dtype).removeprefix("torch.") for m in meta],
                                            shapes=[list(m.shape) for m in meta])
        control.start_weight_update()
        run_guarded_collective(collective, lambda: control.update_weights(dataclasses.asdict(info)),
                               self.sync_timeout_s, what, device_index=_local_rank(),
                               abort=sender.model_update_group.destroy)
        control.finish_weight_update(str(version))

    def _send(self, source: Any, version: int) -> None:
        from posttrain.engines.collective_guard import CollectiveTimeout
        from posttrain.engines.weight_transfer import WeightSyncError

        for worker, url in enumerate(self.urls):
            try:
                sender = self._sender(worker, source)
                sender.source = source
                if self.rank == 0:
                    self._control[worker].pause()
                if self.transport == "nccl":
                    self._send_nccl(worker, sender, version)
                else:
                    sender.send_weights(weight_version=version)
                if self.rank == 0:
                    self._control[worker].reset_prefix_cache()
                    self._control[worker].resume()
            except Exception as err:
                self._abandon_sync(worker, version)
                if isinstance(err, (WeightSyncError, WorkerError, CollectiveTimeout)):
                    raise WorkerError(url, f"weight sync to version {version} failed: {err}") from err
                raise
        _trainer_barrier()  # no rank generates before rank 0 has finished every worker's update and cache reset
        self._version = version

    def _abandon_sync(self, worker: int, version: int) -> None:
        """Clean up after a failed sync to ``worker`` (best effort): abort this rank's side of the transfer
        group, which frees a worker blocked in the broadcast (a retry opens a new group), then on rank 0 close
        the worker's update (``ControlClient.abandon_update``)."""
        sender, self._senders[worker] = self._senders[worker], None
        group = getattr(sender, "group", None) or getattr(sender, "model_update_group", None)
        abort = getattr(group, "abort", None) or getattr(group, "destroy", None)
        if abort is not None:
            try:
                abort()
            except (RuntimeError, OSError) as err:  # the sync's error is the one raised; this one is logged
                log.warning("aborting the weight-transfer group of %s failed: %s", self.urls[worker], err)
        if self.rank == 0:
            self._control[worker].abandon_update(str(version))

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        """Push the trainer's weights (PEFT adapters already merged) to every worker as ``version``; every
        trainer rank calls it together (``weights.gather`` runs the ZeRO-3 collectives), rank 0 sends."""
        from posttrain.engines.weight_transfer import TrainerWeightSource

        self._send(TrainerWeightSource(weights, self._wire_dtype()), version)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int | None = None) -> None:
        """Push named full tensors to every worker; ``version`` defaults to the current one plus 1."""
        from posttrain.engines.weight_transfer import NamedTensorSource

        source = NamedTensorSource(named_tensors, self._wire_dtype())
        self._send(source, self._version + 1 if version is None else version)

    def close(self) -> None:
        for client in self._clients:
            client.close()
        for control in self._control:
            control.close()


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


def request_runs(prompt_ids: list[list[int]], seeds: list[int] | None, part: slice) -> list[tuple[int, int]]:
    """``part`` of the prompts cut into ``(start, count)`` requests of ``n = count`` samples: runs of identical
    consecutive prompts whose seeds follow one another (vLLM seeds sample ``j`` of a request seeded ``s``
    with ``s + j``; ``seeds`` None: unseeded).

    >>> request_runs([[1], [1], [1], [2]], [7, 8, 20, 30], slice(0, 4))
    [(0, 2), (2, 1), (3, 1)]
    """
    runs: list[tuple[int, int]] = []
    for i in range(part.start, part.stop):
        if runs and prompt_ids[i] == prompt_ids[i - 1] and (seeds is None or seeds[i] == seeds[i - 1] + 1):
            start, count = runs[-1]
            runs[-1] = (start, count + 1)
        else:
            runs.append((i, 1))
    return runs


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
