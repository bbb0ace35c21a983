"""DuPO's dual reward of one step's rollouts (She et al. 2025, arXiv 2508.14460, section 3).

For each group of G completions of one problem x:

1. the problem's dual questions are built (``DualSettings.masker``: ``posttrain.tasks.dual_questions.masked_problems``,
   one per numeric candidate, or the task's own; at most ``max_questions``); a problem without a usable number gets no reward (None: masked
   out of the loss) and is counted in ``no_number``;
2. every distinct final answer y of the group is put into every dual question, and the dual solver answers
   each K times: the distance d(x_u, x̂_u) of each dual answer is variable equality (``posttrain.algos.dupo.dual``);
3. unknown-component selection (``selection``): ``online`` keeps a dual question only if it is answerable
   and unique over the group's distinct answers (``selection.select_unknown``); ``offline`` keeps the
   questions the paper's per-problem selection kept once, before the problem's first reward
   (``offline_selection``), whatever the group answers; ``none`` keeps all. A group with no kept question
   gets no reward and is counted in ``filtered``;
4. a completion's reward is the mean, over the kept questions and the K dual answers, of exp(-lambda * d);
   a completion that states no answer gets exp(-lambda), the reward of a failed recovery.

The paper selects dual questions once per problem, offline, with a pool sampled from an auxiliary model
(``offline``). ``online`` (the default, see ``DuPOConfig.dual_selection``) is our variant: the pool is the
group of G rollouts itself, so the filter costs no extra primal samples and follows the policy as it
changes, but it can only drop a question when several of the group's answers recover the number. The
function is handed prompts and completions only: it never sees the dataset's answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from posttrain.algos.dupo.dual import dual_reward, final_answer
from posttrain.algos.dupo.dual_solve import DualJob, backward_accuracy, dual_distances
from posttrain.algos.dupo.selection import select_unknown
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.dual_questions import DualMasker, masked_problems

SELECTIONS = ("online", "offline", "none")
"""Unknown-component selection: over each group's answers, once per problem beforehand, or none."""


@dataclass(frozen=True)
class DualSettings:
    """How the dual reward is computed (``DuPOConfig`` fields of the same meaning)."""

    max_questions: int
    samples: int
    lam: float
    selection: str
    """``online``, ``offline`` or ``none`` (``SELECTIONS``)."""
    params: SamplingParams
    system_prompt: str | None
    max_prompt_tokens: int
    masker: DualMasker = masked_problems
    """Builds a prompt's dual questions (a task's own, e.g. multistep-word's, which hides its story's numbers)."""
    stated_answer: Callable[[str], str | None] = final_answer
    """The answer a primal completion states (a task's own reading, e.g. multistep-word's ``Answer:`` line)."""


@dataclass
class DualStats:
    """Counts of one reward call, logged as ``dupo/*`` metrics."""

    groups: int = 0
    no_number: int = 0
    filtered: int = 0
    questions: int = 0
    kept: int = 0
    completions: int = 0
    no_answer: int = 0
    dual_answers: int = 0
    recovered: int = 0
    distance: float = 0.0
    """Sum of the dual answers' distances."""
    recovery: list[float | None] = field(default_factory=list)
    """Per completion, in order: its answer's backward accuracy over every dual question asked of it, before
    selection (None: no answer, no usable number, or no question asked). ``DuPO.score`` splits it by the
    verifier's verdict, for monitoring only (``answer_split``)."""

    def metrics(self) -> dict[str, float]:
        """Pass rate of the selection (kept / built questions), filtered and answerless fractions, dual accuracy
        (the fraction of dual answers at distance 0) and the mean dual distance."""
        return {
            "dupo/selection_pass_rate": self.kept / max(1, self.questions),
            "dupo/filtered_fraction": (self.filtered + self.no_number) / max(1, self.groups),
            "dupo/no_number_fraction": self.no_number / max(1, self.groups),
            "dupo/no_answer_fraction": self.no_answer / max(1, self.completions),
            "dupo/dual_accuracy": self.recovered / max(1, self.dual_answers),
            "dupo/dual_distance": self.distance / max(1, self.dual_answers),
            "dupo/dual_questions_per_problem": self.questions / max(1, self.groups - self.no_number),
        }

    def answer_split(self, correct: Sequence[bool]) -> dict[str, float]:
        """The mean ``recovery`` of the completions the task's verifier calls right, and of those it calls wrong
        (0.0 where there are none): with the answers known, whether the dual solver still recovers the hidden
        number from a right answer (its competence) and how often a wrong one fools it. A monitoring metric
        like ``train/accuracy``: the reward never sees it."""
        if len(correct) != len(self.recovery):
            raise ValueError(f"{len(correct)} verdicts for {len(self.recovery)} completions' recoveries")
        right = [r for r, ok in zip(self.recovery, correct, strict=True) if ok and r is not None]
        wrong = [r for r, ok in zip(self.recovery, correct, strict=True) if not ok and r is not None]
        return {"dupo/dual_accuracy_right_answers": sum(right) / max(1, len(right)),
                "dupo/dual_accuracy_wrong_answers": sum(wrong) / max(1, len(wrong))}


