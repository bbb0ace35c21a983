"""The engine side of a weight sync: load the trainer's weights into an engine, and the colocated engine's
sleep / wake around training.

Engines that speak vLLM's weight-transfer protocol (``sync_from``: the colocated and remote vLLM engines)
take the ``TrainerWeights`` whole and pull them a decoder layer at a time; the in-process engines (HF,
diffusion) take its named tensors one at a time (``update_weights``). Gathering the tensors (ZeRO-3) and
merging PEFT adapters is the trainer's side (``posttrain.weight_sync``).
"""

from __future__ import annotations

from typing import Any

from posttrain.engines.weights import TrainerWeights


def load_weights(engine: Any, weights: TrainerWeights, version: int) -> None:
    """Load ``weights`` (the trainer's state after step ``version``) into ``engine``; under ZeRO-3 every
    training rank calls it together (iterating ``weights`` runs the gathers)."""
    if hasattr(engine, "sync_from"):
        engine.sync_from(weights, version=version)
    else:
        engine.update_weights(weights.named_tensors())


def rest_rollout(rollout: Any) -> None:
    """Let a colocated engine free its accelerator memory while the trainer trains (``sleep`` where the
    engine has one; vLLM's sleeps only when its spec allows it, and is a no-op on CPU)."""
    if hasattr(rollout, "sleep"):
        rollout.sleep()


def wake_rollout(rollout: Any) -> None:
    """Undo ``rest_rollout`` before the engine is synced or used."""
    if hasattr(rollout, "wake_up"):
        rollout.wake_up()
