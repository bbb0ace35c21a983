"""What a stage is, for the runner that schedules it (``runner``), the Ray step that runs it (``ray_exec``) and
the block that calls it (``blocks``): a plain ``Process`` (run as Ray tasks), an ``ActorStage`` (a process built
once per Ray actor), and the ``Reject`` a process returns for a record it refuses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Reject:
    """Returned by a stage for a record it refuses; the runner writes it to the rejects file."""

    reason: str


Process = Callable[[list[dict]], list["dict | Reject | None"]]
"""A stage: a list of input records -> one item per input (output dict, ``Reject``, or None to drop)."""


@dataclass
class ActorStage:
    """A stage built on a worker: ``factory()`` (zero arguments, picklable, e.g. a ``functools.partial``)
    returns the ``Process``; it is called once per actor, so an engine is loaded ``num_actors`` times in
    all. ``num_gpus`` is reserved per actor (1 for a stage on a GPU device, 0 on CPU)."""

    factory: Callable[[], Process]
    num_actors: int = 1
    num_gpus: float = 0

    def __post_init__(self) -> None:
        if self.num_actors < 1:
            raise ValueError(f"ActorStage: num_actors must be >= 1, got {self.num_actors}")


def stage_workers(stage: Process | ActorStage, num_workers: int | None) -> int:
    """How many workers run ``stage`` at once: ``num_workers`` when given, else the actor stage's
    ``num_actors``, else one Ray task."""
    return num_workers or (stage.num_actors if isinstance(stage, ActorStage) else 1)
