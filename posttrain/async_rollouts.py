"""Asynchronous rollouts: generate the batches of steps t+1..t+k while step t trains (``--async_rollouts``).

The trainer asks the algorithm for a step's generation request (``Algorithm.generation_request``) ahead of
time and hands it to ``AsyncRollouts``, which runs ``engine.generate`` on one background thread; the
step later takes the finished ``Rollouts`` and builds its experience from them
(``Algorithm.experience_from_rollouts``). Weight syncs run on the trainer's thread (under ZeRO-3 they are
collectives over the training ranks) and only after every launched generation of every rank has finished
(the trainer waits for its own, then meets the other ranks at a barrier: ranks may share remote workers),
so an engine never changes weights in the middle of a batch and every rollout carries the one version that
produced it; ``take`` checks it (the result's ``weight_version`` must be the engine's at launch).

With ``depth = max_staleness = k`` the generation for step s is launched at the start of step s - k,
right after the sync of the weights of step s - k - 1, so step s trains the policy of step s - 1 on
rollouts of version s - k - 1: staleness exactly k (steps 1..k+1 use the initial weights: staleness s - 1).
``take`` asserts the bound. This is the one-step-off-policy pipeline of e.g. PipelineRL / AReaL at
``k = 1``; unlike AReaL's fully asynchronous workers we keep the pipeline depth fixed, so a run is as
repeatable as a synchronous one.

The generation thread binds this rank's CUDA device before its first call (``bind_device``): a new thread starts
on cuda:0, and an in-process engine (vLLM's kernels, streams and graph replay) follows the current device, so
rank N >= 1 would otherwise generate on GPU 0.

Resume: ``state_dict`` waits for the generations in flight and returns them (token ids, log-probs,
texts, finish reasons, weight version and the data position their examples were drawn from), so a
killed run resumed from a checkpoint trains on exactly the rollouts an uninterrupted run would have used.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import GenerationRequest
from posttrain.engines.base import RolloutEngine, Rollouts, SamplingParams


@dataclass
class PendingRollouts:
    """A launched generation: its step, where its examples start in the data order, the trainer's weight
    version the engine held when it started (the last synced step), its result, and the engine's own
    ``weight_version`` at launch (None for an engine without one), which the result must carry."""

    step: int
    data_position: int
    weight_version: int
    request: GenerationRequest
    future: Future[Rollouts]
    engine_version: int | None = None


def staleness(policy_version: int, rollout_version: int) -> int:
    """How many weight versions the trained policy is ahead of the one that sampled the rollouts."""
    return policy_version - rollout_version


def check_staleness(step: int, policy_version: int, rollout_version: int, max_staleness: int) -> int:
    """The staleness of a step's rollouts; raises when it exceeds ``max_staleness`` (or is negative: a
    rollout from weights the trainer has not produced yet)."""
    lag = staleness(policy_version, rollout_version)
    if not 0 <= lag <= max_staleness:
        raise RuntimeError(f"step {step}: rollouts of weight version {rollout_version} for a policy at version "
                           f"{policy_version} (staleness {lag}; allowed 0..{max_staleness})")
    return lag


def rollouts_to_dict(rollouts: Rollouts) -> dict[str, Any]:
    """A JSON-serialisable copy of ``rollouts``."""
    return dataclasses.asdict(rollouts)


def rollouts_from_dict(state: dict[str, Any]) -> Rollouts:
    """The inverse of ``rollouts_to_dict``."""
    return Rollouts(**state)


def bind_device(device: torch.device) -> None:
    """Make ``device`` the calling thread's current CUDA device (nothing to do on the CPU)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)


class AsyncRollouts:
    """Runs generation requests ahead of training on one background thread bound to ``device`` (see the module
    docstring)."""

    def __init__(self, engine: RolloutEngine, depth: int, device: torch.device) -> None:
        if depth < 1:
            raise ValueError(f"async rollouts need a depth (max_staleness) >= 1, got {depth}")
        self.engine = engine
        self.depth = depth
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="async-rollouts", initializer=bind_device,
                                        initargs=(device,))
        self._pending: list[PendingRollouts] = []

    @property
    def launched_steps(self) -> list[int]:
        return [p.step for p in self._pending]

    def launch(self, step: int, data_position: int, weight_version: int, request: GenerationRequest) -> None:
        """Start generating step ``step``'s rollouts with the engine's current weights (``weight_version``)."""
        engine_version = getattr(self.engine, "weight_version", None)
        future = self._pool.submit(self.engine.generate, request.prompt_ids, request.params)
        self._pending.append(PendingRollouts(step, data_position, weight_version, request, future, engine_version))

    def take(self, step: int, policy_version: int) -> tuple[PendingRollouts, Rollouts]:
        """The oldest launched generation, which must be ``step``'s, once finished; raises when its weight
        version is more than ``depth`` behind ``policy_version`` (the weights being trained)."""
        if not self._pending or self._pending[0].step != step:
            raise RuntimeError(f"async rollouts: step {step} was not launched (launched: {self.launched_steps})")
        pending = self._pending.pop(0)
        check_staleness(step, policy_version, pending.weight_version, self.depth)
        rollouts = pending.future.result()
        if pending.engine_version is not None and rollouts.weight_version != pending.engine_version:
            raise RuntimeError(f"step {step}: rollouts launched on the engine's weight version "
                               f"{pending.engine_version} came back from version {rollouts.weight_version}: "
                               "the weights changed while they were generated")
        return pending, rollouts

    def wait(self) -> None:
        """Block until every launched generation has finished (before a weight sync, an eval or a save);
        a failed generation raises here."""
        for pending in self._pending:
            pending.future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- checkpointing -------------------------------------------------------------------------------
    def state_dict(self) -> list[dict[str, Any]]:
        """The launched generations, finished, as JSON-serialisable records (waits for them)."""
        self.wait()
        return [{"step": p.step, "data_position": p.data_position, "weight_version": p.weight_version,
                 "prompt_ids": p.request.prompt_ids,
                 "params": dataclasses.asdict(p.request.params), "rollouts": rollouts_to_dict(p.future.result())}
                for p in self._pending]

    def load_state_dict(self, records: list[dict[str, Any]]) -> None:
        """Restore launched generations saved by ``state_dict`` (replacing any launched here)."""
        if self._pending:
            raise RuntimeError(f"async rollouts: cannot restore over launched steps {self.launched_steps}")
        for record in records:
            params = dict(record["params"])
            params["stop_token_ids"] = tuple(params["stop_token_ids"])
            future: Future[Rollouts] = Future()
            future.set_result(rollouts_from_dict(record["rollouts"]))
            request = GenerationRequest(record["prompt_ids"], SamplingParams(**params))
            self._pending.append(PendingRollouts(int(record["step"]), int(record["data_position"]),
                                                 int(record["weight_version"]), request, future))


