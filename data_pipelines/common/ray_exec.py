"""Ray start-up and the one Ray Data step that runs a stage's blocks (used by ``runner.StageRunner``).

``init_ray(address)`` is the single Ray entry point of every pipeline: ``None`` starts (or, if this
process already did, reuses) a local in-process Ray with no dashboard, quiet logs, a small object store
and at least as many CPUs as this machine has; ``"auto"`` or ``"ray://host:port"`` joins a cluster.

``run_blocks`` turns the list of block indices still to do into a Ray dataset with one block per row
(``ray.data.from_items``) and maps it with ``map_batches`` (``batch_size=1``, numpy batches): a plain
``Process`` as Ray tasks, an ``ActorStage`` as an actor pool whose actors call the factory once in their
constructor. Each block's outputs and rejects travel back as JSON strings (one column each: Arrow
cannot hold arbitrary nested records with lists and None reliably) and reach the driver in input order
(the workers themselves may get them in any order).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator

import numpy as np

logger = logging.getLogger(__name__)

LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # blocks travel as small JSON strings: no need for 30% of RAM


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start or join Ray once per process (see the module docstring); a no-op if Ray is already up."""
    import ray

    if ray.is_initialized():
        return
    kwargs = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": False,
              "logging_level": logging.WARNING}
    if address is None:
        kwargs.update(num_cpus=max(os.cpu_count() or 1, num_cpus or 1),
                      object_store_memory=LOCAL_OBJECT_STORE_BYTES)
    ray.init(address=address, **kwargs)


class _BlockActor:
    """One actor of an ``ActorStage`` pool: builds the stage once, then runs the blocks it is sent."""

    def __init__(self, task, factory) -> None:
        self.task = task
        self.process = factory()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _run_batch(batch, self.task, self.process)


def _run_batch(batch: dict[str, np.ndarray], task, process) -> dict[str, np.ndarray]:
    blocks, outputs, rejects = [], [], []
    for block in batch["block"].tolist():
        out, rej = task.run(process, int(block))
        blocks.append(int(block))
        outputs.append(json.dumps(out, ensure_ascii=False))
        rejects.append(json.dumps(rej, ensure_ascii=False))
    return {"block": np.array(blocks, dtype=np.int64), "outputs": np.array(outputs, dtype=object),
            "rejects": np.array(rejects, dtype=object)}


def run_blocks(task, stage, blocks: list[int], *, ray_address: str | None = None,
               num_workers: int | None = None) -> Iterator[tuple[int, list[dict], list[dict]]]:
    """``(block, outputs, rejects)`` for every block in ``blocks``, in that order, computed on Ray."""
    if not blocks:
        return
    import ray.data

    from data_pipelines.common.runner import ActorStage

    is_actor = isinstance(stage, ActorStage)
    workers = num_workers or (stage.num_actors if is_actor else 1)
    init_ray(ray_address, workers)
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset "execution finished" lines
    ds = ray.data.from_items([{"block": b} for b in blocks], override_num_blocks=len(blocks))
    ds.context.execution_options.preserve_order = True
    ds.context.enable_progress_bars = False
    ds.context.print_on_execution_start = False
    if is_actor:
        ds = ds.map_batches(_BlockActor, fn_constructor_kwargs={"task": task, "factory": stage.factory},
                            batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
                            num_cpus=1, num_gpus=stage.num_gpus or None)
    else:
        ds = ds.map_batches(_run_batch, fn_kwargs={"task": task, "process": stage}, batch_size=1,
                            batch_format="numpy", compute=ray.data.TaskPoolStrategy(size=workers), num_cpus=1)
    for row in ds.iter_rows():
        yield int(row["block"]), json.loads(row["outputs"]), json.loads(row["rejects"])
