"""The machine's matmul peak for ``bench_grpo_vs_trl.py``: best square ``torch.matmul`` FLOP/s per dtype (fp32,
bf16) and thread count on the CPU, or on the GPU, and the CPU's model name for the report."""

from __future__ import annotations

import platform
import time
from typing import Any


def matmul_peak(sizes: list[int], threads: list[int], seconds: float, device: str = "cpu") -> dict[str, Any]:
    """Best square-matmul FLOP/s per dtype: per thread count on the CPU (keys ``fp32_threads1``...), or on the
    GPU (keys ``fp32_cuda``, ``bf16_cuda``; ``threads`` ignored). On the CPU a size whose single matmul would
    outlast ``seconds`` at the best rate so far is skipped, and a size is sampled once when one sample does."""
    import torch

    results: dict[str, Any] = {}
    if device == "cuda":
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            per_size = {}
            for n in sizes:
                a, b = torch.randn(n, n, dtype=dtype, device="cuda"), torch.randn(n, n, dtype=dtype, device="cuda")
                torch.matmul(a, b)
                torch.cuda.synchronize()
                samples = []
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline or len(samples) < 3:
                    start = time.perf_counter()
                    torch.matmul(a, b)
                    torch.cuda.synchronize()
                    samples.append(time.perf_counter() - start)
                per_size[str(n)] = 2 * n**3 / min(samples)
            results[f"{dtype_name}_cuda"] = {"best_flops": max(per_size.values()), "per_size": per_size}
        return results
    old = torch.get_num_threads()
    for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for t in threads:
            torch.set_num_threads(t)
            best = 0.0
            per_size = {}
            for n in sizes:
                if per_size and 2 * n**3 / max(per_size.values()) > seconds:
                    break  # one matmul of this size would outlast the budget (emulated bf16: 100x slower)
                a = torch.randn(n, n, dtype=dtype)
                b = torch.randn(n, n, dtype=dtype)
                torch.matmul(a, b)  # warm up
                samples = []
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline or (len(samples) < 3 and max(samples, default=0) < seconds):
                    start = time.perf_counter()
                    torch.matmul(a, b)
                    samples.append(time.perf_counter() - start)
                flops = 2 * n**3 / min(samples)  # best run: the least disturbed by other load
                per_size[str(n)] = flops
                best = max(best, flops)
            results[f"{dtype_name}_threads{t}"] = {"best_flops": best, "per_size": per_size}
    torch.set_num_threads(old)
    return results


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere, "unknown" if that is empty)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