def launch_ahead(launch: Callable[[int], None], next_step: int, last_step: int, launched: list[int],
                 depth: int) -> None:
    """Launch steps so that ``next_step .. next_step + depth`` (capped at ``last_step``) are in flight, in
    order; ``launch(step)`` starts one. Step s is thus launched at the start of step s - depth."""
    target = min(last_step, next_step + depth)
    start = launched[-1] + 1 if launched else next_step
    for step in range(start, target + 1):
        launch(step)


class AsyncStepDriver:
    """The trainer's side of ``--async_rollouts``: draws each step's examples when its generation is
    launched, launches ``depth`` steps ahead, and builds a step's experience from its finished rollouts.

    ``algo`` is the run's ``Algorithm`` (``generation_request`` / ``experience_from_rollouts``), ``sampler``
    the trainer's ``EpochSampler`` (advanced at launch, so a checkpoint's data position is ahead of its
    step by the launched batches, which ``state_dict`` carries), ``rank`` / ``per_rank`` this rank's share
    of each batch, ``last_step`` the run's final step (nothing is launched past it), ``device`` this rank's
    device (the generation thread's current CUDA device).
    """

    def __init__(self, algo: Any, engine: RolloutEngine, sampler: Any, rank: int, per_rank: int, depth: int,
                 last_step: int, device: torch.device) -> None:
        self.algo = algo
        self.sampler = sampler
        self.rank = rank
        self.per_rank = per_rank
        self.last_step = last_step
        self.rollouts = AsyncRollouts(engine, depth, device)
        self.synced_version = 0  # the trainer step whose weights the engine holds
        self._examples: dict[int, list[Any]] = {}

    def _local(self, batch: list[Any]) -> list[Any]:
        return batch[self.rank * self.per_rank : (self.rank + 1) * self.per_rank]

    def _launch(self, step: int) -> None:
        position = self.sampler.state_dict()["consumed"]
        examples = self._local(self.sampler.next_batch())
        request = self.algo.generation_request(examples, step)
        self._examples[step] = examples
        self.rollouts.launch(step, position, self.synced_version, request)

    def experience(self, step: int, policy: Any) -> tuple[Any, dict[str, float]]:
        """Step ``step``'s experience, training the weights of step ``step - 1``; launches the steps ahead
        first, so their generation overlaps this step's training."""
        launch_ahead(self._launch, step, self.last_step, self.rollouts.launched_steps, self.rollouts.depth)
        start = time.perf_counter()
        pending, rollouts = self.rollouts.take(step, policy_version=step - 1)
        waited = time.perf_counter() - start
        lag = staleness(step - 1, pending.weight_version)
        experience, metrics = self.algo.experience_from_rollouts(self._examples.pop(step), rollouts, policy, step)
        metrics["async/staleness"] = float(lag)
        metrics["time/async_rollout_wait"] = waited  # seconds this step waited for its rollouts (wall time)
        return experience, metrics

    def synced(self, version: int) -> None:
        """Record that the engine now holds the weights of trainer step ``version``; call it right after
        each sync (which must follow ``wait``)."""
        self.synced_version = version

    def wait(self) -> None:
        """Let every launched generation finish (before a sync, an evaluation or a checkpoint)."""
        self.rollouts.wait()

    def close(self) -> None:
        self.rollouts.close()

    def state_dict(self) -> dict[str, Any]:
        """This rank's launched generations (finished) and the engine's weight version."""
        return {"synced_version": self.synced_version, "launched": self.rollouts.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``; each launched step's examples are drawn again from its data position."""
        self.synced_version = int(state["synced_version"])
        self.rollouts.load_state_dict(state["launched"])
        for record in state["launched"]:
            replay = copy.copy(self.sampler)
            replay.load_state_dict({"consumed": int(record["data_position"])})
            self._examples[int(record["step"])] = self._local(replay.next_batch())

    def state_dict_all_ranks(self, world_size: int) -> list[dict[str, Any]]:
        """Every rank's ``state_dict``, rank order (a collective: every rank calls it together)."""
        state = self.state_dict()
        if world_size == 1:
            return [state]
        import torch.distributed as torch_dist

        gathered: list[Any] = [None] * world_size
        torch_dist.all_gather_object(gathered, state)
        return gathered
