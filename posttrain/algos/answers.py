"""How a clipped policy-gradient algorithm answers its prompts: the component that ``ClippedPolicyGradient``
(GRPO, PPO and the algorithms built on them) holds as ``answers``.

An ``Answers`` object says which roles the answering needs besides the algorithm's own, how it changes the
rollout's sampling settings, which engine answers (in training and evaluation), and how one training step's experience is
made from the algorithm's ``generation_request`` and ``experience_from_rollouts``. ``PolicyAnswers`` (one
generation call on the policy's engine) is the default; Prefix-RL's ``PrefixAnswers`` (the adapter's prefix,
then the frozen target's continuation) is the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from posttrain.algos.roles import ModelRole
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.base import Example

if TYPE_CHECKING:
    from posttrain.algos.base import Experience
    from posttrain.algos.pg import ClippedPolicyGradient


class Answers(Protocol):
    """The answering component of a ``ClippedPolicyGradient``, built from the run's config and ``AlgoContext``."""

    def roles(self) -> tuple[ModelRole, ...]:
        """The roles the answering needs besides the algorithm's own (Prefix-RL's frozen target)."""

    def sampling_params(self, params: SamplingParams) -> SamplingParams:
        """The rollout's sampling settings, given the config's (``params``)."""

    def answer_engine(self) -> GenerationEngine:
        """What answers a prompt, in training and in held-out evaluation."""

    def experience(self, algo: ClippedPolicyGradient, examples: list[Example], policy: torch.nn.Module,
                   step: int) -> tuple[Experience, dict[str, float]]:
        """``algo``'s experience of training step ``step``, with its metrics."""


class PolicyAnswers:
    """The default: one generation call on the policy's engine per step (``generation_request``, then
    ``experience_from_rollouts``: the split ``--async_rollouts`` runs ahead)."""

    def __init__(self, config: Any, ctx: Any) -> None:
        self.ctx = ctx

    def roles(self) -> tuple[ModelRole, ...]:
        return ()

    def sampling_params(self, params: SamplingParams) -> SamplingParams:
        return params

    def answer_engine(self) -> GenerationEngine:
        return self.ctx.rollout

    def experience(self, algo: ClippedPolicyGradient, examples: list[Example], policy: torch.nn.Module,
                   step: int) -> tuple[Experience, dict[str, float]]:
        request = algo.generation_request(examples, step)
        with self.ctx.timer.phase("generate"):
            rollouts = self.answer_engine().generate(request.prompt_ids, request.params)
        return algo.experience_from_rollouts(examples, rollouts, policy, staleness=0, step=step)
