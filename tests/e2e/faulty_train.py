"""``posttrain/train.py`` with one fault injected into one weight sync, for the tests of what the other ranks and
the rollout workers do when a rank fails or hangs in the middle of a sync. Run like the entry point:

    POSTTRAIN_TEST_FAULT=hang:1:2 deepspeed --num_gpus 2 tests/e2e/faulty_train.py --algo grpo ...

``POSTTRAIN_TEST_FAULT`` is ``KIND:RANK:STEP``: on rank ``RANK``, the sync of the weights after step ``STEP``

- ``raise``: raises once the first bucket (decoder layer) of the weights has gone (on rank 0, in the middle of
  its broadcast to the workers; on another rank, between two ZeRO-3 gathers);
- ``hang``: never returns (the rank sleeps before the sync starts, as one stuck outside any collective does).

Every other sync, and every other rank, is the real trainer's. Without the variable it is ``train.py``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch.distributed as torch_dist

from posttrain import train, trainer

FAULT_ENV = "POSTTRAIN_TEST_FAULT"
FAULT_KINDS = ("raise", "hang")


def parse_fault(value: str) -> tuple[str, int, int]:
    """``KIND:RANK:STEP`` -> ``(kind, rank, step)``; anything else raises ``ValueError`` naming the variable."""
    parts = value.split(":")
    if len(parts) != 3 or parts[0] not in FAULT_KINDS or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"{FAULT_ENV}={value!r}: expected KIND:RANK:STEP with KIND one of {FAULT_KINDS}")
    return parts[0], int(parts[1]), int(parts[2])


@contextmanager
def failing_after_one_bucket(message: str) -> Iterator[None]:
    """While inside, the trainer's weight source raises ``RuntimeError(message)`` after its first bucket."""
    from posttrain.engines.weight_sync import TrainerWeightSource

    intact = TrainerWeightSource.iter_groups

    def fails(self: TrainerWeightSource) -> Iterator[Any]:
        for index, bucket in enumerate(intact(self)):
            if index == 1:
                raise RuntimeError(message)
            yield bucket

    TrainerWeightSource.iter_groups = fails
    try:
        yield
    finally:
        TrainerWeightSource.iter_groups = intact


def install_fault(kind: str, rank: int, step: int) -> None:
    """Wrap the trainer's ``push_weights`` so that the sync after ``step`` on ``rank`` raises or hangs."""
    push = trainer.push_weights

    def faulty_push(rollout: Any, module: Any, zero_stage: int, at_step: int) -> None:
        if at_step != step or torch_dist.get_rank() != rank:
            return push(rollout, module, zero_stage, at_step)
        print(f"injected fault: rank {rank} {kind}s in the weight sync after step {step}", file=sys.stderr, flush=True)
        if kind == "hang":
            while True:
                time.sleep(60)
        with failing_after_one_bucket(f"injected fault: rank {rank} failed in the weight sync after step {step}"):
            return push(rollout, module, zero_stage, at_step)

    trainer.push_weights = faulty_push


if __name__ == "__main__":
    if os.environ.get(FAULT_ENV):
        install_fault(*parse_fault(os.environ[FAULT_ENV]))
    sys.exit(train.main())
