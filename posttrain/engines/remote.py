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
  on the route to the worker (``local_address_towards``), so workers on other machines can join it;
  each group spans rank 0 and all of the worker engine's ranks (``GET /get_world_size``).
- One transfer process group per worker, not one for all: vLLM's trainer-side engines address one server
  per group (``rank_offset`` 1), a dead or restarted worker then fails only its own group, named, and
  workers can be restarted independently. The cost is that rank 0 sends the weights once per worker
  (and under ZeRO-3 every rank gathers each layer once per worker), which is what a handful of workers
  per trainer affords; one group for many workers would broadcast once instead.
- Multi-rank trainers: rank 0 is the only sender; the other ranks join each sync's ZeRO-3 gathers
  (``TrainerWeightSource``) and generate their own share of prompts on the same workers.
- Failures: every HTTP call has ``timeout_s`` (generation requests are retried ``retries`` times) and every
  collective has ``timeout_s``; a dead or silent worker raises ``WorkerError`` naming its URL. After each
  ``generate`` every worker that served it is asked for its weight version (``GET /weight_info``); a
  worker on a different version than the trainer synced (restarted, or synced by someone else) raises
  ``WorkerError`` naming it and both versions.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import torch

from posttrain.engines.base import Rollouts, SamplingParams, check_prompts, sample_seeds, stop_token_ids
from posttrain.engines.http import Completion, OpenAIHTTPEngine
from posttrain.engines.weights import TrainerWeights

log = logging.getLogger(__name__)

SERVED_MODEL_NAME = "default"
"""The model name ``posttrain rollout-worker`` serves under (``--served-model-name``)."""


