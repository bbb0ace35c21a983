"""Bounding a collective that has no timeout of its own (NCCL's broadcast of a weight sync).

A raw ``ncclBroadcast`` whose peer died never returns and cannot be interrupted. Run on a thread-pool
thread, it keeps the trainer alive after the timeout raised (``concurrent.futures`` joins its threads at
interpreter exit), so the launcher never sees the failure (TRL's AsyncGRPO hung so, trl#6796; fixed in
trl#6913 the way this module does it):

- the collective (and the ZeRO-3 gathers that feed it) runs on a *daemon* thread, which never keeps the
  process alive, after ``torch.cuda.set_device(device_index)`` inside the thread (a new thread starts on
  device 0, where rank N's collectives do not belong);
- the bounded HTTP call that makes the peer join the collective (``/update_weights``) runs on the calling
  thread, with its own timeout, and raises when the peer refuses or fails;
- both are waited for at most ``timeout_s`` together; when the time is up, or the call failed (the peer
  will never join), ``abort`` runs (the communicator's ``ncclCommAbort``, which frees the stuck kernel)
  and ``CollectiveTimeout`` / the call's error is raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("posttrain")


class CollectiveTimeout(RuntimeError):
    """A guarded collective did not finish within its timeout (its communicator was aborted)."""


def run_guarded_collective(collective: Callable[[], None], call: Callable[[], None] | None, timeout_s: float,
                           what: str, *, device_index: int | None = None,
                           abort: Callable[[], None] | None = None) -> None:
    """Run ``collective()`` on a daemon thread and ``call()`` (if any) here; return when both finished within
    ``timeout_s``. Raises the call's or the collective's error, or ``CollectiveTimeout`` naming ``what``;
    on a timeout or a failed call ``abort()`` runs first (best effort), and the collective's thread is left
    behind as a daemon (it cannot be stopped, and it does not keep the process alive)."""
    if timeout_s <= 0:
        raise ValueError(f"run_guarded_collective: timeout_s must be > 0, got {timeout_s}")
    failure: list[BaseException] = []

    def target() -> None:
        try:
            if device_index is not None:
                import torch

                torch.cuda.set_device(device_index)
            collective()
        except BaseException as err:  # noqa: BLE001 (handed to the waiting thread, which raises it)
            failure.append(err)

    thread = threading.Thread(target=target, name=f"posttrain-collective: {what}", daemon=True)
    deadline = time.monotonic() + timeout_s
    thread.start()
    try:
        if call is not None:
            call()
    except BaseException:
        _abort(abort, what)
        raise
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        _abort(abort, what)
        raise CollectiveTimeout(f"{what} did not finish within {timeout_s:.0f} s"
                                + ("; its communicator was aborted" if abort is not None else ""))
    if failure:
        raise failure[0]


def _abort(abort: Callable[[], None] | None, what: str) -> None:
    if abort is None:
        return
    try:
        abort()
    except (RuntimeError, OSError) as err:  # the original failure is the one raised; this one is logged beside it
        log.warning("aborting the communicator of %s failed: %s: %s", what, type(err).__name__, err)
