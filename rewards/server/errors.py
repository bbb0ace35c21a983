"""The reward server's exception handlers: every error, FastAPI's own included, answered in OpenAI's JSON
shape (``guard.error_body``) with the status the module docstring of ``rewards.server.app`` lists."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rewards.server.guard import STATUS_TYPES, APIError, error_body

logger = logging.getLogger(__name__)


async def _api_error(_: Request, exc: APIError) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message, exc.type, exc.code), exc.status, headers=exc.headers)


async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        detail = "; ".join(str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors)
        return JSONResponse(error_body(400, f"request body is not valid JSON: {detail}", "invalid_request_error"), 400)
    if any(tuple(e.get("loc", ())) == ("body",) and e.get("type") == "missing" for e in errors):
        return JSONResponse(error_body(422, "a JSON request body is required", "invalid_request_error"), 422)
    parts = []
    for e in errors[:10]:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {e.get('msg')}")
    return JSONResponse(error_body(422, "; ".join(parts), "invalid_request_error"), 422)


async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    return JSONResponse(error_body(exc.status_code, str(exc.detail), STATUS_TYPES.get(exc.status_code, "error")),
                        exc.status_code, headers=getattr(exc, "headers", None))


async def _internal(_: Request, exc: Exception) -> JSONResponse:  # a bug, not a bad request
    logger.exception("internal error")
    return JSONResponse(error_body(500, f"internal error: {type(exc).__name__}: {exc}", "server_error"), 500)


def add_error_handlers(app: FastAPI) -> None:
    """Install the handlers on ``app``."""
    app.add_exception_handler(APIError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal)
