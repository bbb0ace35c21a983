"""How the trainer's weights reach its rollout engine: the one push used after optimizer steps, before
evaluation and on resume, and the colocated engine's sleep / wake around training.

Engines that speak vLLM's weight-transfer protocol (``sync_from``: the colocated and remote vLLM engines)
receive the training module itself and gather it a decoder layer at a time (ZeRO-3 included); the
in-process engines (HF, diffusion) receive ``dist.gathered_named_parameters``. PEFT adapters are merged
into the base weights for the push and unmerged afterwards, whatever happens in between.
"""

from __future__ import annotations

from typing import Any

import torch

from posttrain.dist import gathered_named_parameters


def push_weights(rollout: Any, module: torch.nn.Module, zero_stage: int, step: int) -> None:
    """Send ``module``'s current weights (the trainer's state after ``step``) into ``rollout``; every
    training rank calls it together (the gathers are collectives under ZeRO-3)."""
    merged = hasattr(module, "merge_adapter")
    if merged:
        module.merge_adapter()
    try:
        if hasattr(rollout, "sync_from"):
            rollout.sync_from(module, zero_stage, version=step)
        else:
            rollout.update_weights((n, t) for n, t in gathered_named_parameters(module, zero_stage) if "lora_" not in n)
    finally:
        if merged:
            module.unmerge_adapter()


def rest_rollout(rollout: Any) -> None:
    """Let a colocated engine free its accelerator memory while the trainer trains (``sleep`` where the
    engine has one; vLLM's is a no-op on CPU)."""
    if hasattr(rollout, "sleep"):
        rollout.sleep()


def wake_rollout(rollout: Any) -> None:
    """Undo ``rest_rollout`` before the engine is synced or used."""
    if hasattr(rollout, "wake_up"):
        rollout.wake_up()
