"""The reward server's mR3 rubric-scoring routes: ``POST /v1/rubric_score`` and ``POST
/v1/rubric_score/batch`` (pointwise / pairwise / binary; body ``schemas.RubricScoreRequest``; answer:
verdict, scalar reward, p_first, reasoning). Every item's samples (``rewards.mr3.scoring.plan_samples``)
go to the batcher in one call and are aggregated per item (``aggregate``)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from posttrain.models.chat import has_chat_template
from rewards.mr3.scoring import aggregate, plan_samples
from rewards.mr3.templates import EvalItem
from rewards.server.guard import APIError
from rewards.server.items import ItemPrompts, answer_batch
from rewards.server.schemas import RubricScoreBatchRequest, RubricScoreRequest, RubricScoreResponse
from rewards.server.state import ServerState, State

router = APIRouter()


def _eval_item(r: RubricScoreRequest) -> EvalItem:
    try:
        return EvalItem(mode=r.mode, instruction=r.instruction, responses=list(r.responses), rubric=r.rubric,
                        task_description=r.task_description, reference=r.reference, language=r.language,
                        prompt_language=r.prompt_language, reasoning_language=r.reasoning_language,
                        system_message=r.system_message, key=r.id or "", template=r.template,
                        good_verdict=r.good_verdict, gold=r.gold)
    except ValueError as err:
        raise APIError(400, str(err)) from None


async def score(requests: list[RubricScoreRequest], state: ServerState) -> list[dict]:
    """The ``RubricScoreResponse`` of each request, in order."""
    for r in requests:
        state.check_model(r.model)
    items = [_eval_item(r) for r in requests]
    served, style = state.served, state.style
    tokenizer = served.tokenizer
    templated = style == "mr3" and has_chat_template(tokenizer)
    defaults = (0.6, 0.95, 20) if style == "mr3" else (0.0, 1.0, 0)
    prompts, item_samples = ItemPrompts(state), []

    def default_max_tokens(longest_prompt: int) -> int:
        return state.verdict_budget(served.max_context - longest_prompt)

    for index, (r, item) in enumerate(zip(requests, items)):
        try:
            samples = plan_samples([item], tokenizer, style, r.n_samples, r.swap_positions)
        except ValueError as err:  # a prompt the style cannot render (compact: no arithmetic problem in it)
            raise APIError(400, f"item {index}: {err}") from None
        encoded = [served.encode(s.prompt, add_special_tokens=not templated) for s in samples]
        prompts.add(index, r, encoded, default_max_tokens, defaults)
        item_samples.append(samples)
    outputs = await prompts.generate(len(requests))
    results = []
    for r, item, samples, outs in zip(requests, items, item_samples, outputs):
        (res,) = aggregate([item], samples, [o.text for o in outs],
                           usage=[(len(o.prompt_ids), len(o.completion_ids)) for o in outs])
        body = RubricScoreResponse(id=r.id or f"score-{uuid.uuid4().hex[:12]}", model=state.model_name, mode=r.mode,
                                   score_raw=res.score_raw, reward=res.reward, p_first=res.p_first,
                                   parse_ok=res.parse_ok, explanation=res.explanation, reasoning=res.reasoning,
                                   n_parsed=res.n_parsed, n_samples=res.n_samples, errors=res.errors,
                                   usage={**res.usage, "total_tokens": sum(res.usage.values())})
        results.append(body.model_dump())
    return results


@router.post("/v1/rubric_score")
async def rubric_score(req: RubricScoreRequest, state: State) -> dict:
    return (await score([req], state))[0]


@router.post("/v1/rubric_score/batch")
async def rubric_score_batch(req: RubricScoreBatchRequest, state: State) -> dict:
    return await answer_batch(req.requests, state, score)
