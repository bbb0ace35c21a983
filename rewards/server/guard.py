"""The HTTP layer in front of the reward server's routes: settings, error shape, metrics and the guard.

``ServerSettings`` holds one server's limits (the flags of ``posttrain serve``; ``uvicorn_options`` gives
uvicorn its share: the connection limit and the keep-alive timeout); ``APIError`` and ``error_body`` give every
error OpenAI's JSON shape; ``Metrics`` counts requests for ``/metrics``; ``Guard`` is the pure ASGI middleware
that checks the bearer token, enforces the body-size limit (413) and the time a body may take to arrive (408,
connection closed; uvicorn 0.x has no such timeout), buffering the body, and records every request, before
FastAPI parses anything.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

OPEN_PATHS = ("/health",)  # reachable without the bearer token
KNOWN_PATHS = ("/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions",
               "/v1/rubric_score", "/v1/rubric_score/batch", "/v1/span_feedback",
               "/v1/span_feedback/batch")  # metrics label; anything else is "other"


@dataclass
class ServerSettings:
    """Limits and defaults of one server (the CLI flags of ``posttrain serve``)."""

    api_key: str | None = None  # bearer token required on every endpoint but /health
    max_batch_size: int = 16  # prompts per generate call
    max_queue: int = 256  # prompts waiting; more -> 429
    batching: bool = True  # False = one prompt per generate call
    batch_wait_ms: float = 2.0  # how long an idle model waits for a batch to fill
    timeout_s: float = 60.0  # per request, queueing + generation -> 504
    max_request_bytes: int = 1_000_000  # body size -> 413
    max_tokens_cap: int | None = None  # largest max_tokens a request may ask for -> 400; None = the context's
    default_max_tokens: int = 16  # /v1/completions default (OpenAI's)
    default_chat_max_tokens: int = 256
    rubric_max_tokens: int | None = None  # default verdict budget cap; None = what the model's context leaves
    max_batch_items: int = 256  # items in one /v1/rubric_score/batch -> 413
    style: str | None = None  # rubric template style; None = the backend's default
    model_name: str | None = None  # name served in /v1/models; None = the backend's
    body_timeout_s: float = 30.0  # time from a request's headers to the end of its body -> 408, connection closed
    max_connections: int = 128  # open connections (idle keep-alive ones included); beyond, requests get 503
    keep_alive_s: float = 30.0  # an idle keep-alive connection is closed after this

    def uvicorn_options(self) -> dict[str, float | int]:
        """The limits uvicorn enforces itself (``uvicorn.Config`` keyword arguments)."""
        return {"limit_concurrency": self.max_connections, "timeout_keep_alive": self.keep_alive_s}


class APIError(Exception):
    """An error answered as OpenAI-shaped JSON with ``status`` (raised by the route handlers)."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 headers: dict[str, str] | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.headers, self.code = status, message, type_, headers, code


def error_body(status: int, message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": type_, "code": code or str(status)}}


STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                405: "invalid_request_error", 408: "timeout", 413: "request_too_large", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "server_busy", 504: "timeout"}


class Metrics:
    """Counters for ``/metrics``: requests by path and status, latency sums, plus the batcher's stats."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.latency: dict[str, list[float]] = {}  # path -> [sum, count]
        self.started = time.time()

    def record(self, path: str, status: int, seconds: float) -> None:
        """Count one answered request and add its latency."""
        self.requests[(path, status)] = self.requests.get((path, status), 0) + 1
        acc = self.latency.setdefault(path, [0.0, 0])
        acc[0] += seconds
        acc[1] += 1


class BodyTimeout(Exception):
    """The request body did not arrive within ``ServerSettings.body_timeout_s``."""


class Guard:
    """Pure ASGI middleware: bearer auth, body-size limit (413) and body-time limit (408), the body buffered,
    and per-request metrics."""

    def __init__(self, app: Any, settings: ServerSettings, metrics: Metrics) -> None:
        self.app, self.settings, self.metrics = app, settings, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path = scope.get("path", "")
        status_box = [0]

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, send_wrapper, path)
        finally:
            known = path if path in KNOWN_PATHS else "other"
            self.metrics.record(known, status_box[0], time.perf_counter() - start)

    async def _guarded(self, scope: dict, receive: Any, send: Any, path: str) -> None:
        """Answers the request, or 408 (connection closed) when its body takes over ``body_timeout_s``."""
        timeout_s = self.settings.body_timeout_s
        deadline = time.monotonic() + timeout_s

        async def timed_receive() -> dict:
            left = deadline - time.monotonic()
            try:
                return await asyncio.wait_for(receive(), max(left, 0.0))
            except TimeoutError:
                raise BodyTimeout from None

        try:
            await self._checked(scope, timed_receive, receive, send, path)
        except BodyTimeout:
            await _send_json(send, 408, error_body(
                408, f"the request body did not arrive within {timeout_s:g} s (--body_timeout)", "timeout"),
                [(b"connection", b"close")])

    async def _checked(self, scope: dict, receive: Any, raw_receive: Any, send: Any, path: str) -> None:
        """Auth, then the size limit, then the app with the buffered body; ``receive`` raises ``BodyTimeout``
        past the body's deadline, ``raw_receive`` is the app's own for what follows the body (disconnects)."""
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        key = self.settings.api_key
        if key and path not in OPEN_PATHS:
            auth = headers.get(b"authorization", b"").decode("latin-1")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
                message = ("missing bearer token: send 'Authorization: Bearer <key>'" if not auth
                           else "invalid bearer token")
                await _drain(receive, self.settings.max_request_bytes)
                await _send_json(send, 401, error_body(401, message, "authentication_error"),
                                 [(b"www-authenticate", b"Bearer")])
                return
        limit = self.settings.max_request_bytes
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _send_json(send, 400, error_body(400, "invalid Content-Length header", "invalid_request_error"))
                return
            if declared > limit:
                await _drain(receive, 16 * limit)
                await _send_json(send, 413, error_body(
                    413, f"request body is {declared} bytes; this server accepts at most {limit} "
                         "(--max_request_bytes)", "request_too_large"))
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, raw_receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                if message.get("more_body", False):
                    await _drain(receive, 16 * limit)
                await _send_json(send, 413, error_body(
                    413, f"request body is over {limit} bytes (--max_request_bytes)", "request_too_large"))
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await raw_receive()

        await self.app(scope, replay, send)


async def _drain(receive: Any, budget: int) -> None:
    """Read (and discard) the rest of a request body so the client sees our answer, not a reset; ``receive``
    bounds the time (``BodyTimeout`` past the body's deadline)."""
    seen = 0
    while seen <= budget:
        try:
            message = await receive()
        except BodyTimeout:
            return
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _send_json(send: Any, status: int, body: dict, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": payload})
