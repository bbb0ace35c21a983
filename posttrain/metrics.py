"""Run telemetry: phase timers, peak memory, metric sinks (JSONL, TensorBoard, wandb) and a progress bar.

Only rank 0 writes. ``metrics.jsonl`` is the durable record: every line is flushed and fsynced as it is
written, and ``truncate_after`` rewinds it on resume so a resumed run's file equals an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from posttrain.common.files import atomic_write_text

SINKS: tuple[str, ...] = ("jsonl", "tensorboard", "wandb")


class PhaseTimer:
    """Accumulates wall-clock seconds per named phase until ``pop``; nested phases each count fully."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = defaultdict(float)
        self._active: set[str] = set()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body under ``name`` (also when it raises). Re-entering an active phase is an error."""
        if name in self._active:
            raise ValueError(f"phase {name!r} is already running; nesting it in itself would count it twice")
        self._active.add(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] += time.perf_counter() - start
            self._active.discard(name)

    def pop(self) -> dict[str, float]:
        """``{"time/<phase>": seconds}`` accumulated since the last pop, then reset."""
        out = {f"time/{name}": seconds for name, seconds in self._seconds.items()}
        self._seconds.clear()
        return out


def peak_memory_mb(device: torch.device | str) -> float:
    """Peak memory in MiB: CUDA ``max_memory_allocated`` on a CUDA device, else the process's peak RSS."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def parse_sinks(sinks: str) -> list[str]:
    """Split a comma list of sink names; unknown names fail naming them."""
    names = [s.strip() for s in sinks.split(",") if s.strip()]
    unknown = [s for s in names if s not in SINKS]
    if unknown:
        raise ValueError(f"unknown metric sinks {unknown} in {sinks!r}; choose from {list(SINKS)}")
    return names


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise ValueError("metric sink 'wandb' was asked for but wandb is not installed; "
                         "`pip install wandb` or drop it from the sinks") from None
    return wandb


class MetricsLogger:
    """Writes scalar metrics per step to the chosen sinks; a no-op on ranks other than 0.

    Argument errors (unknown sinks, wandb asked for but not installed) are raised on every rank, so a
    bad configuration stops all ranks alike. A fresh run appends to an existing ``metrics.jsonl``; call
    ``truncate_after(-1)`` to start it empty.
    """

    def __init__(self, output_dir: str | os.PathLike, sinks: str, rank: int, run_name: str,
                 config: dict[str, Any]) -> None:
        names = parse_sinks(sinks)
        wandb = _import_wandb() if "wandb" in names else None
        self.enabled = rank == 0
        self.path = Path(output_dir) / "metrics.jsonl"
        self.tb_dir = Path(output_dir) / "tb"
        self._file: Any = None
        self._tb: Any = None
        self._wandb: Any = None
        if not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if "jsonl" in names:
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held open for the run)
        if "tensorboard" in names:
            self._tb = self._open_tensorboard(purge_step=None)
            self._tb.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)
        if wandb is not None:
            project = os.environ.get("WANDB_PROJECT", "posttrain")
            self._wandb = wandb.init(project=project, name=run_name, config=config, dir=str(output_dir))

    def _open_tensorboard(self, purge_step: int | None) -> Any:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(log_dir=str(self.tb_dir), purge_step=purge_step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Write one step's scalars to every sink; the JSONL line is on disk when this returns."""
        if not self.enabled:
            return
        if "step" in metrics:
            raise ValueError("metrics must not contain the key 'step'; pass the step as the argument")
        values: dict[str, float] = {}
        for key, value in metrics.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"metric {key!r} = {value!r} is not a scalar") from None
        if self._file is not None:
            self._file.write(json.dumps({"step": step, **values}) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        if self._tb is not None:
            for key, value in values.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def truncate_after(self, step: int) -> None:
        """On resume from ``step``: keep only JSONL lines with step <= ``step`` (atomic rewrite) and hide
        later TensorBoard events. A torn last line left by a killed writer is dropped; a corrupt line
        anywhere else raises."""
        if not self.enabled:
            return
        if self._tb is not None:
            self._tb.close()
            self._tb = self._open_tensorboard(purge_step=step + 1)
        if self._file is None:
            return
        self._file.close()
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept: list[str] = []
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines) and not line.endswith("\n"):
                    continue
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError(
                    f"{self.path} line {number} is not a metrics record: {line[:80]!r}")
            if record["step"] <= step:
                kept.append(line)
        atomic_write_text(self.path, "".join(kept))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held open for the run)

    def close(self) -> None:
        """Close every sink; safe to call twice."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


class ProgressBar:
    """A tqdm bar over optimizer steps; pass ``enabled = progress and rank == 0``."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = True) -> None:
        self._bar = tqdm(total=total, initial=initial, disable=not enabled, dynamic_ncols=True, unit="step")

    def update(self, postfix: dict[str, float]) -> None:
        """Advance one step and show ``postfix`` (e.g. loss, reward) next to the bar."""
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()