def prompt_groups(prompts: Sequence[str], completions: Sequence[str], group_size: int) -> list[tuple[str, list[str]]]:
    if len(prompts) != len(completions) or len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts and {len(completions)} completions must be equal in number and "
                         f"divide into groups of {group_size}")
    groups = []
    for start in range(0, len(prompts), group_size):
        prompt = prompts[start]
        if any(p != prompt for p in prompts[start : start + group_size]):
            raise ValueError(f"prompts {start}..{start + group_size - 1} must be one group of copies of one prompt")
        groups.append((prompt, list(completions[start : start + group_size])))
    return groups


def group_dual_rewards(prompts: Sequence[str], completions: Sequence[str], group_size: int,
                       engine: GenerationEngine, settings: DualSettings,
                       kept_offline: Mapping[str, Sequence[int]] | None = None) -> tuple[list[float | None], DualStats]:
    """Dual rewards of ``completions`` (consecutive groups of ``group_size`` per prompt) and their counts.

    ``kept_offline`` (selection ``offline`` only, required then): per prompt, the indices of the dual questions
    the offline selection kept (``offline_selection.OfflineSelection.kept``)."""
    if (settings.selection == "offline") != (kept_offline is not None):
        raise ValueError(f"kept_offline must be given exactly when selection is 'offline' (selection "
                         f"{settings.selection!r})")
    stats = DualStats()
    plans = []
    jobs: list[DualJob] = []
    for prompt, group in prompt_groups(prompts, completions, group_size):
        answers = [settings.stated_answer(c) for c in group]
        distinct = sorted({a for a in answers if a is not None})
        masked = settings.masker(prompt, settings.max_questions)
        stats.questions += len(masked)
        has_number = bool(masked)
        if kept_offline is not None:
            masked = [masked[i] for i in kept_offline[prompt]]
        first = len(jobs)
        jobs += [DualJob(m, a) for m in masked for a in distinct]
        plans.append((answers, distinct, masked, first, has_number))
    distances = dual_distances(engine, jobs, settings.samples, settings.params, settings.system_prompt,
                               settings.max_prompt_tokens)
    failed = dual_reward(1.0, settings.lam)
    rewards: list[float | None] = []
    for answers, distinct, masked, first, has_number in plans:
        stats.groups += 1
        stats.completions += len(answers)
        stats.no_answer += sum(a is None for a in answers)
        if not has_number:
            stats.no_number += 1
            stats.recovery += [None] * len(answers)
            rewards += [None] * len(answers)
            continue
        per_question = []
        asked = [{a: distances[first + q * len(distinct) + j] for j, a in enumerate(distinct)}
                 for q in range(len(masked))]
        stats.recovery += [None if a is None or not asked else
                           sum(backward_accuracy(rows[a]) for rows in asked) / len(asked) for a in answers]
        for rows in asked:
            stats.dual_answers += sum(len(r) for r in rows.values())
            stats.recovered += sum(d == 0.0 for r in rows.values() for d in r)
            stats.distance += sum(d for r in rows.values() for d in r)
            online_drop = settings.selection == "online" and not select_unknown(
                {a: backward_accuracy(r) for a, r in rows.items()}).kept
            if rows and not online_drop:
                per_question.append({a: sum(dual_reward(d, settings.lam) for d in r) / len(r) for a, r in rows.items()})
        stats.kept += len(per_question)
        if not per_question:
            stats.filtered += 1
            rewards += [None] * len(answers)
            continue
        rewards += [failed if a is None else sum(q[a] for q in per_question) / len(per_question) for a in answers]
    return rewards, stats
