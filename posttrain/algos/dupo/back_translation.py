"""DuPO's translation dual (She et al. 2025, arXiv 2508.14460, section 3): the reward of a translation is how
well the dual solver translates it back.

For each group of G completions of one translation prompt ("Translate English to Zed: x",
``posttrain.tasks.dual_questions.translation_request``) every distinct completion y is put into the dual question
"Translate Zed to English: y" (``back_translation_prompt``); the dual solver answers it K times and each
back-translation x̂ gets d = 1 - sentence BLEU(x̂, x) / 100 (``posttrain.algos.dupo.dual.bleu_distance``). A completion's
reward is the mean over its K back-translations of exp(-lambda * d); an empty completion gets exp(-lambda),
the reward of a failed recovery.

The unknown here is the whole source sentence, so there is no unknown-component selection (the paper selects
only for math); ``DuPOConfig`` requires ``dual_selection none`` with this dual. Deviation, as for every dual
here: the reward is exp(-lambda * (1 - BLEU/100)) rather than BLEU itself (``posttrain.algos.dupo.dual`` says why).
"""

from __future__ import annotations

from collections.abc import Sequence

from posttrain.algos.dupo.dual import bleu_distance, dual_reward
from posttrain.algos.dupo.dual_solve import backward_accuracy, solve_duals
from posttrain.algos.dupo.reward import DualSettings, DualStats, prompt_groups
from posttrain.engines.base import GenerationEngine
from posttrain.tasks.dual_questions import back_translation_prompt, translation_request


def group_back_translation_rewards(prompts: Sequence[str], completions: Sequence[str], group_size: int,
                                   engine: GenerationEngine, settings: DualSettings
                                   ) -> tuple[list[float | None], DualStats]:
    """Back-translation rewards of ``completions`` (consecutive groups of ``group_size`` per prompt) and their
    counts; a prompt that is not a translation request raises ``ValueError`` naming it."""
    if settings.selection != "none":
        raise ValueError(f"the translation dual has no unknown-component selection: selection must be 'none', "
                         f"got {settings.selection!r}")
    stats = DualStats()
    plans = []
    questions: list[str] = []
    sources: list[str] = []
    for prompt, group in prompt_groups(prompts, completions, group_size):
        request = translation_request(prompt)
        texts = [c.strip() for c in group]
        distinct = sorted({t for t in texts if t})
        plans.append((texts, {t: len(questions) + j for j, t in enumerate(distinct)}))
        questions += [back_translation_prompt(request, t) for t in distinct]
        sources += [request.text] * len(distinct)
    distances = solve_duals(engine, questions, sources, bleu_distance, settings.samples, settings.params,
                            settings.system_prompt, settings.max_prompt_tokens)
    failed = dual_reward(1.0, settings.lam)
    rewards: list[float | None] = []
    for texts, row_of in plans:
        stats.groups += 1
        stats.completions += len(texts)
        stats.questions += 1
        stats.kept += 1
        stats.no_answer += sum(not t for t in texts)
        for row in row_of.values():
            stats.dual_answers += len(distances[row])
            stats.recovered += sum(d == 0.0 for d in distances[row])
            stats.distance += sum(distances[row])
        stats.recovery += [backward_accuracy(distances[row_of[t]]) if t else None for t in texts]
        rewards += [sum(dual_reward(d, settings.lam) for d in distances[row_of[t]]) / settings.samples
                    if t else failed for t in texts]
    return rewards, stats
