"""The sides of ``bench_grpo_vs_trl.py`` and what every side's worker process shares: the side names (ours with
the shipped ``GRPOConfig`` defaults plus a few fields, TRL's variants), the vLLM CPU settings every vLLM side gets
alike, the core placement of the server sides, and the readings each worker reports about its own process."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from posttrain.metrics import peak_memory_mb

SIDE_OVERRIDES: dict[str, dict[str, Any]] = {
    "ours": {}, "ours-async": {"async_rollouts": True}, "ours-packed": {"padding_free": True},
    "ours-server": {"async_rollouts": True}, "ours-autocast": {"precision": "fp32", "autocast": "bf16"},
    "ours-zero1": {"zero_stage": 1},
}
"""Our sides: the shipped GRPOConfig defaults plus these fields (ours-packed: the padding-free lever on;
ours-server: async rollouts from a ``posttrain rollout-worker`` on cores of its own; ours-autocast: TRL's bf16
configuration, fp32 weights and optimizer with the forwards under bf16 autocast, and bf16 rollouts, whatever
``--precision`` says; ours-zero1: DeepSpeed's ZeRO stage 1 optimizer, whose flat fp32 master partition replaces the
per-parameter casts of its stage-0 bf16 optimizer)."""

SERVER_SIDES = ("ours-server", "trl-server")
"""Sides whose vLLM runs as a server process on ``--server_cpus`` while the trainer runs on ``--trainer_cpus``."""

SIDES = (*SIDE_OVERRIDES, "trl", "trl-vllm", "trl-server")

@dataclass(frozen=True)
class VLLMCPUSettings:
    """vLLM's CPU settings, given alike to every vLLM engine of a run (ours colocated or remote, TRL colocated or
    server). ``kv_cache_gib``: ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache; vLLM's CPU build takes its cache size
    from it, not from a GPU memory share). ``threads_bind``: ``VLLM_CPU_OMP_THREADS_BIND`` (``auto``: one thread per
    physical core among the CPUs the process may use, so a ``taskset`` placement holds; ``nobind``; or a CPU list);
    vLLM 0.30 applies it where it runs its engine in worker processes (the servers), not to an in-process engine
    (the colocated ones), whose threads are the trainer's (``--threads``). ``eager``: ``enforce_eager`` (True: no
    graph compilation, what our engine does on CPU; False: vLLM's compiled mode)."""

    kv_cache_gib: int = 1
    threads_bind: str = "auto"
    eager: bool = True

    def __post_init__(self) -> None:
        if self.kv_cache_gib < 1:
            raise ValueError(f"vllm_kv_cache_gib {self.kv_cache_gib}: must be >= 1 (GiB)")
        if not self.threads_bind.strip():
            raise ValueError("vllm_threads_bind is empty: give auto, nobind or a CPU list such as 1 or 2-3")

    def environment(self) -> dict[str, str]:
        """The environment variables vLLM's CPU build reads these settings from."""
        return {"VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib), "VLLM_CPU_OMP_THREADS_BIND": self.threads_bind}

    @classmethod
    def from_args(cls, args: Any) -> VLLMCPUSettings:
        """The settings named by the bench's flags (``--vllm_kv_cache_gib``, ``--vllm_threads_bind``,
        ``--vllm_compiled``)."""
        return cls(args.vllm_kv_cache_gib, args.vllm_threads_bind, eager=not args.vllm_compiled)

    def worker_args(self) -> list[str]:
        """The bench's flags that hand these settings to a worker subprocess (``from_args`` reads them back)."""
        return ["--vllm_kv_cache_gib", str(self.kv_cache_gib), "--vllm_threads_bind", self.threads_bind,
                *([] if self.eager else ["--vllm_compiled"])]


def parse_cpus(text: str, flag: str) -> list[int]:
    """CPU ids from a list such as ``1``, ``0,2`` or ``2-3``; a malformed or empty list fails naming ``flag``."""
    cpus: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"{flag} {text!r}: expected CPU ids such as 1, 0,2 or 2-3")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"{flag} {text!r}: range {part.strip()} runs backwards")
        cpus += [c for c in range(low, high + 1) if c not in cpus]
    return cpus


def server_placement(trainer_cpus: str, server_cpus: str, allowed: set[int]) -> tuple[list[int], list[int]]:
    """The trainer's and the vLLM server's CPUs for the server sides: two disjoint, non-empty lists of CPUs this
    process may use (``allowed``, e.g. ``os.sched_getaffinity(0)``), so generation has cores of its own."""
    trainer, server = parse_cpus(trainer_cpus, "--trainer_cpus"), parse_cpus(server_cpus, "--server_cpus")
    for flag, cpus in (("--trainer_cpus", trainer), ("--server_cpus", server)):
        if missing := sorted(set(cpus) - allowed):
            raise ValueError(f"{flag}: CPUs {missing} are not available here (available: {sorted(allowed)})")
    if shared := sorted(set(trainer) & set(server)):
        raise ValueError(f"--trainer_cpus and --server_cpus share CPUs {shared}: the server sides need them apart")
    return trainer, server


def worker_server_cpus(args: Any) -> list[int] | None:
    """In a server side's worker: the CPUs its server runs on (``--server_cpus``), or None on CUDA (no pinning:
    the server has a GPU of its own, ``--server_gpu``)."""
    return parse_cpus(args.server_cpus, "--server_cpus") if args.device == "cpu" else None


def vllm_dtype(precision: str) -> str:
    """The weight dtype a vLLM server gets for the bench's ``--precision`` (the trainer's)."""
    return {"fp32": "float32", "bf16": "bfloat16"}[precision]


def process_readings(rss_after_setup_mb: float | None) -> dict[str, Any]:
    """What every worker reports about its own process at the end of a run: its resident memory after setup
    (``rss_after_setup_mb``, read then with ``current_rss_mb``), its peak RSS and peak GPU memory, its torch
    threads."""
    import torch

    return {"rss_after_setup_mb": rss_after_setup_mb, "peak_rss_mb": peak_memory_mb("cpu"),
            "peak_gpu_mb": peak_memory_mb("cuda") if torch.cuda.is_available() else None,
            "threads": torch.get_num_threads()}


def current_rss_mb() -> float:
    """This process's resident memory now, MiB (NaN where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")
