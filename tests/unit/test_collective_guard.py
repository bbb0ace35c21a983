"""``collective_guard.run_guarded_collective`` with stand-ins for the NCCL collective (CUDA cannot run here;
scripts/gpu_checks.sh runs the real path): a stuck collective raises within the timeout, aborts its
communicator and does not keep the process alive; a failed call aborts at once; errors come through."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from posttrain.engines.weight_sync.collective_guard import CollectiveTimeout, run_guarded_collective

STUCK_SCRIPT = """
import threading
import time
from posttrain.engines.weight_sync.collective_guard import run_guarded_collective
run_guarded_collective(threading.Event().wait, lambda: None, 0.5, "a stuck broadcast")
"""


def test_a_stuck_collective_times_out_and_aborts_its_communicator() -> None:
    released, aborted = threading.Event(), []
    with pytest.raises(CollectiveTimeout, match="the broadcast did not finish within 0 s; its communicator was aborted"):
        run_guarded_collective(released.wait, lambda: None, 0.2, "the broadcast", abort=lambda: aborted.append(1))
    assert aborted == [1]
    stuck = [t for t in threading.enumerate() if t.name == "posttrain-collective: the broadcast"]
    assert len(stuck) == 1 and stuck[0].daemon  # left behind, and never joined at exit
    released.set()


def test_a_stuck_collective_does_not_keep_the_process_alive() -> None:
    """The failure the thread-pool version had (trl#6796): the error was raised, then the interpreter joined
    the stuck thread at exit forever. The script's process must end, with the error."""
    done = subprocess.run([sys.executable, "-c", STUCK_SCRIPT], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "CollectiveTimeout: a stuck broadcast did not finish" in done.stderr


def test_a_failed_call_aborts_without_waiting_for_the_collective() -> None:
    released, aborted = threading.Event(), []

    def refuse() -> None:
        raise RuntimeError("HTTP 500: update refused")

    with pytest.raises(RuntimeError, match="update refused"):
        run_guarded_collective(released.wait, refuse, 600.0, "the failed broadcast", abort=lambda: aborted.append(1))
    stuck = [t for t in threading.enumerate() if t.name == "posttrain-collective: the failed broadcast"]
    assert aborted == [1] and stuck[0].is_alive()  # raised without waiting for the collective
    released.set()


def test_the_collectives_own_error_is_raised_and_a_good_one_returns() -> None:
    def broken() -> None:
        raise ValueError("bucket 3 has the wrong shape")

    with pytest.raises(ValueError, match="bucket 3"):
        run_guarded_collective(broken, None, 30.0, "the broadcast")
    ran: list[str] = []
    run_guarded_collective(lambda: ran.append("collective"), lambda: ran.append("call"), 30.0, "the broadcast")
    assert sorted(ran) == ["call", "collective"]
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        run_guarded_collective(lambda: None, None, 0, "the broadcast")


CUDA_SCRIPT = """
import sys, threading, time, torch
from posttrain.engines.weight_sync.collective_guard import CollectiveTimeout, run_guarded_collective
device = torch.cuda.device_count() - 1  # the last device: a new thread starts on device 0
seen = []
def stuck_kernel():  # a collective whose peer never comes: a kernel that spins for minutes
    seen.append(torch.cuda.current_device())
    torch.cuda._sleep(1 << 40)
    torch.cuda.synchronize()
start = time.monotonic()
try:
    run_guarded_collective(stuck_kernel, None, 3.0, "a stuck CUDA kernel", device_index=device)
except CollectiveTimeout as err:
    print(f"raised after {time.monotonic() - start:.1f} s: {err}; thread device {seen} (asked {device})", flush=True)
    assert seen == [device]
    sys.exit(3)
"""


@pytest.mark.gpu
def test_a_stuck_cuda_kernel_on_the_guarded_thread_raises_on_its_device_and_the_process_ends() -> None:
    """On CUDA (scripts/gpu_checks.sh): the guarded thread runs on the device it was given, and a kernel
    that never finishes (a stand-in for a broadcast whose peer died) neither blocks the error nor keeps the
    process alive at exit."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    done = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr[-3000:]
    assert "thread device" in done.stdout


def test_a_collective_that_fails_fast_is_reported_at_once_not_as_the_calls_time_out() -> None:
    """The worker's /update_weights call would wait out its own (long) HTTP time-out; the collective's real
    failure must come back first, with the communicator aborted."""
    released, aborted = threading.Event(), []

    def broken() -> None:
        raise RuntimeError("NCCL error: remote process exited")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="remote process exited"):
        run_guarded_collective(broken, released.wait, 600.0, "the broadcast", abort=lambda: aborted.append(1))
    assert time.monotonic() - start < 60 and aborted == [1]
    call = [t for t in threading.enumerate() if t.name == "posttrain-collective-call: the broadcast"]
    assert len(call) == 1 and call[0].daemon  # the pending call is left behind and never joined at exit
    released.set()