class WorkerError(RuntimeError):
    """A rollout worker failed, did not answer in time, or holds the wrong weights; names its URL."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"rollout worker {url}: {message}")
        self.url = url


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


class _ControlClient:
    """vLLM's ``VLLMWeightSyncClient`` over one worker's dev-mode RLHF routes (``/start_weight_update``,
    ...), plus ``/weight_info``; every call bounded by ``timeout_s``, errors naming the worker."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=timeout_s)

    def _post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self._http.post(path, json=body)
        except httpx.HTTPError as err:
            raise WorkerError(self.url, f"POST {path}: {type(err).__name__}: {err}") from err
        if response.status_code == 404:
            raise WorkerError(self.url, f"POST {path}: not found; start the worker with `posttrain rollout-worker` "
                                        "(it turns on vLLM's dev-mode weight-sync routes, VLLM_SERVER_DEV_MODE=1)")
        if response.status_code >= 400:
            raise WorkerError(self.url, f"POST {path}: HTTP {response.status_code}: {response.text[:300]}")
        return response

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._post("/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        self._post("/start_weight_update")

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        self._post("/update_weights", {"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._post("/finish_weight_update", None if weight_version is None else {"weight_version": weight_version})

    def update_weight_version(self, version: str) -> None:
        self._post("/update_weight_version", {"new_version": version})

    def reset_prefix_cache(self) -> None:
        """Drop the worker's cached prefix blocks (their keys and values were computed by the old weights)."""
        try:
            success = self._post("/reset_prefix_cache").json()["success"]
        except (ValueError, KeyError) as err:
            raise WorkerError(self.url, f"POST /reset_prefix_cache: unexpected answer: {err}") from err
        if not success:
            raise WorkerError(self.url, "POST /reset_prefix_cache: refused (requests still running during a "
                                        "weight sync); its cache would keep keys and values of the old weights")

    def world_size(self) -> int:
        """How many ranks the worker's engine has (tensor x pipeline x data parallel)."""
        try:
            response = self._http.get("/get_world_size")
            response.raise_for_status()
            return int(response.json()["world_size"])
        except (httpx.HTTPError, KeyError, ValueError) as err:
            raise WorkerError(self.url, f"GET /get_world_size: {type(err).__name__}: {err}") from err

    def served_dtype(self) -> str:
        """The dtype the worker's engine holds its weights in, every rank asked (``/collective_rpc`` of
        ``WorkerExtension.posttrain_served_dtype``), e.g. ``"bfloat16"``."""
        try:
            answers = self._post("/collective_rpc", {"method": "posttrain_served_dtype"}).json()["results"]
        except (ValueError, KeyError, TypeError) as err:
            raise WorkerError(self.url, f"POST /collective_rpc: unexpected answer: {err}") from err
        if not answers or len(set(answers)) != 1:
            raise WorkerError(self.url, f"its engine's ranks report the dtypes {answers}; expected one")
        return str(answers[0])

    def weight_version(self) -> str:
        """The version the worker reports (``"default"`` before any sync)."""
        try:
            response = self._http.get("/weight_info")
            response.raise_for_status()
            return str(response.json()["weight_version"])
        except (httpx.HTTPError, KeyError, ValueError) as err:
            raise WorkerError(self.url, f"GET /weight_info: {type(err).__name__}: {err}") from err

    def close(self) -> None:
        self._http.close()


class RemoteVLLMEngine:
    """A ``RolloutEngine`` over N ``posttrain rollout-worker`` servers (see the module docstring)."""

    def __init__(self, urls: list[str], tokenizer: Any, model: torch.nn.Module | None = None, *,
                 timeout_s: float = 120.0, retries: int = 1, concurrency: int = 256, dtype: torch.dtype = torch.float32,
                 rank: int | None = None, master_address: str | None = None, transport: str | None = None) -> None:
        if not urls:
            raise ValueError("RemoteVLLMEngine needs at least one worker URL")
        if timeout_s <= 0:
            raise ValueError(f"RemoteVLLMEngine: timeout_s must be > 0, got {timeout_s}")
        self.urls = list(urls)
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.dtype = dtype
        self.rank = _trainer_rank() if rank is None else rank
        self.master_address = master_address
        self.transport = transport or default_transport()
        if self.transport not in ("gloo", "nccl"):
            raise ValueError(f"RemoteVLLMEngine: transport {self.transport!r} must be 'gloo' or 'nccl'")
        self.concurrency = concurrency
        self._clients = [OpenAIHTTPEngine(url, tokenizer, model=SERVED_MODEL_NAME, concurrency=concurrency,
                                          max_retries=retries, timeout_s=timeout_s) for url in self.urls]
        self._control = [_ControlClient(url, timeout_s) for url in self.urls]
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

        with ThreadPoolExecutor(max_workers=max(1, min(len(requests), self.concurrency * len(self.urls)))) as pool:
            samples = [c for part in pool.map(one, requests) for c in part]
        self.check_versions([w for w, sl in enumerate(slices) if sl.stop > sl.start])
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=[c[0] for c in samples],
                        texts=[c[1] for c in samples], logprobs=[c[2] for c in samples],
                        finish_reasons=[c[3] for c in samples], weight_version=self._version)

    def check_versions(self, workers: Iterable[int] | None = None) -> None:
        """Raise ``WorkerError`` for the first worker whose weight version is not the trainer's."""
        for w in range(len(self.urls)) if workers is None else workers:
            held = self._control[w].weight_version()
            if held != str(self._version):
                raise WorkerError(self.urls[w], f"holds weight version {held!r} but the trainer synced version "
                                                f"{self._version}: the worker was restarted or synced by another "
                                                "trainer; restart the run with --resume auto to sync it again")

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
        address = self.master_address or local_address_towards(url)
        if self.transport == "nccl":
            from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
            from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

            from posttrain.engines.weight_transfer import free_port  # imports vLLM: only when a sync opens

            info = NCCLTrainerInitInfo(master_address=address, master_port=free_port(address) if sender_rank else 0,
                                       world_size=world_size, rank=self.rank)
            sender = self._bounded(url, "opening the NCCL transfer group", lambda: WeightTransferTrainerFactory
                                   .trainer_init(info, client=control, source=source))
        else:
            from posttrain.engines.weight_transfer import GlooTrainerInitInfo, WeightSender, free_port

            info = GlooTrainerInitInfo(master_address=address, master_port=free_port(address) if sender_rank else 0,
                                       world_size=world_size, timeout_s=self.timeout_s, rank=self.rank)
            sender = WeightSender.trainer_init(info, client=control, source=source, peer=f"rollout worker {url}")
        self._senders[worker] = sender
        return sender

    def _bounded(self, url: str, what: str, call: Any) -> Any:
        """``call()`` on a side thread, waited for at most ``timeout_s`` (NCCL collectives have no timeout
        of their own: a dead peer would block them forever)."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="posttrain-remote-sync")
        try:
            return pool.submit(call).result(timeout=self.timeout_s)
        except TimeoutError as err:
            raise WorkerError(url, f"{what} did not finish within {self.timeout_s:.0f} s") from err
        finally:
            pool.shutdown(wait=False)  # a hung collective's thread must not turn the error into a hang

    def _send(self, source: Any, version: int) -> None:
        from posttrain.engines.weight_transfer import WeightSyncError

        for worker, url in enumerate(self.urls):
            try:
                sender = self._sender(worker, source)
                sender.source = source
                if self.transport == "nccl":
                    self._bounded(url, "the NCCL weight broadcast", sender.send_weights)
                    if self.rank == 0:
                        self._control[worker].update_weight_version(str(version))
                else:
                    sender.send_weights(weight_version=version)
                if self.rank == 0:
                    self._control[worker].reset_prefix_cache()
            except (WeightSyncError, WorkerError) as err:
                self._senders[worker] = None  # the group is unusable after a failure; a retry opens a new one
                raise WorkerError(url, f"weight sync to version {version} failed: {err}") from err
        _trainer_barrier()  # no rank generates before rank 0 has finished every worker's update and cache reset
        self._version = version

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


def local_address_towards(url: str) -> str:
    """This machine's address on the route to ``url``'s host: where a worker there can reach the transfer
    group's rendezvous, which rank 0 hosts (no packet is sent; connecting a UDP socket only picks the route)."""
    host = httpx.URL(url).host
    port = httpx.URL(url).port or 80
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError as err:
        raise WorkerError(url, f"no network route to the worker's host {host!r}: {err}") from err


def _trainer_barrier() -> None:
    """Wait for every rank of the trainer's process group (none to wait for outside one)."""
    import torch.distributed as torch_dist

    if torch_dist.is_initialized() and torch_dist.get_world_size() > 1:
        torch_dist.barrier()


def _trainer_rank() -> int:
    import torch.distributed as torch_dist

    return torch_dist.get_rank() if torch_dist.is_initialized() else 0
