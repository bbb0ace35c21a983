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
live in ``guard``, the exception handlers in ``errors``. The routes are one router per concern, sharing one
``state.ServerState`` (``app.state.server``): ``health`` (health, metrics, models), ``completions`` (the
OpenAI-compatible generation API), ``rubric`` (mR3 scoring) and ``span_feedback`` (Text2Grad); this module
assembles them.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from rewards.server import completions, health, rubric, span_feedback
from rewards.server.backends import ServedModel
from rewards.server.batching import Batcher
from rewards.server.errors import add_error_handlers
from rewards.server.guard import Guard, Metrics, ServerSettings
from rewards.server.state import ServerState

__all__ = ["ServerSettings", "create_app"]


def create_app(served: ServedModel, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app around ``served`` (an engine and its model's facts, ``backends.ServedModel``)."""
    settings = settings or ServerSettings()
    metrics = Metrics()
    batcher = Batcher(served.engine, settings.max_batch_size, settings.max_queue, settings.batch_wait_ms / 1000.0,
                      enabled=settings.batching)
    state = ServerState(served=served, settings=settings, metrics=metrics, batcher=batcher,
                        style=settings.style or served.default_style,
                        model_name=settings.model_name or served.model_name)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="posttrain reward server", lifespan=lifespan)
    app.state.server = state
    app.add_middleware(Guard, settings=settings, metrics=metrics)
    add_error_handlers(app)
    for module in (health, completions, rubric, span_feedback):
        app.include_router(module.router)
    return app
