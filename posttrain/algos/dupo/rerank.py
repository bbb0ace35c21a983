"""DuPO's training-free reranking (She et al. 2025, arXiv 2508.14460, section 4, Table 4): sample N solutions,
score each distinct final answer by its backward accuracy, return the best (``sample_solutions``,
``score_answers``, ``rerank_choice``).

For each question: N primal samples; every distinct final answer is put into every dual question of the
problem (``posttrain.tasks.dual_questions``), the dual is sampled K times (the paper: K = 8), and the answer's score is
the fraction of all its dual answers that recover the hidden number. The chosen solution is the first sample
stating the best-scoring answer. Ties, which the paper does not address, go to the answer more samples agree
on (then to the earlier one). A question whose problem has no usable number, or whose samples state no
answer, cannot be scored: its first sample is kept and the question is counted as ``unscored``.

Only the engine protocol is used (``generate`` + ``tokenizer``), so any engine works. Gold answers are never
used to choose; ``summarise`` uses them afterwards to report accuracies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from posttrain.algos.core import pass_at_k
from posttrain.algos.dupo.dual import final_answer
from posttrain.algos.dupo.dual_solve import DualJob, backward_accuracy, dual_distances
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.base import Example, Task
from posttrain.tasks.dual_questions import masked_problems
from posttrain.tasks.prompts import encode_prompts


@dataclass(frozen=True)
class RerankChoice:
    """One question's samples, the score of each distinct answer and the chosen sample."""

    samples: list[str]
    scores: dict[str, float]
    chosen: int
    scored: bool


def choose(answers: list[str | None], scores: dict[str, float]) -> int:
    """Index of the first sample stating the best answer: highest score, then most samples, then earliest."""
    counts = Counter(a for a in answers if a is not None)
    first = {a: answers.index(a) for a in counts}
    best = max(scores, key=lambda a: (scores[a], counts[a], -first[a]))
    return first[best]


def sample_solutions(engine: GenerationEngine, examples: list[Example], n: int, params: SamplingParams,
                     system_prompt: str | None = None, max_prompt_tokens: int = 1024) -> list[list[str]]:
    """``n`` sampled solutions per example (one ``generate`` call)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    prompt_ids = encode_prompts(engine.tokenizer, examples, system_prompt, max_prompt_tokens)
    texts = engine.generate([ids for ids in prompt_ids for _ in range(n)], params).texts
    return [texts[i * n : (i + 1) * n] for i in range(len(examples))]


def score_answers(engine: GenerationEngine, examples: list[Example], samples: list[list[str]], k: int,
                  dual_params: SamplingParams, max_questions: int, system_prompt: str | None = None,
                  max_prompt_tokens: int = 1024) -> list[dict[str, float] | None]:
    """Backward accuracy of every distinct final answer of each example's samples, over all the problem's
    dual questions and ``k`` dual samples each; None where the problem has no usable number or no sample
    states an answer (one ``generate`` call for all dual questions)."""
    if len(samples) != len(examples):
        raise ValueError(f"{len(examples)} examples but samples for {len(samples)}")
    plans, jobs = [], []
    for example, solutions in zip(examples, samples):
        distinct = sorted({a for a in map(final_answer, solutions) if a is not None})
        masked = masked_problems(example.prompt, max_questions)
        plans.append((distinct, len(masked), len(jobs)))
        jobs += [DualJob(m, a) for m in masked for a in distinct]
    distances = dual_distances(engine, jobs, k, dual_params, system_prompt, max_prompt_tokens)
    scores: list[dict[str, float] | None] = []
    for distinct, questions, first in plans:
        if not questions or not distinct:
            scores.append(None)
            continue
        scores.append({a: backward_accuracy([d for q in range(questions) for d in distances[first + q * len(distinct) + j]])
                       for j, a in enumerate(distinct)})
    return scores


def rerank_choice(samples: list[str], scores: dict[str, float] | None, n: int) -> RerankChoice:
    """DuPO's pick among the first ``n`` samples (the first sample when the question could not be scored)."""
    head = samples[:n]
    answers = [final_answer(s) for s in head]
    if scores is None or all(a is None for a in answers):
        return RerankChoice(head, {}, chosen=0, scored=False)
    own = {a: scores[a] for a in answers if a is not None}
    return RerankChoice(head, own, chosen=choose(answers, own), scored=True)


def majority(answers: list[str | None]) -> int:
    """Index of the first sample stating the most common answer (the first sample if none states one)."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return 0
    top = max(counts.values())
    return next(i for i, a in enumerate(answers) if a is not None and counts[a] == top)


def summarise(task: Task, examples: list[Example], choices: list[RerankChoice]) -> dict[str, float]:
    """Accuracies against the gold answers: one sample (the mean over all samples), majority vote, DuPO's
    rerank, pass@N (an oracle's choice), and the fraction of questions that could not be scored."""
    if len(examples) != len(choices) or not choices:
        raise ValueError(f"{len(examples)} examples but {len(choices)} rerank choices")
    single = rerank_hits = vote = oracle = 0.0
    for example, choice in zip(examples, choices):
        correct = [task.is_correct(s, example) for s in choice.samples]
        single += sum(correct) / len(correct)
        rerank_hits += correct[choice.chosen]
        vote += correct[majority([final_answer(s) for s in choice.samples])]
        oracle += pass_at_k(len(correct), sum(correct), len(correct))
    total = len(choices)
    return {"single_sample_accuracy": single / total, "majority_accuracy": vote / total,
            "rerank_accuracy": rerank_hits / total, "pass_at_n": oracle / total,
            "unscored_fraction": sum(not c.scored for c in choices) / total, "questions": float(total)}
