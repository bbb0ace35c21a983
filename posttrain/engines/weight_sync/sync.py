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


def rest_rollout(rollout: GenerationEngine, syncs_next: bool) -> None:
    """Let a colocated engine free its accelerator memory while the trainer trains (where it ``Sleeps``;
    vLLM's sleeps only when its spec allows it, and is a no-op on CPU), its weights too when ``syncs_next`` (a
    sync loads new ones before the engine generates again)."""
    if isinstance(rollout, Sleeps):
        rollout.sleep(discard_weights=syncs_next)


def wake_rollout_weights(rollout: GenerationEngine) -> None:
    """Before a sync: wake only the engine's weights (its KV cache stays freed during the push)."""
    if isinstance(rollout, Sleeps):
        rollout.wake_weights()


def wake_rollout(rollout: GenerationEngine) -> None:
    """Undo ``rest_rollout`` (and ``wake_rollout_weights``) before the engine is used."""
    if isinstance(rollout, Sleeps):
        rollout.wake_up()
