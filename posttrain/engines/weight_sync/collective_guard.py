"""Bounding a collective that has no timeout of its own (NCCL's broadcast of a weight sync).

A raw ``ncclBroadcast`` whose peer died never returns and cannot be interrupted. Run on a thread-pool
thread, it keeps the trainer alive after the timeout raised (``concurrent.futures`` joins its threads at
interpreter exit), so the launcher never sees the failure (TRL's AsyncGRPO hung so, trl#6796; fixed in
trl#6913 the way this module does it):

- the collective (and the ZeRO-3 gathers that feed it) runs on a *daemon* thread, which never keeps the
  process alive, after ``torch.cuda.set_device(device_index)`` inside the thread (a new thread starts on
  device 0, where rank N's collectives do not belong);
- the bounded HTTP call that makes the peer join the collective (``/update_weights``) runs on a second daemon
  thread, with its own timeout, and raises when the peer refuses or fails;
- both are waited for at most ``timeout_s`` together, and the first failure of either is raised at once: when
  the time is up, or either side failed (the peer will never join, or the collective broke), ``abort`` runs (the
  communicator's ``ncclCommAbort``, which frees the stuck kernel) and ``CollectiveTimeout`` / that error is
  raised.

Only the trainer's communicator can be aborted from here. A worker whose side of the broadcast never completes
stays inside ``/update_weights`` (vLLM's receive has no timeout) with its layers on the meta device: the error
the remote sync raises says the worker must be restarted (``nccl_sender.WEDGED_WORKER``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

log = logging.getLogger("posttrain")


class CollectiveTimeout(RuntimeError):
    """A guarded collective did not finish within its timeout (its communicator was aborted)."""


def run_guarded_collective(collective: Callable[[], None], call: Callable[[], None] | None, timeout_s: float,
                           what: str, *, device_index: int | None = None,
                           abort: Callable[[], None] | None = None) -> None:
    """Run ``collective()`` and ``call()`` (if any) on two daemon threads; return when both finished within
    ``timeout_s``. The first failure of either is raised at once, without waiting for the other (a collective that
    fails fast is not reported as the call's time-out); on a time-out ``CollectiveTimeout`` naming ``what`` is
    raised. On any failure ``abort()`` runs first (best effort); a thread still running is left behind as a daemon
    (it cannot be stopped, and it does not keep the process alive)."""
    if timeout_s <= 0:
        raise ValueError(f"run_guarded_collective: timeout_s must be > 0, got {timeout_s}")
    outcomes: queue.Queue[BaseException | None] = queue.Queue()

    def run(fn: Callable[[], None], bind_device: bool) -> None:
        try:
            if bind_device and device_index is not None:
                import torch

                torch.cuda.set_device(device_index)
            fn()
        except BaseException as err:  # noqa: BLE001 (handed to the waiting thread, which raises it)
            outcomes.put(err)
        else:
            outcomes.put(None)

    parts = [(collective, True, f"posttrain-collective: {what}")]
    if call is not None:
        parts.append((call, False, f"posttrain-collective-call: {what}"))
    deadline = time.monotonic() + timeout_s
    for fn, bind_device, name in parts:
        threading.Thread(target=run, args=(fn, bind_device), name=name, daemon=True).start()
    for _ in parts:
        try:
            failure = outcomes.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            _abort(abort, what)
            raise CollectiveTimeout(f"{what} did not finish within {timeout_s:.0f} s"
                                    + ("; its communicator was aborted" if abort is not None else "")) from None
        if failure is not None:
            _abort(abort, what)
            raise failure


def _abort(abort: Callable[[], None] | None, what: str) -> None:
    if abort is None:
        return
    try:
        abort()
    except (RuntimeError, OSError) as err:  # the original failure is the one raised; this one is logged beside it
        log.warning("aborting the communicator of %s failed: %s: %s", what, type(err).__name__, err)
