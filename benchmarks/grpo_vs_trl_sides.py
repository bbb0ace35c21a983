"""The sides of ``bench_grpo_vs_trl.py`` and what every side's worker process shares: the side names (ours with
the shipped ``GRPOConfig`` defaults plus a few fields, TRL's variants) and the memory readings each worker reports
about itself."""

from __future__ import annotations

import os
from typing import Any

from posttrain.metrics import peak_memory_mb

SIDE_OVERRIDES: dict[str, dict[str, Any]] = {
    "ours": {}, "ours-async": {"async_rollouts": True}, "ours-packed": {"padding_free": True},
}
"""Our sides: the shipped GRPOConfig defaults plus these fields (ours-packed: the padding-free lever on)."""

SIDES = (*SIDE_OVERRIDES, "trl", "trl-vllm")


def peak_rss_mb() -> float:
    """This process's peak resident memory, MiB."""
    return peak_memory_mb("cpu")


def current_rss_mb() -> float:
    """This process's resident memory now, MiB (NaN where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def peak_gpu_mb() -> float | None:
    """Peak CUDA memory allocated by this process, MiB; None without a GPU."""
    import torch

    return peak_memory_mb("cuda") if torch.cuda.is_available() else None
