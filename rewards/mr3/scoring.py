"""From verdicts to scalar rewards, and the plan -> generate -> aggregate pipeline shared by the server,
offline evaluation and the tiny model's warm start.

Reward mapping (mR3, arXiv 2510.01146, and its evaluation code):

- binary: 1.0 for the item's good verdict, 0.0 for the other. Which verdict is good comes from the
  format or the request (``EvalItem.binary_good_verdict``), never from the word: in mR3's safety formats
  ``true`` means harmful, so ``false`` earns the reward there;
- pointwise on a numeric scale ``lo..hi``: ``(s - lo) / (hi - lo)`` (1..5 gives ``(s - 1) / 4``);
- pointwise on categories (multiple choice, options A-D): accuracy, 1.0 when the verdict is the gold
  option, else 0.0 (mR3 reports accuracy on MMMLU / INCLUDE); options are not a scale;
- pairwise: each verdict votes for the first response (1), the second (0) or neither (``Tie`` /
  ``Both Bad``: 0.5); a graded 1..7 scale (HelpSteer3, 1 = first much better, 4 = equal) votes
  ``(7 - s) / 6``, i.e. ``(1 + (4 - s)/3) / 2``. ``p_first`` is the mean vote over the original and
  the A/B-swapped prompts (cancelling position bias) and all samples; ``reward = 2 * p_first - 1``
  in ``[-1, 1]`` (positive = the first response is better).

A sample whose verdict cannot be read is left out of the mean; when none can be read the result has
``parse_ok = False`` and the *neutral* reward (pairwise 0.0 with p_first 0.5; binary 0.5; pointwise
the middle of the scale, 0.5) rather than an error, so batches stay rectangular (dropping unparsable
samples, as Text2Grad does, makes them ragged). The client can turn it into ``None`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewards.mr3.parser import Verdict, parse_verdict
from rewards.mr3.templates import EvalItem, render_prompt

NEUTRAL = {"pairwise": 0.0, "pointwise": 0.5, "binary": 0.5}


def _numeric(values: Sequence[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def verdict_reward(mode: str, score: str, values: Sequence[str], good_verdict: str | None = None,
                   gold: str | None = None) -> float:
    """The scalar for one readable score (see the module doc). For pairwise: the vote for the first.
    ``good_verdict`` (binary) and ``gold`` (categorical pointwise) are required where they apply."""
    if mode == "binary":
        if good_verdict not in values:
            raise ValueError(f"a binary verdict needs good_verdict, one of {list(values)}; got {good_verdict!r}")
        return 1.0 if score == good_verdict else 0.0
    numbers = _numeric(values)
    if mode == "pointwise":
        if numbers is None:
            if gold not in values:
                raise ValueError(f"a multiple-choice verdict needs gold, one of {list(values)}; got {gold!r}")
            return 1.0 if score == gold else 0.0
        lo, hi = min(numbers), max(numbers)
        return (float(score) - lo) / (hi - lo) if hi > lo else 1.0
    if mode == "pairwise":
        if numbers is not None:  # graded: 1 = first much better ... mid = equal ... max = second much better
            lo, hi = min(numbers), max(numbers)
            return (hi - float(score)) / (hi - lo) if hi > lo else 0.5
        return {"assistant a": 1.0, "assistant b": 0.0}.get(score.lower(), 0.5)
    raise ValueError(f"unknown mode {mode!r}")


@dataclass
class Sample:
    """One prompt to generate for an item: which item, whether A/B are swapped."""

    item_index: int
    swapped: bool
    prompt: str


@dataclass
class ScoreResult:
    """The aggregate for one item (the body of a ``/v1/rubric_score`` answer)."""

    mode: str
    score_raw: str | None  # majority readable score (original order for pairwise)
    reward: float
    parse_ok: bool
    p_first: float | None = None
    explanation: str = ""
    reasoning: str = ""
    n_parsed: int = 0
    n_samples: int = 0
    errors: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def plan_samples(items: Sequence[EvalItem], tokenizer: Any = None, style: str = "mr3", n_samples: int = 1,
                 swap_positions: bool = True, seed: int = 0) -> list[Sample]:
    """Prompts to generate: ``n_samples`` per item, doubled with the A/B swap for pairwise items."""
    samples: list[Sample] = []
    for index, item in enumerate(items):
        for _ in range(n_samples):
            samples.append(Sample(index, False, render_prompt(item, tokenizer, style, seed)))
            if item.mode == "pairwise" and swap_positions:
                samples.append(Sample(index, True, render_prompt(item.swapped(), tokenizer, style, seed)))
    return samples


def aggregate(items: Sequence[EvalItem], samples: Sequence[Sample], texts: Sequence[str],
              usage: Sequence[tuple[int, int]] | None = None, seed: int = 0) -> list[ScoreResult]:
    """Parse every generated text and fold them into one ``ScoreResult`` per item."""
    if len(samples) != len(texts):
        raise ValueError(f"{len(samples)} samples but {len(texts)} generated texts")
    per_item: list[list[tuple[Sample, Verdict]]] = [[] for _ in items]
    results: list[ScoreResult] = []
    for sample, text in zip(samples, texts):
        item = items[sample.item_index]
        per_item[sample.item_index].append((sample, parse_verdict(text, item.score_values(seed))))
    for index, item in enumerate(items):
        values = item.score_values(seed)
        votes: list[float] = []
        counts: dict[str, int] = {}
        errors: list[str] = []
        explanation = reasoning = ""
        for sample, verdict in per_item[index]:
            if not verdict.parse_ok or verdict.score is None:
                errors.append(verdict.error or "unreadable verdict")
                continue
            vote = verdict_reward(item.mode, verdict.score, values, item.binary_good_verdict(), item.gold)
            score = verdict.score
            if item.mode == "pairwise" and sample.swapped:
                vote = 1.0 - vote
                score = _swap_label(score, values)
            votes.append(vote)
            counts[score] = counts.get(score, 0) + 1
            if not explanation:
                explanation, reasoning = verdict.explanation, verdict.reasoning
        n_parsed = len(votes)
        result = ScoreResult(mode=item.mode, score_raw=None, reward=NEUTRAL[item.mode], parse_ok=n_parsed > 0,
                             n_parsed=n_parsed, n_samples=len(per_item[index]), errors=errors,
                             explanation=explanation, reasoning=reasoning)
        if n_parsed:
            mean = sum(votes) / n_parsed
            result.score_raw = max(counts, key=lambda k: (counts[k], -values.index(k) if k in values else 0))
            if item.mode == "pairwise":
                result.p_first = mean
                result.reward = 2.0 * mean - 1.0
            else:
                result.reward = mean
        elif item.mode == "pairwise":
            result.p_first = 0.5
        results.append(result)
    if usage is not None:
        for sample, (p_tok, c_tok) in zip(samples, usage):
            results[sample.item_index].usage["prompt_tokens"] += int(p_tok)
            results[sample.item_index].usage["completion_tokens"] += int(c_tok)
    return results


def _swap_label(score: str, values: Sequence[str]) -> str:
    """A verdict on the swapped prompt, expressed in the original order."""
    swap = {"assistant a": "Assistant B", "assistant b": "Assistant A"}
    if score.lower() in swap:
        return swap[score.lower()]
    numbers = _numeric(values)
    if numbers is not None:
        lo, hi = min(numbers), max(numbers)
        mirrored = lo + hi - float(score)
        text = str(int(mirrored)) if mirrored.is_integer() else str(mirrored)
        return text if text in values else score
    return score


GenerateFn = Callable[[list[str]], list[str]]


def score_items(items: Sequence[EvalItem], generate: GenerateFn, tokenizer: Any = None, style: str = "mr3",
                n_samples: int = 1, swap_positions: bool = True, seed: int = 0) -> list[ScoreResult]:
    """Synchronous convenience: plan, call ``generate(prompts) -> texts`` once, aggregate."""
    samples = plan_samples(items, tokenizer, style, n_samples, swap_positions, seed)
    texts = generate([s.prompt for s in samples]) if samples else []
    return aggregate(items, samples, texts, seed=seed)


class PairwiseJudge:
    """TRL's ``BasePairwiseJudge`` shape: ``judge(prompts, completions, shuffle_order) -> list[int]``
    (index of the preferred completion, -1 when no verdict could be read). Usable with Online DPO / XPO
    / Nash-MD without importing trl here."""

    def __init__(self, generate: GenerateFn, tokenizer: Any = None, style: str = "mr3",
                 rubric: dict[str, str] | None = None) -> None:
        self.generate, self.tokenizer, self.style, self.rubric = generate, tokenizer, style, rubric

    def judge(self, prompts: list[str], completions: list[list[str]], shuffle_order: bool = True) -> list[int]:
        items = [EvalItem("pairwise", p, list(pair), rubric=self.rubric) for p, pair in zip(prompts, completions)]
        results = score_items(items, self.generate, self.tokenizer, self.style, swap_positions=shuffle_order)
        return [-1 if not r.parse_ok or r.p_first is None else (0 if r.p_first >= 0.5 else 1) for r in results]
