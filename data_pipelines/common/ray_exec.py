"""Ray start-up and the one Ray Data step that runs a stage's blocks (used by ``runner.StageRunner``; what a
stage is: ``stage``).

``init_ray(address)`` is the single Ray entry point of every pipeline: ``None`` starts (or, if this
process already did, reuses) a local in-process Ray with no dashboard, quiet logs, a small object store
and one logical CPU more than the larger of this machine's cores and the workers asked for (an actor pool
holding every CPU would leave none to the tasks that read the input for it); ``"auto"`` or
``"ray://host:port"`` joins a cluster.

``run_blocks`` takes the input as read by the workers (``ray_read.indexed_lines``: rows ``{_index, line}``),
cuts it into blocks of exactly ``chunk_size`` rows with Ray Data's streaming repartition
(``repartition(target_num_rows_per_block=chunk_size, strict=True)``, input order preserved, so block ``k``
holds rows ``[k*C, (k+1)*C)`` whatever the number of workers), and maps the blocks with ``map_batches``
(``batch_size=chunk_size``): a plain ``Process`` as Ray tasks, an ``ActorStage`` as an actor pool whose
actors build the stage once, the first time a block needs it (a rerun whose blocks are all done loads no
engine). Each worker runs ``blocks.BlockTask`` on its block and writes the block's files itself; only a
one-row summary per block (status and counts) comes back to the driver.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from data_pipelines.common.ray_read import INDEX, LINE
from data_pipelines.common.stage import ActorStage, stage_workers

logger = logging.getLogger(__name__)

LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # blocks of input lines and small summaries: no need for 30% of RAM


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start or join Ray once per process (see the module docstring); a no-op if Ray is already up."""
    import ray
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset "execution finished" lines
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    if ray.is_initialized():
        return
    kwargs = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": False,
              "logging_level": logging.WARNING}
    if address is None:  # one logical CPU beyond the workers: the tasks reading the input must never starve
        kwargs.update(num_cpus=max(os.cpu_count() or 1, num_cpus or 1) + 1,
                      object_store_memory=LOCAL_OBJECT_STORE_BYTES)
    ray.init(address=address, **kwargs)


class _BlockActor:
    """One actor of an ``ActorStage`` pool: builds the stage on first need, then runs the blocks it is sent."""

    def __init__(self, task, factory) -> None:
        self.task = task
        self.factory = factory
        self.process = None

    def _get_process(self):
        if self.process is None:
            self.process = self.factory()
        return self.process

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _run_batch(batch, self.task, self._get_process)


def _run_plain(batch: dict[str, np.ndarray], task, process) -> dict[str, np.ndarray]:
    return _run_batch(batch, task, lambda: process)


def _run_batch(batch: dict[str, np.ndarray], task, get_process) -> dict[str, np.ndarray]:
    """Run every block whose rows are in ``batch`` (normally exactly one); one summary row per block."""
    groups: dict[int, tuple[list[int], list[str]]] = {}
    for index, line in zip(batch[INDEX].tolist(), batch[LINE].tolist()):
        indices, lines = groups.setdefault(int(index) // task.chunk_size, ([], []))
        indices.append(int(index))
        lines.append(line)
    rows = [task.run(block, indices, lines, get_process) for block, (indices, lines) in sorted(groups.items())]
    return {key: np.array([row[key] for row in rows], dtype=object if key in ("status", "detail") else np.int64)
            for key in ("block", "status", "outputs", "rejects", "detail")}


def run_blocks(ds: Any, task, stage, *, num_workers: int | None = None, stall_timeout_s: float = 0) -> Iterator[dict]:
    """A summary dict (``BlockTask.run``) for every block of ``ds``, computed and written on Ray workers.

    Ray Data's no-progress guard (30 minutes by default) counts only blocks moving between operators, and
    one block here is ``chunk_size`` records of a stage (LLM calls): a slow block on a loaded machine is not
    a hang. The guard is off unless ``stall_timeout_s`` > 0 sets it (``--stall_timeout_s``)."""
    import ray.data

    is_actor = isinstance(stage, ActorStage)
    workers = stage_workers(stage, num_workers)
    ds.context.execution_options.preserve_order = True  # block k = rows [k*C, (k+1)*C)
    ds = ds.repartition(target_num_rows_per_block=task.chunk_size, strict=True)
    if is_actor:
        ds = ds.map_batches(_BlockActor, fn_constructor_kwargs={"task": task, "factory": stage.factory},
                            batch_size=task.chunk_size, batch_format="numpy",
                            compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1,
                            num_gpus=stage.num_gpus or None)
    else:
        ds = ds.map_batches(_run_plain, fn_kwargs={"task": task, "process": stage}, batch_size=task.chunk_size,
                            batch_format="numpy", compute=ray.data.TaskPoolStrategy(size=workers), num_cpus=1)
    ds.context.execution_no_progress_timeout_s = stall_timeout_s if stall_timeout_s > 0 else -1
    for row in ds.iter_rows():
        yield {"block": int(row["block"]), "status": str(row["status"]), "outputs": int(row["outputs"]),
               "rejects": int(row["rejects"]), "detail": str(row["detail"])}
