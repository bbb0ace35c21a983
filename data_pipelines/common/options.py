"""The pipelines' command line below the parser: the backbone's flags (``add_backbone_args``) and the typed,
frozen options they parse into (``BackboneOptions``), and ``namespace_values``, how a pipeline's own options
dataclass takes the flags of the same names. argparse stops at the CLI edge: below it every function takes a
pipeline's options dataclass, or the few values it needs."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any


def add_backbone_args(parser: argparse.ArgumentParser) -> None:
    """The backbone flags every pipeline takes: ``--ray_address``, ``--num_workers``, ``--overwrite``,
    ``--failure_retries``, ``--stall_timeout_s``."""
    parser.add_argument("--ray_address", default=None,
                        help="Ray cluster to run on ('auto', 'ray://host:port'); default: a local in-process Ray. "
                        "On a cluster --output must be on storage shared by every node")
    parser.add_argument("--num_workers", type=int, default=1,
                        help="Ray workers per stage (tasks, or actors each holding one engine)")
    parser.add_argument("--overwrite", action="store_true",
                        help="redo finished steps that were made from another input, flag or model (default: "
                        "refuse, naming what changed)")
    parser.add_argument("--failure_retries", type=int, default=3,
                        help="retries of a block whose stage raised (a server down, out of memory), with "
                        "exponential backoff, before the run fails; records the stage refuses are rejects")
    parser.add_argument("--stall_timeout_s", type=float, default=0,
                        help="fail a stage when no block has finished for this many seconds (0, the default: no "
                        "limit; a block of LLM calls on a loaded machine can take longer than any fixed limit, "
                        "and every remote call has its own timeout)")


@dataclass(frozen=True)
class BackboneOptions:
    """How every stage of a pipeline runs on the backbone (the flags of ``add_backbone_args``)."""

    ray_address: str | None = None
    """Ray cluster to join ('auto', 'ray://host:port'); None: a local in-process Ray."""
    num_workers: int = 1
    """Ray workers per stage (tasks, or actors each holding one engine)."""
    overwrite: bool = False
    """Redo finished work made from another input, flag or model instead of refusing it."""
    failure_retries: int = 3
    """Retries of a block whose stage raised, with exponential backoff, before the run fails."""
    stall_timeout_s: float = 0
    """Fail a stage when no block finishes for this many seconds (0: no limit)."""

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise SystemExit(f"error: --num_workers must be >= 1, got {self.num_workers}")
        if self.failure_retries < 0:
            raise SystemExit(f"error: --failure_retries must be >= 0, got {self.failure_retries}")
        if self.stall_timeout_s < 0:
            raise SystemExit(f"error: --stall_timeout_s must be >= 0 (0 = no limit), got {self.stall_timeout_s}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BackboneOptions:
        return cls(**namespace_values(cls, args))

    def runner_kwargs(self) -> dict[str, Any]:
        """``StageRunner`` keyword arguments."""
        return {"ray_address": self.ray_address, "num_workers": self.num_workers, "retries": self.failure_retries,
                "overwrite": self.overwrite, "stall_timeout_s": self.stall_timeout_s}


def namespace_values(cls: type, args: argparse.Namespace, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The parsed flag of every field of the dataclass ``cls`` but ``skip`` (the fields its ``from_args`` fills
    itself), by field name; a field no flag sets is an error naming it (a flag renamed without its field)."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        if not hasattr(args, field.name):
            raise TypeError(f"{cls.__name__}.{field.name}: no parsed flag of that name")
        values[field.name] = getattr(args, field.name)
    return values
