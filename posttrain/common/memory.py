"""Keep a long run's resident memory flat: fixed glibc malloc thresholds.

glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), so after the first weight sync
every per-layer buffer of 1-32 MiB (a gathered bucket, a received tensor, a dtype-cast copy) comes from the
heap instead of its own mapping, and the heap does not shrink back: the trainer's resident memory then grows
step after step. Fixing the thresholds has the same effect as ``MALLOC_MMAP_THRESHOLD_=1048576
MALLOC_TRIM_THRESHOLD_=0`` in the environment, which glibc reads only at start. The measurement (SmolLM2-135M,
the colocated vLLM engine, rounds of generate + weight sync, with and without the fix) is in
``benchmarks/smollm2.md`` ("Peak memory is flat now with vLLM"; ``benchmarks/bench_malloc_thresholds.py``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
"""Blocks of 1 MiB or more get their own mapping, returned to the system when freed."""
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES), "MALLOC_TRIM_THRESHOLD_": "0"}
"""The same thresholds for a child process (glibc reads these at its start), e.g. a rollout worker's server."""


def fix_malloc_thresholds() -> bool:
    """Fix glibc's mmap threshold at 1 MiB and its trim threshold at 0 for this process (``mallopt``); True when
    both were set, False where the C library is not glibc (nothing changed, logged at debug level)."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        log.debug("no C library found: malloc thresholds left as they are")
        return False
    libc = ctypes.CDLL(libc_name)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        log.debug("%s has no mallopt: malloc thresholds left as they are", libc_name)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, 0))
