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
- Weights: ``sync_from`` / ``update_weights`` push the trainer's weights into every worker
  (``weight_sync.RemoteWeightSync``: transport, dtype, rendezvous, pausing each worker, clean-up of a failed
  sync) and stamp them with the trainer step (``weight_version``). The constructor pushes the trainer's initial
  weights (version 0), so workers serve exactly the trainer's model whatever checkpoint (or ``--load-format
  dummy``) they were started with. Multi-rank trainers: every rank generates its own share of prompts on the
  same workers, and every rank takes part in each sync.
- Failures and timeouts: two bounds. ``sync_timeout_s`` bounds one worker's weight sync; ``generation_timeout_s``
  bounds each generation request, and a worker with requests in flight that answers none of them for that long
  fails the call: its queued requests (and every other worker's) are cancelled and ``WorkerError`` names it, so
  a silent worker fails the step within one timeout, not after each queued request has timed out in turn.
  Each request's own HTTP timeout is twice ``generation_timeout_s`` (``HTTP_TIMEOUT_FACTOR``), so that
  watchdog, which names the worker and cancels the queue, fires first even on a loaded machine; the HTTP bound
  only ends the threads of requests already sent.
  Before and after each ``generate`` every worker that serves it is asked for its weight version (``GET
  /weight_info``); a worker not on the trainer's version when the call starts (restarted, synced by someone
  else), or whose version changed while the call ran, raises ``WorkerError`` naming it and both versions, so a
  call's rollouts never mix two weight versions. A completion a worker ended with a finish reason other than
  ``"stop"`` / ``"length"`` (``"abort"``: a partial output) is requested once more, then raises ``WorkerError``
  naming the worker, the request and the reason (``engines/http.py``).
- Security: with a shared secret (``worker_auth``) every request carries it; workers started with one refuse
  requests without it (401).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import torch

from posttrain.engines.base import (
    Rollouts,
    SamplingParams,
    SyncsWeights,
    check_prompts,
    sample_seeds,
    stop_token_ids,
)
from posttrain.engines.http import Completion, OpenAIHTTPEngine
from posttrain.engines.weight_sync import ControlClient, RemoteWeightSync, TrainerWeights, WorkerError
from posttrain.engines.worker_auth import secret_headers

T = TypeVar("T")

SERVED_MODEL_NAME = "default"
"""The model name ``posttrain rollout-worker`` serves under (``--served-model-name``)."""

HTTP_TIMEOUT_FACTOR = 2.0
"""A generation request's HTTP timeout, in units of ``generation_timeout_s`` (see the module docstring)."""


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


class RemoteVLLMEngine(SyncsWeights):
    """A ``RolloutEngine`` over N ``posttrain rollout-worker`` servers that syncs the trainer's weights whole (see
    the module docstring); its weight syncs are ``RemoteWeightSync``'s (``rank``, ``master_address``, ``transport`` and ``dtype`` go to it).

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
        self.generation_timeout_s = generation_timeout_s
        self.concurrency = concurrency
        headers = secret_headers(secret)
        self._clients = [OpenAIHTTPEngine(url, tokenizer, model=SERVED_MODEL_NAME, concurrency=concurrency,
                                          max_retries=retries, timeout_s=HTTP_TIMEOUT_FACTOR * generation_timeout_s,
                                          headers=headers)
                         for url in self.urls]
        self._control = [ControlClient(url, sync_timeout_s, headers) for url in self.urls]
        self._weights = RemoteWeightSync(self.urls, self._control, sync_timeout_s=sync_timeout_s, dtype=dtype,
                                         rank=rank, master_address=master_address, transport=transport)
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
        serving = [w for w, sl in enumerate(slices) if sl.stop > sl.start]
        self.check_versions(serving, expected=version)  # the call starts on the trainer's weights ...

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
        self.check_versions(serving, expected=version, during_call=True)  # ... and ends on them: one version
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

    def check_versions(self, workers: Iterable[int] | None = None, expected: int | None = None,
                       during_call: bool = False) -> None:
        """Raise ``WorkerError`` for the first worker whose weight version is not ``expected`` (default: the
        version the trainer synced last); ``during_call``: it held ``expected`` when a generation call started,
        so the version changed while it ran."""
        expected = self._version if expected is None else expected
        for w in range(len(self.urls)) if workers is None else workers:
            held = self._control[w].weight_version()
            if held != str(expected) and during_call:
                raise WorkerError(self.urls[w], f"its weight version changed from {expected} to {held!r} during a "
                                                "generation call (synced by another trainer, or restarted): the "
                                                "call's rollouts would mix two weight versions")
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

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        """Push the trainer's weights (PEFT adapters already merged) to every worker as ``version``; every
        trainer rank calls it together (``weights.gather`` runs the ZeRO-3 collectives), rank 0 sends."""
        from posttrain.engines.weight_sync import TrainerWeightSource

        self._weights.push(TrainerWeightSource(weights, self._weights.wire_dtype()), version)
        self._version = version

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int | None = None) -> None:
        """Push named full tensors to every worker; ``version`` defaults to the current one plus 1."""
        from posttrain.engines.weight_sync import NamedTensorSource

        version = self._version + 1 if version is None else version
        self._weights.push(NamedTensorSource(named_tensors, self._weights.wire_dtype()), version)
        self._version = version

    def close(self) -> None:
        for client in self._clients:
            client.close()
        for control in self._control:
            control.close()


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
