"""The RolloutEngine contract shared by the HF, diffusion, vLLM and HTTP engines."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions. Sampling log-probs are those of the *processed* distribution
    (after temperature, top-k and top-p), which is what the importance ratio needs."""

    max_new_tokens: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()  # besides the tokenizer's eos

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")


@dataclass
class Rollouts:
    """One completion per input prompt, in input order."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # includes the eos token when generation stopped on it
    texts: list[str]  # decoded completions, special tokens removed
    logprobs: list[list[float]]  # per completion token, under the sampling distribution
    finish_reasons: list[str] = field(default_factory=list)  # "stop" or "length"
    weight_version: int = 0  # the engine's weight version that produced these completions

    def __len__(self) -> int:
        return len(self.completion_ids)


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates completions for tokenised prompts and receives new policy weights."""

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts: ...

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None: ...


def start_generation(prompt_ids: list[list[int]], params: SamplingParams, device: torch.device | str) -> torch.Generator:
    """Checks shared by every engine's ``generate`` (no empty prompt) and its sampling generator:
    seeded from ``params.seed``, or freshly seeded when there is none (global RNG never touched)."""
    for i, prompt in enumerate(prompt_ids):
        if len(prompt) == 0:
            raise ValueError(f"prompt {i} is empty; every prompt needs at least one token")
    generator = torch.Generator(device=device)
    if params.seed is None:
        generator.seed()
    else:
        generator.manual_seed(params.seed)
    return generator
