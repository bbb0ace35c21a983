"""Weight sync, the engines' side: how the trainer's weights get into a rollout engine. Import from this
package, never from its modules.

- ``TrainerWeights`` (``weights.py``): what the trainer lends an engine for one sync; ``load_weights``,
  ``rest_rollout`` / ``wake_rollout_weights`` / ``wake_rollout`` (``sync.py``): a sync and the colocated engine's sleep, by the engine's
  declared capabilities (``engines.base.SyncsWeights`` / ``Sleeps``); ``WeightReceiver``: the in-process
  engines' copy into their model.
- vLLM's weight-transfer protocol: ``TrainerWeightSource`` / ``NamedTensorSource`` (``weight_sources.py``), our
  CPU transport ``posttrain-gloo`` (``weight_transfer.py``, ``gloo_group.py``, ``weight_sender.py``,
  ``weight_receiver.py``: ``GLOO_BACKEND``, ``register_gloo_receiver``, ``WORKER_EXTENSION``) and the colocated
  engine's sender over it (``colocated.py``: ``open_colocated_sender``).
- Remote rollout workers: ``RemoteWeightSync`` (``remote_sync.py``), each worker's ``ControlClient`` and
  ``WorkerError`` (``worker_control.py``), where a transfer group meets (``rendezvous.py``: ``free_port``), vLLM's
  NCCL sender bounded by a timeout (``nccl_sender.py``, ``collective_guard.py``).

The names of the modules that import vLLM at their top are loaded on first use (``__getattr__``), so that
importing this package (the trainer does) costs nothing where vLLM is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from posttrain.engines.weight_sync.remote_sync import RemoteWeightSync
from posttrain.engines.weight_sync.rendezvous import free_port
from posttrain.engines.weight_sync.sync import load_weights, rest_rollout, wake_rollout, wake_rollout_weights
from posttrain.engines.weight_sync.weights import TrainerWeights, WeightReceiver
from posttrain.engines.weight_sync.worker_control import ControlClient, WorkerError

if TYPE_CHECKING:
    from posttrain.engines.weight_sync.colocated import open_colocated_sender
    from posttrain.engines.weight_sync.weight_receiver import WORKER_EXTENSION, register_gloo_receiver
    from posttrain.engines.weight_sync.weight_sources import NamedTensorSource, TrainerWeightSource
    from posttrain.engines.weight_sync.weight_transfer import GLOO_BACKEND

_NEED_VLLM = {
    "GLOO_BACKEND": "weight_transfer",
    "NamedTensorSource": "weight_sources",
    "TrainerWeightSource": "weight_sources",
    "WORKER_EXTENSION": "weight_receiver",
    "open_colocated_sender": "colocated",
    "register_gloo_receiver": "weight_receiver",
}
"""The exported names whose modules import vLLM at their top, and those modules."""

__all__ = [
    "GLOO_BACKEND",
    "WORKER_EXTENSION",
    "ControlClient",
    "NamedTensorSource",
    "RemoteWeightSync",
    "TrainerWeightSource",
    "TrainerWeights",
    "WeightReceiver",
    "WorkerError",
    "free_port",
    "load_weights",
    "open_colocated_sender",
    "register_gloo_receiver",
    "rest_rollout",
    "wake_rollout",
    "wake_rollout_weights",
]


def __getattr__(name: str) -> Any:
    """The names of ``_NEED_VLLM``, their module imported (and vLLM with it) on first use."""
    module = _NEED_VLLM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
