"""Per-token rewards from a generative span reward model, for PPO (Text2Grad, arXiv 2505.22338).

``SpanRewardModel(engine, form, rule, sampling)`` wraps any ``posttrain.engines.base.GenerationEngine``
(the HF engine, vLLM, or ``OpenAIHTTPEngine`` against a server) holding the reward model;
``RemoteSpanRewardModel`` (``posttrain.algos.span_reward.remote``) asks ``posttrain serve``'s ``/v1/span_feedback``
instead. Both answer

    token_rewards(prompts, completion_ids, policy_tokenizer) -> SpanRewards

for one batch of policy samples: the reward model writes feedback for each (prompt, decoded completion)
(``templates.render_request`` through the reward model's chat template), ``feedback.parse_feedback``
reads it, and ``alignment.score_tokens`` turns it into one reward per completion token under the rule.

``SpanRewards`` holds, per sample, ``rewards`` (a list as long as the completion, or **None** when the
reward model's output could not be parsed: the trainer gives that sample no span reward, keeps its KL
term, and counts it; it is never a silent zero), the parsed ``feedback``, the parse ``errors``, and ``verdicts``: a scalar from the same
feedback, +1 when no poor span / wrong code / negative word score was located in the response and the
feedback does not call it incomplete, else -1
(None when unparsable), which is the baseline "PPO with the reward model's scalar verdict". Counts for
logging: ``unparsable``, ``spans_matched``, ``spans_unmatched`` and ``marked_fraction`` (the share of
completion tokens of parsed samples covered by a located span; the paper reports about 30% as the sweet
spot), also as ``metrics()``.

Deviation from the paper's code: it dropped unparsable samples from the batch (so the batch size varied
per step and all ranks had to agree on the minimum); here they stay in the batch with reward None, which
keeps shapes and ranks aligned, and the trainer still applies their KL term.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain.algos.span_reward.alignment import SpanRule, resolve_rule, score_tokens
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts
from posttrain.tasks.span_feedback import FeedbackParseError, SpanFeedback, check_form, parse_feedback
from posttrain.tasks.span_templates import STYLES, render_request

DEFAULT_SAMPLING = SamplingParams(max_new_tokens=512, temperature=0.0)
"""Greedy, up to 512 new tokens (the paper samples its reward model at temperature 0.05-0.1, 500-768 tokens)."""


@dataclass
class SpanRewards:
    """Span rewards of one batch (see the module docstring); lists are in sample order."""

    rewards: list[list[float] | None]
    feedback: list[SpanFeedback | None]
    verdicts: list[float | None]
    errors: list[str | None] = field(default_factory=list)
    unparsable: int = 0
    spans_matched: int = 0
    spans_unmatched: int = 0
    marked_fraction: float = 0.0

    def metrics(self, prefix: str = "span_rm/") -> dict[str, float]:
        """The counts as a flat dict for the metrics logger."""
        n = max(1, len(self.rewards))
        total = self.spans_matched + self.spans_unmatched
        return {f"{prefix}unparsable_fraction": self.unparsable / n, f"{prefix}spans_matched": float(self.spans_matched),
                f"{prefix}spans_unmatched": float(self.spans_unmatched),
                f"{prefix}span_match_rate": self.spans_matched / total if total else 0.0,
                f"{prefix}marked_fraction": self.marked_fraction}


def parse_outputs(texts: Sequence[str], form: str) -> list[SpanFeedback | FeedbackParseError]:
    """``parse_feedback`` of each text, the error in its place when it fails."""
    out: list[SpanFeedback | FeedbackParseError] = []
    for text in texts:
        try:
            out.append(parse_feedback(text, form))
        except FeedbackParseError as err:
            out.append(err)
    return out


def request_ids(tokenizer: Any, form: str, prompt: str, response: str, style: str,
                max_prompt_tokens: int) -> list[int]:
    """Token ids of the reward model's input: ``render_request`` through the tokenizer's chat template
    (``encode_prompts``, the same rendering ``--algo sft --task dataset`` trains on)."""
    text = render_request(form, prompt, response, style)
    return encode_prompts(tokenizer, [Example(prompt=text, answer="")], None, max_prompt_tokens)[0]


class SpanScorer(ABC):
    """The shared half of the local and remote span reward models: feedback -> ``SpanRewards``.
    Subclasses implement ``feedback(prompts, responses)``."""

    def __init__(self, form: str, rule: str | SpanRule | None = None) -> None:
        self.form = check_form(form)
        self.rule = resolve_rule(rule if rule is not None else form)

    @abstractmethod
    def feedback(self, prompts: Sequence[str], responses: Sequence[str]) -> list[SpanFeedback | FeedbackParseError]:
        """The parsed feedback on each (prompt, response), or the parse error in its place."""

    def token_rewards(self, prompts: Sequence[str], completion_ids: Sequence[Sequence[int]],
                      policy_tokenizer: Any) -> SpanRewards:
        """Per-token rewards of each completion (module docstring)."""
        if len(prompts) != len(completion_ids):
            raise ValueError(f"{len(prompts)} prompts but {len(completion_ids)} completions")
        ids = [[int(t) for t in c] for c in completion_ids]
        texts = [policy_tokenizer.decode(c, skip_special_tokens=True) for c in ids]
        result = SpanRewards([], [], [], [])
        marked = tokens = 0
        for parsed, text, c in zip(self.feedback(prompts, texts), texts, ids):
            if isinstance(parsed, FeedbackParseError):
                result.rewards.append(None)
                result.feedback.append(None)
                result.verdicts.append(None)
                result.errors.append(str(parsed))
                result.unparsable += 1
                continue
            scores = score_tokens(parsed, text, c, policy_tokenizer, self.rule)
            result.rewards.append(scores.rewards)
            result.feedback.append(parsed)
            result.errors.append(None)
            flagged = parsed.incomplete or any(m and r < 0 for m, r in zip(scores.marked, scores.rewards))
            result.verdicts.append(-1.0 if flagged else 1.0)
            result.spans_matched += scores.matched
            result.spans_unmatched += scores.unmatched
            marked += sum(scores.marked)
            tokens += len(c)
        result.marked_fraction = marked / tokens if tokens else 0.0
        return result


class ProgramSpanScorer(SpanScorer):
    """Span feedback written by a program instead of a model: ``program(prompt, response) -> SpanFeedback``
    (e.g. ``posttrain.tasks.step_arithmetic.program_feedback``). The oracle a learned span reward model is
    measured against: it separates what the RL side (span credit through GAE) gains from what a weak reward
    model loses."""

    def __init__(self, program: Callable[[str, str], SpanFeedback], form: str = "spans",
                 rule: str | SpanRule | None = None) -> None:
        super().__init__(form, rule)
        self.program = program

    def feedback(self, prompts: Sequence[str], responses: Sequence[str]) -> list[SpanFeedback | FeedbackParseError]:
        return [self.program(p, r) for p, r in zip(prompts, responses, strict=True)]


class SpanRewardModel(SpanScorer):
    """A span reward model served by a ``GenerationEngine`` (module docstring). ``style`` is the template
    style (``templates.STYLES``: ``compact`` for the embedded tiny model); ``max_prompt_tokens`` bounds the
    reward model's input (an over-long one raises, naming the sample)."""

    def __init__(self, engine: GenerationEngine, form: str = "spans", rule: str | SpanRule | None = None,
                 sampling: SamplingParams | None = None, style: str = "full", max_prompt_tokens: int = 4096) -> None:
        super().__init__(form, rule)
        if style not in STYLES:
            raise ValueError(f"unknown template style {style!r}; choose one of {', '.join(STYLES)}")
        self.engine, self.style, self.max_prompt_tokens = engine, style, max_prompt_tokens
        self.sampling = sampling or DEFAULT_SAMPLING

    def feedback(self, prompts: Sequence[str], responses: Sequence[str]) -> list[SpanFeedback | FeedbackParseError]:
        """The reward model's parsed feedback on each (prompt, response), or the parse error."""
        ids = [request_ids(self.engine.tokenizer, self.form, p, r, self.style, self.max_prompt_tokens)
               for p, r in zip(prompts, responses)]
        return parse_outputs(self.engine.generate(ids, self.sampling).texts, self.form)
