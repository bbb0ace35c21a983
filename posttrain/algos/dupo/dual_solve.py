"""Ask a generation engine DuPO's dual questions and measure what it recovers (training and reranking).

Only the engine protocol is used (``generate(prompt_ids, SamplingParams) -> Rollouts`` and its ``tokenizer``),
so the dual solver may be our HF engine, vLLM or the OpenAI-compatible HTTP client. Dual questions are
rendered through the tokenizer's chat template like any prompt (``posttrain.tasks.prompts.encode_prompts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from posttrain.algos.dupo.dual import equality_distance
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.base import Example
from posttrain.tasks.dual_questions import MaskedProblem, dual_prompt
from posttrain.tasks.prompts import encode_prompts


@dataclass(frozen=True)
class DualJob:
    """One dual question: a masked problem completed with one candidate answer."""

    masked: MaskedProblem
    answer: str


def dual_distances(engine: GenerationEngine, jobs: Sequence[DualJob], samples: int, params: SamplingParams,
                   system_prompt: str | None, max_prompt_tokens: int) -> list[list[float]]:
    """For each job, the variable-equality distance of each of its ``samples`` dual answers (0 = recovered).

    All jobs go to the engine in one ``generate`` call (``samples`` copies of each prompt, in job order)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if not jobs:
        return []
    questions = [Example(prompt=dual_prompt(job.masked, job.answer), answer="") for job in jobs]
    prompt_ids = encode_prompts(engine.tokenizer, questions, system_prompt, max_prompt_tokens)
    rollouts = engine.generate([ids for ids in prompt_ids for _ in range(samples)], params)
    texts = rollouts.texts
    return [[equality_distance(texts[i * samples + k], job.masked.hidden) for k in range(samples)]
            for i, job in enumerate(jobs)]


def backward_accuracy(distances: Sequence[float]) -> float:
    """The fraction of dual answers that recovered the hidden value (distance 0)."""
    if not distances:
        raise ValueError("backward accuracy of no dual answers is undefined")
    return sum(d == 0.0 for d in distances) / len(distances)
