"""The reward server: mR3 rubric scoring plus an OpenAI-compatible generation API (FastAPI).

Endpoints

- ``POST /v1/rubric_score`` and ``POST /v1/rubric_score/batch``: pointwise / pairwise / binary rubric
  scoring (body: ``schemas.RubricScoreRequest``; answer: verdict, scalar reward, p_first, reasoning).
- ``POST /v1/span_feedback`` and ``POST /v1/span_feedback/batch``: Text2Grad span feedback (critique plus
  quoted good / poor spans; ``span_feedback``, which holds those routes).
- ``POST /v1/completions``, ``POST /v1/chat/completions``, ``GET /v1/models``: OpenAI-compatible
  (non-streaming); works with the official ``openai`` client. ``response_format`` (``json_object``,
  ``json_schema``) constrains decoding through the engine; a bad schema, or one the engine cannot apply
  (``SamplingParamsError``), is a 400 naming the field.
- ``GET /health`` (never needs the token) and ``GET /metrics`` (Prometheus text; ``?format=json``).

Robustness: every error is JSON ``{"error": {"message", "type", "code"}}`` (OpenAI's shape) with a 4xx
status for bad requests: 400 (bad values, prompt too long, unsupported options, invalid JSON), 401
(missing or wrong bearer token), 404 (unknown model or route), 405, 413 (body over
``max_request_bytes`` or more generations than the queue holds), 422 (schema violations, naming the
field), 429 (queue full; ``Retry-After``), 504 (timed out in queue or generation). Concurrent
requests are batched by ``batching.Batcher``. Auth, body limits, the error shape and request metrics
live in ``guard``; this module holds the routes.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from posttrain.engines.base import SamplingParams, SamplingParamsError
from posttrain.models.chat import has_chat_template, render_chat
from rewards.mr3.scoring import aggregate, plan_samples
from rewards.mr3.templates import COMPACT_VERDICT_TOKENS, THINK_CLOSE, EvalItem
from rewards.server.backends import ServedModel
from rewards.server.batching import Batcher, Generated, QueueFull, TooLarge, sample_params
from rewards.server.guard import STATUS_TYPES, APIError, Guard, Metrics, ServerSettings, error_body
from rewards.server.schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    ResponseFormat,
    RubricScoreBatchRequest,
    RubricScoreRequest,
    RubricScoreResponse,
)
from rewards.server.span_feedback import add_span_feedback_routes

logger = logging.getLogger(__name__)

def create_app(served: ServedModel, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app around ``served`` (an engine and its model's facts, ``backends.ServedModel``)."""
    settings = settings or ServerSettings()
    style = settings.style or served.default_style
    model_name = settings.model_name or served.model_name
    metrics = Metrics()
    batcher = Batcher(served.engine, settings.max_batch_size, settings.max_queue, settings.batch_wait_ms / 1000.0,
                      enabled=settings.batching)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="posttrain reward server", lifespan=lifespan)
    app.state.batcher, app.state.settings, app.state.metrics, app.state.served = batcher, settings, metrics, served
    app.add_middleware(Guard, settings=settings, metrics=metrics)

    # -- errors ------------------------------------------------------------------------------------
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(error_body(exc.status, exc.message, exc.type, exc.code), exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            detail = "; ".join(str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors)
            return JSONResponse(error_body(400, f"request body is not valid JSON: {detail}",
                                            "invalid_request_error"), 400)
        if any(tuple(e.get("loc", ())) == ("body",) and e.get("type") == "missing" for e in errors):
            return JSONResponse(error_body(422, "a JSON request body is required", "invalid_request_error"), 422)
        parts = []
        for e in errors[:10]:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{loc}: {e.get('msg')}")
        return JSONResponse(error_body(422, "; ".join(parts), "invalid_request_error"), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(exc.status_code, str(exc.detail), STATUS_TYPES.get(exc.status_code, "error")),
                            exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:  # a bug, not a bad request
        logger.exception("internal error")
        return JSONResponse(error_body(500, f"internal error: {type(exc).__name__}: {exc}", "server_error"), 500)

    # -- helpers -----------------------------------------------------------------------------------
    def check_model(name: str | None) -> None:
        if name and name not in (model_name, "default"):
            raise APIError(404, f"the model '{name}' does not exist; this server serves '{model_name}'",
                           "not_found_error", code="model_not_found")

    def check_tokens(max_tokens: int, what: str) -> None:
        if settings.max_tokens_cap is not None and max_tokens > settings.max_tokens_cap:
            raise APIError(400, f"{what} = {max_tokens} is over this server's limit of {settings.max_tokens_cap}")

    def capped(tokens: int, *caps: int | None) -> int:
        """``tokens`` under the server's configured limits (None = no limit)."""
        return max(1, min([tokens, *(c for c in (*caps, settings.max_tokens_cap) if c is not None)]))

    def verdict_budget(room: int) -> int:
        """The default budget of one verdict: what the context leaves after the prompt (mR3 reasons for
        thousands of tokens), or the compact tiny judge's own short budget, under the server's limits."""
        own = min(room, COMPACT_VERDICT_TOKENS) if style == "compact" else room
        return capped(own, settings.rubric_max_tokens)

    def check_context(ids: list[int], max_tokens: int, index: int) -> None:
        if not ids:
            raise APIError(400, f"prompt {index} is empty")
        if len(ids) + max_tokens > served.max_context:
            raise APIError(400, f"this model's maximum context length is {served.max_context} tokens; prompt {index} "
                                f"has {len(ids)} tokens and max_tokens is {max_tokens}; shorten the prompt or "
                                "lower max_tokens")

    async def generate(prompts: list[list[int]],
                       params: SamplingParams | list[SamplingParams]) -> list[Generated]:
        try:
            return await batcher.run(prompts, params, settings.timeout_s)
        except QueueFull as err:
            raise APIError(429, str(err), "rate_limit_error", headers={"Retry-After": "1"}) from None
        except TooLarge as err:
            raise APIError(413, str(err), "request_too_large") from None
        except TimeoutError:
            raise APIError(504, f"generation did not finish within {settings.timeout_s:g} s (--timeout)",
                           "timeout") from None
        except SamplingParamsError as err:  # e.g. a schema the engine cannot compile: the request's fault
            raise APIError(400, str(err)) from None

    def sampling(max_tokens: int, temperature: float | None, top_p: float | None, top_k: int | None,
                 seed: int | None, default_t: float = 1.0, default_p: float = 1.0, default_k: int = 0,
                 response_format: ResponseFormat | None = None) -> SamplingParams:
        try:
            return SamplingParams(max_new_tokens=max_tokens,
                                  temperature=default_t if temperature is None else temperature,
                                  top_p=default_p if top_p is None else top_p,
                                  top_k=default_k if top_k is None else max(0, top_k), seed=seed,
                                  json_schema=response_format.schema_text() if response_format else None)
        except ValueError as err:
            raise APIError(400, str(err)) from None

    def apply_stop(text: str, stop: str | list[str] | None) -> tuple[str, bool]:
        stops = [stop] if isinstance(stop, str) else (stop or [])
        cut = min((text.find(s) for s in stops if s and s in text), default=-1)
        return (text[:cut], True) if cut >= 0 else (text, False)

    def reject_unsupported(req: Any) -> None:
        if req.stream:
            raise APIError(400, "stream=true is not supported by this server; send stream=false")
        if isinstance(req.stop, list) and len(req.stop) > 4:
            raise APIError(400, "at most 4 stop sequences are allowed")

    vocab = len(served.tokenizer)

    # -- routes ------------------------------------------------------------------------------------
    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": model_name, "backend": served.backend, "queued": batcher.queued,
                "busy": batcher.busy, "max_queue": settings.max_queue, "max_batch_size": batcher.max_batch_size}

    @app.get("/metrics", response_model=None)
    async def metrics_endpoint(format: str = "prometheus") -> Any:
        stats = batcher.stats
        if format == "json":
            return {"requests": [{"path": p, "status": s, "count": c} for (p, s), c in sorted(metrics.requests.items())],
                    "latency": {p: {"sum_s": v[0], "count": v[1]} for p, v in metrics.latency.items()},
                    "batcher": {**asdict(stats), "queued": batcher.queued}, "uptime_s": time.time() - metrics.started}
        if format != "prometheus":
            raise APIError(400, f"format must be 'prometheus' or 'json', got {format!r}")
        lines = ["# TYPE posttrain_requests_total counter"]
        for (p, s), c in sorted(metrics.requests.items()):
            lines.append(f'posttrain_requests_total{{path="{p}",status="{s}"}} {c}')
        lines.append("# TYPE posttrain_request_seconds summary")
        for p, (total, count) in sorted(metrics.latency.items()):
            lines.append(f'posttrain_request_seconds_sum{{path="{p}"}} {total:.6f}')
            lines.append(f'posttrain_request_seconds_count{{path="{p}"}} {count}')
        lines += [
            f"posttrain_queue_depth {batcher.queued}",
            f"posttrain_batches_total {stats.batches}",
            f"posttrain_batched_prompts_total {stats.prompts}",
            f"posttrain_batch_size_max {stats.max_batch}",
            f"posttrain_generate_seconds_total {stats.generate_seconds:.6f}",
            f"posttrain_completion_tokens_total {stats.completion_tokens}",
            f"posttrain_queue_rejections_total {stats.rejected_full}",
            f"posttrain_cancelled_prompts_total {stats.dropped_cancelled}",
            f"posttrain_generate_failures_total {stats.failures}",
        ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": int(metrics.started),
                                            "owned_by": "posttrain"}]}

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest) -> dict:
        check_model(req.model)
        reject_unsupported(req)
        if req.echo or (req.best_of not in (None, 1)) or req.suffix:
            raise APIError(400, "echo, best_of > 1 and suffix are not supported by this server")
        max_tokens = req.max_tokens or settings.default_max_tokens
        check_tokens(max_tokens, "max_tokens")
        raw = req.prompt
        if isinstance(raw, str):
            prompts = [served.encode(raw)]
        elif raw and all(isinstance(x, int) for x in raw):
            prompts = [list(raw)]  # type: ignore[arg-type]
        elif raw and all(isinstance(x, str) for x in raw):
            prompts = [served.encode(x) for x in raw]  # type: ignore[union-attr]
        elif raw and all(isinstance(x, list) for x in raw):
            prompts = [list(x) for x in raw]  # type: ignore[union-attr]
        else:
            raise APIError(400, "prompt must be a string, a list of strings, or token ids (non-empty)")
        for i, ids in enumerate(prompts):
            if any((not isinstance(t, int)) or t < 0 or t >= vocab for t in ids):
                raise APIError(400, f"prompt {i} has token ids outside the vocabulary [0, {vocab})")
            check_context(ids, max_tokens, i)
        params = sampling(max_tokens, req.temperature, req.top_p, req.top_k, req.seed,
                          response_format=req.response_format)
        stop_ids = (req.model_extra or {}).get("stop_token_ids")  # vLLM's extension (OpenAIHTTPEngine sends it)
        if stop_ids:
            if not isinstance(stop_ids, list) or not all(isinstance(t, int) and 0 <= t < vocab for t in stop_ids):
                raise APIError(400, f"stop_token_ids must be a list of token ids in [0, {vocab})")
            params = replace(params, stop_token_ids=tuple(stop_ids))
        expanded = [ids for ids in prompts for _ in range(req.n)]
        outs = await generate(expanded, sample_params(params, len(expanded)))
        want_ids = bool((req.model_extra or {}).get("return_token_ids"))
        choices = []
        for index, out in enumerate(outs):
            text, stopped = apply_stop(out.text, req.stop)
            choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None,
                                      "finish_reason": "stop" if stopped else out.finish_reason}
            if req.logprobs is not None:
                tokens = [served.tokenizer.decode([t]) for t in out.completion_ids]
                offsets, pos = [], 0
                for tok in tokens:
                    offsets.append(pos)
                    pos += len(tok)
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": out.logprobs, "top_logprobs": None,
                                      "text_offset": offsets}
            if want_ids:
                choice["prompt_token_ids"], choice["token_ids"] = out.prompt_ids, out.completion_ids
            choices.append(choice)
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "usage": _usage(outs)}

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest) -> dict:
        check_model(req.model)
        reject_unsupported(req)
        try:
            messages = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
                        for m in req.messages]
        except ValueError as err:
            raise APIError(400, str(err)) from None
        explicit = req.max_completion_tokens or req.max_tokens
        max_tokens = explicit or capped(settings.default_chat_max_tokens)
        check_tokens(max_tokens, "max_tokens")
        continue_final = req.continue_final_message
        if continue_final is None:
            continue_final = messages[-1]["role"] == "assistant"
        if continue_final and messages[-1]["role"] != "assistant":
            raise APIError(400, "continue_final_message needs a final assistant message")
        try:
            text = render_chat(served.tokenizer, messages, add_generation_prompt=not continue_final,
                                       continue_final=continue_final)
        except Exception as err:  # noqa: BLE001 - template errors are the request's fault (e.g. role order)
            raise APIError(400, f"the chat template rejected these messages: {err}") from None
        ids = served.encode(text, add_special_tokens=False)
        if not explicit:  # the default budget shrinks to what the context leaves
            max_tokens = max(1, min(max_tokens, served.max_context - len(ids)))
        check_context(ids, max_tokens, 0)
        params = sampling(max_tokens, req.temperature, req.top_p, req.top_k, req.seed,
                          response_format=req.response_format)
        outs = await generate([ids] * req.n, sample_params(params, req.n))
        choices = []
        for index, out in enumerate(outs):
            content, stopped = apply_stop(out.text, req.stop)
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if THINK_CLOSE in content:
                reasoning, _, answer = content.partition(THINK_CLOSE)
                message["reasoning_content"] = reasoning.replace("<think>", "").strip()
                message["content"] = answer.strip()
            choice: dict[str, Any] = {"index": index, "message": message, "logprobs": None,
                                      "finish_reason": "stop" if stopped else out.finish_reason}
            if req.logprobs:
                choice["logprobs"] = {"content": [
                    {"token": served.tokenizer.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
                    for t, lp in zip(out.completion_ids, out.logprobs)]}
            choices.append(choice)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "usage": _usage(outs)}

    async def score(requests: list[RubricScoreRequest]) -> list[dict]:
        for r in requests:
            check_model(r.model)
        items: list[EvalItem] = []
        for r in requests:
            try:
                items.append(EvalItem(mode=r.mode, instruction=r.instruction, responses=list(r.responses),
                                      rubric=r.rubric, task_description=r.task_description, reference=r.reference,
                                      language=r.language, prompt_language=r.prompt_language,
                                      reasoning_language=r.reasoning_language, system_message=r.system_message,
                                      key=r.id or "", template=r.template, good_verdict=r.good_verdict,
                                      gold=r.gold))
            except ValueError as err:
                raise APIError(400, str(err)) from None
        tokenizer = served.tokenizer
        templated = style == "mr3" and has_chat_template(tokenizer)
        all_samples, all_ids, all_params, owners = [], [], [], []
        for index, (r, item) in enumerate(zip(requests, items)):
            samples = plan_samples([item], tokenizer, style, r.n_samples, r.swap_positions)
            encoded = [served.encode(s.prompt, add_special_tokens=not templated) for s in samples]
            if r.max_tokens is not None:
                max_tokens = r.max_tokens
                check_tokens(max_tokens, "max_tokens")
            else:
                room = served.max_context - max(len(ids) for ids in encoded)
                max_tokens = verdict_budget(room)
            default_t, default_p, default_k = (0.6, 0.95, 20) if style == "mr3" else (0.0, 1.0, 0)
            params = sampling(max_tokens, r.temperature, r.top_p, r.top_k, r.seed, default_t, default_p, default_k)
            for s, ids, own in zip(samples, encoded, sample_params(params, len(samples))):
                check_context(ids, max_tokens, index)
                all_params.append(own)
                all_samples.append(s)
                all_ids.append(ids)
                owners.append(index)
        if len(all_ids) > settings.max_queue:
            raise APIError(413, f"these items need {len(all_ids)} generations; this server queues at most "
                                f"{settings.max_queue} (--max-queue)", "request_too_large")
        outputs = await generate(all_ids, all_params)
        results = []
        for index, (r, item) in enumerate(zip(requests, items)):
            mine = [k for k, o in enumerate(owners) if o == index]
            samples = [all_samples[k] for k in mine]
            for s in samples:
                s.item_index = 0
            outs = [outputs[k] for k in mine]
            (res,) = aggregate([item], samples, [o.text for o in outs],
                               usage=[(len(o.prompt_ids), len(o.completion_ids)) for o in outs])
            body = RubricScoreResponse(id=r.id or f"score-{uuid.uuid4().hex[:12]}", model=model_name, mode=r.mode,
                                       score_raw=res.score_raw, reward=res.reward, p_first=res.p_first,
                                       parse_ok=res.parse_ok, explanation=res.explanation, reasoning=res.reasoning,
                                       n_parsed=res.n_parsed, n_samples=res.n_samples, errors=res.errors,
                                       usage={**res.usage, "total_tokens": sum(res.usage.values())})
            results.append(body.model_dump())
        return results

    @app.post("/v1/rubric_score")
    async def rubric_score(req: RubricScoreRequest) -> dict:
        return (await score([req]))[0]

    @app.post("/v1/rubric_score/batch")
    async def rubric_score_batch(req: RubricScoreBatchRequest) -> dict:
        if len(req.requests) > settings.max_batch_items:
            raise APIError(413, f"{len(req.requests)} items in one batch; this server accepts at most "
                                f"{settings.max_batch_items}", "request_too_large")
        return {"object": "list", "model": model_name, "results": await score(req.requests)}

    add_span_feedback_routes(app, tokenizer=served.tokenizer, settings=settings, model_name=model_name,
                             max_context=served.max_context, server_style=style, generate=generate,
                             check_model=check_model, check_tokens=check_tokens, check_context=check_context,
                             sampling=sampling)
    return app


def _usage(outs: list[Generated]) -> dict[str, int]:
    prompt = sum(len(o.prompt_ids) for o in outs)
    completion = sum(len(o.completion_ids) for o in outs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
