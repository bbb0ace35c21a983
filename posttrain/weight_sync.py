"""The trainer's side of a weight sync: the one push used after optimizer steps, before evaluation and on
resume. PEFT adapters are merged into the base weights for the push and unmerged afterwards, whatever
happens in between; the parameters are lent to the engine as ``TrainerWeights``, whose gathers
(``dist.gathered_parameter_buckets``: ZeRO-3 collectives) run as the engine iterates them.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from posttrain.dist import gathered_parameter_buckets
from posttrain.engines.weight_sync import TrainerWeights, load_weights


def trainer_weights(module: torch.nn.Module, zero_stage: int) -> TrainerWeights:
    """``module``'s parameters with their full shapes (ZeRO-3's ``ds_shape``) and its bucket gatherer."""
    shapes = {name: tuple(getattr(p, "ds_shape", p.shape)) for name, p in module.named_parameters()}
    return TrainerWeights(shapes, functools.partial(gathered_parameter_buckets, module, zero_stage))


def push_weights(rollout: Any, module: torch.nn.Module, zero_stage: int, step: int) -> None:
    """Send ``module``'s current weights (the trainer's state after ``step``) into ``rollout``; every
    training rank calls it together (the gathers are collectives under ZeRO-3)."""
    merged = hasattr(module, "merge_adapter")
    if merged:
        module.merge_adapter()
    try:
        load_weights(rollout, trainer_weights(module, zero_stage), step)
    finally:
        if merged:
            module.unmerge_adapter()
