"""The engine side of a weight sync: load the trainer's weights into an engine, and the colocated engine's
sleep / wake around training, by the capabilities the engine declares (``engines.base``).

Engines that speak vLLM's weight-transfer protocol (``SyncsWeights``: the colocated and remote vLLM engines)
take the ``TrainerWeights`` whole and pull them a decoder layer at a time; the in-process engines (HF,
diffusion) take its named tensors one at a time (``update_weights``). Gathering the tensors (ZeRO-3) and
merging PEFT adapters is the trainer's side (``posttrain.weight_sync``).
"""

from __future__ import annotations

from posttrain.engines.base import GenerationEngine, RolloutEngine, Sleeps, SyncsWeights
from posttrain.engines.weight_sync.weights import TrainerWeights


def load_weights(engine: RolloutEngine, weights: TrainerWeights, version: int) -> None:
    """Load ``weights`` (the trainer's state after step ``version``) into ``engine``; under ZeRO-3 every
    training rank calls it together (iterating ``weights`` runs the gathers)."""
    if isinstance(engine, SyncsWeights):
        engine.sync_from(weights, version=version)
    else:
        engine.update_weights(weights.named_tensors())


def rest_rollout(rollout: GenerationEngine) -> None:
    """Let a colocated engine free its accelerator memory while the trainer trains (where it ``Sleeps``;
    vLLM's sleeps only when its spec allows it, and is a no-op on CPU)."""
    if isinstance(rollout, Sleeps):
        rollout.sleep()


def wake_rollout(rollout: GenerationEngine) -> None:
    """Undo ``rest_rollout`` before the engine is synced or used."""
    if isinstance(rollout, Sleeps):
        rollout.wake_up()
