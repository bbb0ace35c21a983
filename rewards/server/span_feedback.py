"""The reward server's Text2Grad routes: span feedback from the served model (arXiv 2505.22338).

- ``POST /v1/span_feedback``: body ``SpanFeedbackRequest`` (``prompt``, ``response``, ``form`` = spans | code |
  words, optional ``style`` = full | compact, sampling fields); answer ``SpanFeedbackResponse``: ``parse_ok``,
  the parsed ``feedback`` (``critique``, ``good_spans``, ``poor_spans``, ``wrong_code``, ``improvement_code``,
  ``word_score_list``) or the parse ``error``, the model's ``raw`` output and ``usage``.
- ``POST /v1/span_feedback/batch``: ``{"requests": [...]}`` -> ``{"results": [...]}`` in order.

The reward model's input is ``posttrain.tasks.span_templates.render_request`` through its chat template
(``scorer.request_ids``, shared with the in-process ``SpanRewardModel``); outputs are read by
``feedback.parse_feedback``. Generation goes through the app's batcher, limits and error shape (the
app's ``state.ServerState``): a schema violation is 422 naming the field (an unknown ``form`` too),
an empty or over-long input 400, a full queue 429, too many items 413. An unparsable output is not an
error: ``parse_ok`` is false and ``error`` says why, so the client can mask the sample and count it.
Default style: ``compact`` when the server's rubric style is (the embedded tiny model), else ``full``.
"""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from posttrain.algos.span_reward.scorer import request_ids
from posttrain.tasks.span_feedback import FeedbackParseError, SpanFeedback, parse_feedback
from rewards.server.guard import APIError
from rewards.server.items import ItemPrompts, answer_batch
from rewards.server.state import ServerState, State

DEFAULT_MAX_TOKENS = 512
router = APIRouter()


class SpanFeedbackRequest(BaseModel):
    """``POST /v1/span_feedback``: the reward model's feedback on one response."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(description="The task prompt the response answers.")
    response: str = Field(description="The response to critique (the text the spans must quote).")
    form: Literal["spans", "code", "words"] = "spans"
    style: Literal["full", "compact"] | None = Field(None, description="Template style; default: the server's.")
    max_tokens: int | None = Field(None, ge=1, description="Feedback budget; default 512, capped by the context.")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Default 0 (greedy).")
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    seed: int | None = None
    id: str | None = None
    model: str | None = None


class SpanFeedbackBatchRequest(BaseModel):
    """``POST /v1/span_feedback/batch``: several items (one result per item, in order)."""

    model_config = ConfigDict(extra="forbid")

    requests: list[SpanFeedbackRequest] = Field(min_length=1)


class SpanFeedbackBody(BaseModel):
    critique: str
    good_spans: list[str]
    poor_spans: list[str]
    wrong_code: list[str]
    improvement_code: list[str]
    word_score_list: list[tuple[str, int]]


class SpanFeedbackResponse(BaseModel):
    id: str
    model: str
    form: str
    parse_ok: bool
    feedback: SpanFeedbackBody | None = None
    error: str | None = None
    raw: str
    usage: dict[str, int]


def feedback_body(feedback: SpanFeedback) -> SpanFeedbackBody:
    """The wire form of a ``SpanFeedback`` (``remote.feedback_from_body`` reads it back)."""
    return SpanFeedbackBody(critique=feedback.critique, good_spans=list(feedback.good), poor_spans=list(feedback.poor),
                            wrong_code=list(feedback.wrong), improvement_code=list(feedback.improvable),
                            word_score_list=[(w, s) for w, s in feedback.word_scores])


async def span_feedback(requests: list[SpanFeedbackRequest], state: ServerState) -> list[dict]:
    """The ``SpanFeedbackResponse`` of each request, in order."""
    tokenizer, max_context, settings = state.served.tokenizer, state.served.max_context, state.settings
    default_style = "compact" if state.style == "compact" else "full"
    prompts = ItemPrompts(state)

    def default_max_tokens(prompt_tokens: int) -> int:
        return max(1, min(DEFAULT_MAX_TOKENS, max_context - prompt_tokens,
                           settings.max_tokens_cap or DEFAULT_MAX_TOKENS))

    for index, r in enumerate(requests):
        state.check_model(r.model)
        try:
            ids = request_ids(tokenizer, r.form, r.prompt, r.response, r.style or default_style, max_context)
        except ValueError as err:
            raise APIError(400, f"item {index}: {err}") from None
        prompts.add(index, r, [ids], default_max_tokens, (0.0, 1.0, 0))
    results = []
    for r, (out,) in zip(requests, await prompts.generate(len(requests))):
        try:
            parsed, error = feedback_body(parse_feedback(out.text, r.form)), None
        except FeedbackParseError as err:
            parsed, error = None, str(err)
        usage = {"prompt_tokens": len(out.prompt_ids), "completion_tokens": len(out.completion_ids)}
        results.append(SpanFeedbackResponse(
            id=r.id or f"span-{uuid.uuid4().hex[:12]}", model=state.model_name, form=r.form,
            parse_ok=parsed is not None, feedback=parsed, error=error, raw=out.text,
            usage={**usage, "total_tokens": sum(usage.values())}).model_dump())
    return results


@router.post("/v1/span_feedback")
async def span_feedback_one(req: SpanFeedbackRequest, state: State) -> dict:
    return (await span_feedback([req], state))[0]


@router.post("/v1/span_feedback/batch")
async def span_feedback_batch(req: SpanFeedbackBatchRequest, state: State) -> dict:
    return await answer_batch(req.requests, state, span_feedback)
