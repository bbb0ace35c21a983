"""bf16 autocast of the trained policy with fp32 master weights (``--autocast``): whether this CPU multiplies
bf16 natively, which setting that makes of ``auto``, and the forward wrapper.

On a CPU without native bf16 matmul (neither AMX-BF16 nor AVX512-BF16) PyTorch emulates bf16 and a bf16 matmul
is far slower than fp32 (``benchmarks/grpo_vs_trl.md`` measured this project's CPU), so ``auto`` turns autocast on only where ``/proc/cpuinfo`` lists one of those
flags. As accelerate's mixed precision (TRL's ``bf16=True``) does, the policy's forward runs under
``torch.autocast``: every forward of the trained policy (the training loss, the old-policy log-probs), while the
weights, their gradients and AdamW's state stay float32. The rollout engine's copy and frozen roles keep their
own precision.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import torch

AUTOCAST_CHOICES = ("auto", "bf16", "off")

NATIVE_BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
"""``/proc/cpuinfo`` flags of x86 instruction sets with native bf16 matmul (AMX tiles, AVX512 dot products)."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's ``flags`` in ``cpuinfo`` (empty where the file or the line is missing, e.g. not
    Linux or not x86)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether the CPU (``flags``, default ``cpu_flags()``) has an instruction set that multiplies bf16 natively."""
    return bool(NATIVE_BF16_CPU_FLAGS & (cpu_flags() if flags is None else flags))


def autocast_dtype(setting: str, precision: str, device_type: str,
                   flags: frozenset[str] | None = None) -> torch.dtype | None:
    """The autocast dtype for ``--autocast setting`` (None = no autocast): ``bf16`` always, ``off`` never,
    ``auto`` only for fp32 weights on a CPU with native bf16 (``cpu_has_native_bf16``; on a GPU ``auto`` is off:
    choose ``bf16`` or ``--precision bf16`` there). bf16 weights (``--precision bf16``) need no autocast."""
    if setting not in AUTOCAST_CHOICES:
        raise ValueError(f"autocast: {setting!r} is not one of {list(AUTOCAST_CHOICES)}")
    if setting == "off" or precision == "bf16":
        return None
    if setting == "bf16":
        return torch.bfloat16
    return torch.bfloat16 if device_type == "cpu" and cpu_has_native_bf16(flags) else None


def autocast_forward(model: torch.nn.Module, device_type: str, dtype: torch.dtype) -> torch.nn.Module:
    """``model`` with its forward run under ``torch.autocast(device_type, dtype)`` (weights unchanged); a bound
    method of the model, so a deep copy runs its own forward under the same autocast."""
    model.autocast_settings = (device_type, dtype)
    model.forward = types.MethodType(_autocast_forward, model)
    return model


def _autocast_forward(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    device_type, dtype = model.autocast_settings
    with torch.autocast(device_type=device_type, dtype=dtype):
        return type(model).forward(model, *args, **kwargs)
