"""Rollout engines by name (``--rollout hf``); each factory imports its backend only when built, so
GPU-only engines (vLLM) cost nothing where their libraries are missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.registry import Registry
from posttrain.rollout.base import RolloutEngine

ROLLOUT_ENGINES: Registry[Callable[..., RolloutEngine]] = Registry("rollout engine")


@ROLLOUT_ENGINES.register("hf")
def _hf(**kwargs: Any) -> RolloutEngine:
    """Our KV-cached decoding loop over a Hugging Face causal LM (CPU or GPU)."""
    from posttrain.rollout.hf import HFRolloutEngine

    return HFRolloutEngine(**kwargs)


@ROLLOUT_ENGINES.register("diffusion")
def _diffusion(**kwargs: Any) -> RolloutEngine:
    """The masked-diffusion sampler (semi-autoregressive blocks, low-confidence remasking)."""
    from posttrain.rollout.diffusion import DiffusionRolloutEngine

    return DiffusionRolloutEngine(**kwargs)


def build_rollout_engine(name: str, **kwargs: Any) -> RolloutEngine:
    """Build the engine registered as ``name``; unknown names fail listing the known ones."""
    return ROLLOUT_ENGINES.get(name)(**kwargs)


def engine_options(config: Any) -> dict[str, Any]:
    """Engine-specific constructor arguments taken from a ``TrainConfig`` (the diffusion sampler's schedule)."""
    if config.rollout != "diffusion":
        return {}
    from posttrain.rollout.diffusion import DiffusionSampling

    return {"sampling": DiffusionSampling(block_length=config.block_length, steps=config.diffusion_steps or None,
                                          remasking=config.remasking)}
