"""vLLM's ``nccl`` transport on the trainer side of a remote worker's sync (CUDA): ``NCCLSender``, vLLM's
trainer-side NCCL engine with every collective bounded (``collective_guard``).

vLLM's own ``send_weights`` cannot be bounded: it runs the broadcast on the calling thread (a peer that died
leaves it stuck in an uninterruptible ``ncclBroadcast``) and the worker's ``/update_weights`` call on a pool
thread that interpreter exit joins, the hang of trl#6796, and it finishes the update without a weight version.
So ``send_weights`` here drives the round trip itself: the broadcast on a daemon thread on this rank's device,
the worker's ``/update_weights`` on the calling thread, the communicator aborted on a timeout.
"""

from __future__ import annotations

import dataclasses

from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
from vllm.distributed.weight_transfer.nccl_engine import (
    NCCLTrainerInitInfo,
    NCCLTrainerWeightTransferEngine,
    NCCLWeightTransferUpdateInfo,
)

from posttrain.engines.weight_sync.collective_guard import run_guarded_collective
from posttrain.engines.weight_sync.worker_control import ControlClient, WorkerError

WEDGED_WORKER = ("the worker may be left inside /update_weights with its layers on the meta device (vLLM's NCCL "
                 "receive has no timeout, and only the trainer's communicator can be aborted): restart the worker "
                 "before syncing it again")
"""What a failed NCCL sync says of the worker (``collective_guard``'s module docstring)."""


class NCCLSender:
    """This trainer rank's side of one worker's NCCL transfer group, kept across syncs; open it with ``open``.
    ``device_index``: this rank's CUDA device, where the guarded collectives run."""

    def __init__(self, engine: NCCLTrainerWeightTransferEngine, control: ControlClient, timeout_s: float,
                 device_index: int | None) -> None:
        self.engine = engine
        self.control = control
        self.timeout_s = timeout_s
        self.device_index = device_index

    @classmethod
    def open(cls, info: NCCLTrainerInitInfo, control: ControlClient, source: WeightSource, timeout_s: float,
             device_index: int | None) -> NCCLSender:
        """Open the transfer group (vLLM's ``trainer_init``, bounded by ``timeout_s``); ``WorkerError`` naming
        the worker when it fails. vLLM's engine holds ``source``, which ``send_weights`` never reads."""
        opened: list[NCCLTrainerWeightTransferEngine] = []
        try:
            run_guarded_collective(lambda: opened.append(WeightTransferTrainerFactory.trainer_init(
                info, client=control, source=source)), None, timeout_s, "opening the NCCL transfer group",
                device_index=device_index)
        except Exception as err:
            raise WorkerError(control.url, f"opening the NCCL transfer group failed: {err}") from err
        return cls(opened[0], control, timeout_s, device_index)

    def send_weights(self, source: WeightSource, weight_version: int) -> None:
        """Send ``source`` as ``weight_version``: the ZeRO-3 gathers and the broadcast on a daemon thread on this
        rank's device, each gathered bucket synchronised before it is sent (``TrainerWeightSource``), the
        worker's ``/update_weights`` here, the communicator aborted on a timeout. Other ranks only join the
        gathers."""
        meta = source.metadata()
        what = f"the NCCL weight broadcast to version {weight_version}"
        if not self.engine.is_sender:
            run_guarded_collective(lambda: _broadcast(self.engine, source, meta), None, self.timeout_s, what,
                                   device_index=self.device_index)
            return
        info = NCCLWeightTransferUpdateInfo(names=[m.name for m in meta],
                                            dtype_names=[str(m.dtype).removeprefix("torch.") for m in meta],
                                            shapes=[list(m.shape) for m in meta])
        self.control.start_weight_update()
        try:
            run_guarded_collective(lambda: _broadcast(self.engine, source, meta),
                                   lambda: self.control.update_weights(dataclasses.asdict(info)), self.timeout_s,
                                   what, device_index=self.device_index, abort=self.abort)
        except Exception as err:
            raise WorkerError(self.control.url, f"{what} failed ({type(err).__name__}: {err}); {WEDGED_WORKER}") from err
        self.control.finish_weight_update(str(weight_version))

    def abort(self) -> None:
        """Abort the communicator (``ncclCommAbort``, which frees a kernel stuck in the broadcast) and drop it;
        the sender is unusable afterwards."""
        group = self.engine.model_update_group
        if group is not None:
            group.destroy()
        self.engine.shutdown()


def _broadcast(engine: NCCLTrainerWeightTransferEngine, source: WeightSource, meta: list[ParamMeta]) -> None:
    """vLLM's broadcast of ``source`` over ``engine``'s communicator (or, on the other ranks, its gathers) and
    the wait for it to land. vLLM 0.30.0 exposes no public API for these two steps outside ``send_weights``,
    which cannot be bounded (see the module docstring), so this is the one place that calls its private
    ``_broadcast`` / ``_post_send_sync``."""
    engine._broadcast(source, meta)
    engine._post_send_sync()
