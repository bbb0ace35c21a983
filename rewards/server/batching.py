"""Dynamic batching: prompts from concurrent requests become one ``engine.generate`` call.

- A bounded queue of prompts (``max_queue``). A request is admitted whole or not at all: when its
  prompts do not fit, ``QueueFull`` is raised at once (the app answers 429 with ``Retry-After``), so
  memory stays bounded and clients back off instead of piling up (back-pressure). A request with more
  prompts than ``max_queue`` can never fit: ``TooLarge`` (413).
- One worker task takes up to ``max_batch_size`` queued prompts that share the same
  ``SamplingParams`` (one ``generate`` call has one set of params), waiting at most ``batch_wait_s``
  for a batch to fill while the model is idle; while the model is busy, new prompts simply accumulate.
  ``max_batch_size=1`` (or ``enabled=False``) turns batching off: one prompt per call.
- Generation runs in one background thread, so the event loop keeps accepting and rejecting requests.
- A batch the engine refuses for its sampling params (``SamplingParamsError``, e.g. a JSON schema it
  cannot compile) fails those requests only; it is not counted as a generation failure. A batch never
  mixes params, so other requests are not affected.
- A request that times out (``wait``'s ``timeout``) is cancelled: its prompts still queued are dropped
  before they reach the model.
- Each prompt may carry its own ``SamplingParams`` (``sample_params``: the samples of a seeded request
  get the seeds ``base.sample_seeds`` gives, as every engine does). Such prompts never share a generate call, so
  a seeded sample's output depends only on its prompt and seed, not on what else was queued.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace

from posttrain.engines.base import GenerationEngine, SamplingParams, SamplingParamsError, sample_seeds

logger = logging.getLogger(__name__)


def sample_params(params: SamplingParams, prompt_ids: list[list[int]]) -> list[SamplingParams]:
    """One copy of ``params`` per prompt of a request, seeded ``base.sample_seeds(params.seed, prompt_ids)`` when
    ``params`` has a seed: the seeds the colocated and remote engines give the same call, so a seeded request
    samples the same on every placement (else the engine's fresh randomness already makes the samples differ)."""
    if params.seed is None:
        return [params] * len(prompt_ids)
    return [replace(params, seed=seed) for seed in sample_seeds(params.seed, prompt_ids)]


class QueueFull(Exception):
    """The queue cannot take the request now; retry later (429)."""


class TooLarge(Exception):
    """The request has more prompts than the queue can ever hold (413)."""


@dataclass
class Generated:
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    logprobs: list[float]
    finish_reason: str


@dataclass
class _Job:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


@dataclass
class BatchStats:
    batches: int = 0
    prompts: int = 0
    max_batch: int = 0
    generate_seconds: float = 0.0
    completion_tokens: int = 0
    dropped_cancelled: int = 0
    failures: int = 0
    rejected_full: int = 0
    histogram: dict[int, int] = field(default_factory=dict)


class Batcher:
    """Collects prompts from many requests into batched ``engine.generate`` calls (any ``GenerationEngine``)."""

    def __init__(self, engine: GenerationEngine, max_batch_size: int = 16, max_queue: int = 256, batch_wait_s: float = 0.002,
                 enabled: bool = True) -> None:
        if max_batch_size < 1 or max_queue < 1:
            raise ValueError("max_batch_size and max_queue must be >= 1")
        self.engine = engine
        self.max_batch_size = max_batch_size if enabled else 1
        self.max_queue = max_queue
        self.batch_wait_s = batch_wait_s if enabled else 0.0
        self.stats = BatchStats()
        self._jobs: deque[_Job] = deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")
        self.busy = False

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.create_task(self._worker(), name="batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for job in self._jobs:
            if not job.future.done():
                job.future.set_exception(QueueFull("server shutting down"))
        self._jobs.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def queued(self) -> int:
        return len(self._jobs)

    # -- submission ------------------------------------------------------------------------------
    def submit(self, prompts: list[list[int]],
               params: SamplingParams | list[SamplingParams]) -> list[asyncio.Future]:
        """Queue all ``prompts`` or none (raises ``QueueFull`` / ``TooLarge``); ``params`` is shared or one per
        prompt."""
        per_prompt = params if isinstance(params, list) else [params] * len(prompts)
        if len(per_prompt) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(per_prompt)} sampling params")
        if self._wakeup is None:
            raise RuntimeError("Batcher.start() was not called")
        if len(prompts) > self.max_queue:
            raise TooLarge(f"the request needs {len(prompts)} generations; this server queues at most "
                           f"{self.max_queue} (--max_queue)")
        if len(self._jobs) + len(prompts) > self.max_queue:
            self.stats.rejected_full += 1
            raise QueueFull(f"queue full ({len(self._jobs)}/{self.max_queue} generations waiting); retry later")
        loop = asyncio.get_running_loop()
        futures = []
        for ids, own in zip(prompts, per_prompt):
            job = _Job(list(ids), own, loop.create_future())
            self._jobs.append(job)
            futures.append(job.future)
        self._wakeup.set()
        return futures

    async def run(self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams],
                  timeout: float | None) -> list[Generated]:
        """Submit and wait; on timeout the still-queued prompts are cancelled and TimeoutError raised."""
        futures = self.submit(prompts, params)
        try:
            return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))
        except (TimeoutError, asyncio.CancelledError):
            for fut in futures:
                fut.cancel()
            raise

    # -- worker ----------------------------------------------------------------------------------
    def _take_batch(self) -> list[_Job]:
        while self._jobs and self._jobs[0].future.done():  # cancelled (timed out) before it ran
            self._jobs.popleft()
            self.stats.dropped_cancelled += 1
        if not self._jobs:
            return []
        params = self._jobs[0].params
        batch: list[_Job] = []
        keep: deque[_Job] = deque()
        while self._jobs and len(batch) < self.max_batch_size:
            job = self._jobs.popleft()
            if job.future.done():
                self.stats.dropped_cancelled += 1
            elif job.params == params:
                batch.append(job)
            else:
                keep.append(job)
        keep.extend(self._jobs)
        self._jobs = keep
        return batch

    async def _worker(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._jobs:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self.batch_wait_s > 0 and len(self._jobs) < self.max_batch_size:
                await asyncio.sleep(self.batch_wait_s)
            batch = self._take_batch()
            if not batch:
                continue
            params = batch[0].params
            self.busy = True
            start = time.perf_counter()
            try:
                out = await loop.run_in_executor(self._executor, self.engine.generate,
                                                 [j.prompt_ids for j in batch], params)
            except asyncio.CancelledError:
                raise
            except SamplingParamsError as err:  # the requests' params (e.g. a schema), not a failing engine
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
                continue
            except Exception as err:
                logger.exception("generate failed for a batch of %d", len(batch))
                self.stats.failures += 1
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
                continue
            finally:
                self.busy = False
            elapsed = time.perf_counter() - start
            self.stats.batches += 1
            self.stats.prompts += len(batch)
            self.stats.max_batch = max(self.stats.max_batch, len(batch))
            self.stats.generate_seconds += elapsed
            self.stats.histogram[len(batch)] = self.stats.histogram.get(len(batch), 0) + 1
            for i, job in enumerate(batch):
                self.stats.completion_tokens += len(out.completion_ids[i])
                if not job.future.done():
                    job.future.set_result(Generated(
                        prompt_ids=job.prompt_ids, completion_ids=list(out.completion_ids[i]), text=out.texts[i],
                        logprobs=list(out.logprobs[i]) if out.logprobs else [],
                        finish_reason=out.finish_reasons[i] if out.finish_reasons else "stop"))
