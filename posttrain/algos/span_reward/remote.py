"""The span reward model over HTTP: a client of ``posttrain serve``'s ``/v1/span_feedback`` (Text2Grad,
arXiv 2505.22338).

``RemoteSpanRewardModel(url, form, rule)`` meets the same contract as the in-process
``scorer.SpanRewardModel``: ``feedback(prompts, responses)`` and ``token_rewards(prompts, completion_ids,
policy_tokenizer) -> SpanRewards``; the spans come back as the same ``SpanFeedback`` (``feedback_from_body``)
and are aligned to the policy's tokens here, on the trainer's side, because only the trainer knows the
policy's tokenizer. Requests go ``batch_size`` items at a time through ``posttrain.common.http.RetryingPoster``
(the reward client's own retry policy: transient failures retried with backoff, ``Retry-After`` honoured).
A sample whose request finally fails or is refused, or whose output the server could not parse, gets a
``FeedbackParseError`` in its place, so its reward is None and it is counted as unparsable, never zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrain.algos.span_reward.alignment import SpanRule
from posttrain.algos.span_reward.scorer import SpanScorer
from posttrain.common.http import RequestStats, RetryingPoster
from posttrain.tasks.span_feedback import FeedbackParseError, SpanFeedback, feedback_from_object


def feedback_from_body(body: dict[str, Any], form: str) -> SpanFeedback:
    """The ``SpanFeedback`` of one result's ``feedback`` object (``rewards.server.span_feedback``'s wire form)."""
    keys = {"spans": ("good_spans", "poor_spans"), "code": ("wrong_code", "improvement_code"),
            "words": ("word_score_list",)}[form]
    critique = "code_feedback" if form == "code" else "textual_feedback"
    return feedback_from_object({critique: body.get("critique", ""), **{k: body.get(k, []) for k in keys}}, form)


class RemoteSpanRewardModel(SpanScorer):
    """Span rewards from a reward server (module docstring). ``style`` / ``max_tokens`` / ``temperature`` are
    sent with every item when set (unset: the server's defaults)."""

    def __init__(self, url: str, form: str = "spans", rule: str | SpanRule | None = None, *,
                 api_key: str | None = None, timeout: float = 120.0, max_retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 8.0, batch_size: int = 16, style: str | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, seed: int | None = None) -> None:
        super().__init__(form, rule)
        if batch_size < 1 or max_retries < 0:
            raise ValueError("batch_size must be >= 1 and max_retries >= 0")
        self.batch_size = batch_size
        self.options = {k: v for k, v in (("style", style), ("max_tokens", max_tokens),
                                          ("temperature", temperature), ("seed", seed)) if v is not None}
        self.stats = RequestStats()
        self._http = RetryingPoster(url, api_key, timeout, max_retries, backoff, max_backoff, 1, seed, self.stats)

    def feedback(self, prompts: Sequence[str], responses: Sequence[str]) -> list[SpanFeedback | FeedbackParseError]:
        """The server's parsed feedback on each (prompt, response), or the error in its place."""
        out: list[SpanFeedback | FeedbackParseError] = []
        for k in range(0, len(prompts), self.batch_size):
            items = [{"prompt": p, "response": r, "form": self.form, **self.options}
                     for p, r in zip(prompts[k:k + self.batch_size], responses[k:k + self.batch_size])]
            out.extend(self._chunk(items))
        return out

    def _chunk(self, items: list[dict]) -> list[SpanFeedback | FeedbackParseError]:
        response = self._http.post("/v1/span_feedback/batch", {"requests": items})
        if response is None:
            return [FeedbackParseError("the reward server request failed (see the log)") for _ in items]
        try:
            results = response.json()["results"]
            if len(results) != len(items):
                raise ValueError(f"{len(results)} results for {len(items)} items")
        except (ValueError, KeyError, TypeError) as err:
            return [FeedbackParseError(f"unreadable reward server answer: {err}") for _ in items]
        parsed: list[SpanFeedback | FeedbackParseError] = []
        for result in results:
            if not result.get("parse_ok"):
                parsed.append(FeedbackParseError(result.get("error") or "the server could not parse the feedback"))
                continue
            try:
                parsed.append(feedback_from_body(result["feedback"], self.form))
            except (FeedbackParseError, KeyError, TypeError) as err:
                parsed.append(FeedbackParseError(f"unreadable feedback in the server's answer: {err}"))
        return parsed

    def close(self) -> None:
        self._http.close()
