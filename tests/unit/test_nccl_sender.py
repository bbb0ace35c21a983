"""``NCCLSender.send_weights`` with stand-ins for vLLM's trainer engine and the worker's control routes (NCCL needs
CUDA; scripts/gpu_checks.sh runs the real path): a broadcast that fails fast is reported at once, as a
``WorkerError`` naming the worker and saying it must be restarted, with the communicator aborted."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import torch

from posttrain.engines.weight_sync.nccl_sender import WEDGED_WORKER, NCCLSender
from posttrain.engines.weight_sync.worker_control import WorkerError


class BrokenEngine:
    """A sender whose broadcast fails at once (the peer died); records its shutdown."""

    is_sender = True
    model_update_group = None

    def __init__(self) -> None:
        self.shut = False

    def _broadcast(self, source: object, meta: object) -> None:
        raise RuntimeError("NCCL error: remote process exited")

    def _post_send_sync(self) -> None:
        raise AssertionError("not reached")

    def shutdown(self) -> None:
        self.shut = True


class SlowControl:
    """The worker's routes: ``/update_weights`` would answer only after its long HTTP time-out."""

    url = "http://127.0.0.1:8100"

    def __init__(self) -> None:
        self.released = threading.Event()
        self.finished = False

    def start_weight_update(self) -> None:
        pass

    def update_weights(self, info: dict) -> None:
        self.released.wait()

    def finish_weight_update(self, version: str) -> None:
        self.finished = True


def test_a_failed_broadcast_names_the_worker_and_says_to_restart_it() -> None:
    engine, control = BrokenEngine(), SlowControl()
    source = SimpleNamespace(metadata=lambda: [SimpleNamespace(name="w", dtype=torch.float32, shape=(2, 2))])
    start = time.monotonic()
    with pytest.raises(WorkerError, match="remote process exited") as err:
        NCCLSender(engine, control, timeout_s=600.0, device_index=None).send_weights(source, weight_version=3)
    assert time.monotonic() - start < 60
    assert control.url in str(err.value) and WEDGED_WORKER in str(err.value)
    assert engine.shut and not control.finished  # communicator aborted, the update never marked finished
    control.released.set()
