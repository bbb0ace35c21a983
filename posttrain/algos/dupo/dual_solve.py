"""Ask a generation engine DuPO's dual questions and measure what it recovers (training and reranking).

Only the engine protocol is used (``generate(prompt_ids, SamplingParams) -> Rollouts`` and its ``tokenizer``),
so the dual solver may be our HF engine, vLLM or the OpenAI-compatible HTTP client. Dual questions are
rendered through the tokenizer's chat template like any prompt (``posttrain.tasks.prompts.encode_prompts``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    return solve_duals(engine, [dual_prompt(job.masked, job.answer) for job in jobs],
                       [job.masked.hidden for job in jobs], equality_distance, samples, params, system_prompt,
                       max_prompt_tokens)


def solve_duals(engine: GenerationEngine, questions: Sequence[str], hidden: Sequence[str],
                distance: Callable[[str, str], float], samples: int, params: SamplingParams,
                system_prompt: str | None, max_prompt_tokens: int) -> list[list[float]]:
    """For each dual question, ``distance(dual answer, hidden value)`` of each of its ``samples`` answers.

    All questions go to the engine in one ``generate`` call (``samples`` copies of each, in order)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if len(questions) != len(hidden):
        raise ValueError(f"{len(questions)} dual questions but {len(hidden)} hidden values")
    if not questions:
        return []
    examples = [Example(prompt=question, answer="") for question in questions]
    prompt_ids = encode_prompts(engine.tokenizer, examples, system_prompt, max_prompt_tokens)
    texts = engine.generate([ids for ids in prompt_ids for _ in range(samples)], params).texts
    return [[distance(texts[i * samples + k], value) for k in range(samples)] for i, value in enumerate(hidden)]


def backward_accuracy(distances: Sequence[float]) -> float:
    """The fraction of dual answers that recovered the hidden value (distance 0)."""
    if not distances:
        raise ValueError("backward accuracy of no dual answers is undefined")
    return sum(d == 0.0 for d in distances) / len(distances)
