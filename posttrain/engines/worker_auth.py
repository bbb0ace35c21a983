"""The shared secret between a trainer and its rollout workers (``posttrain rollout-worker``).

A worker runs vLLM with its dev-mode RLHF routes on (``/init_weight_transfer_engine``, ``/update_weights``,
``/collective_rpc``, ...), which vLLM's ``--api-key`` does not cover: anyone who can reach the port could
load weights into it or run code in it. Workers started with a secret put every route except ``/health``
behind it (``SharedSecretMiddleware``, installed with vLLM's ``--middleware``): a request without the header
``SECRET_HEADER`` holding the secret is answered 401 before vLLM sees it. The trainer sends the header on
every request (``RemoteVLLMEngine``).

Both sides read the secret from the environment, never from the command line (which ``ps`` shows to every
user) and never log it: ``POSTTRAIN_WORKER_SECRET`` holds it, or ``POSTTRAIN_WORKER_SECRET_FILE`` names a
file holding it (surrounding whitespace stripped). A worker refuses to bind a non-loopback ``--host``
without one, checked on the host vLLM's own parser reads from the worker's final command; options passed
through to vLLM that change the bind or the middleware are refused (``rollout_worker_main``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from posttrain.common.secrets_file import read_secret_file

SECRET_ENV = "POSTTRAIN_WORKER_SECRET"
SECRET_FILE_ENV = "POSTTRAIN_WORKER_SECRET_FILE"
SECRET_HEADER = "X-Posttrain-Worker-Secret"
OPEN_PATHS = frozenset({"/health"})
"""Routes that answer without the secret: the liveness probe, which reveals and changes nothing."""


def worker_secret(environ: Mapping[str, str] | None = None) -> str | None:
    """The shared secret from ``SECRET_ENV`` or the file ``SECRET_FILE_ENV`` names; None when neither is set.
    Raises ``ValueError`` naming the variable for an empty secret or an unreadable file."""
    env = os.environ if environ is None else environ
    if env.get(SECRET_ENV):
        return env[SECRET_ENV]
    path = env.get(SECRET_FILE_ENV)
    return read_secret_file(path, f"{SECRET_FILE_ENV}={path}") if path else None


def secret_headers(secret: str | None) -> dict[str, str]:
    """The request headers that carry ``secret`` (none without one)."""
    return {SECRET_HEADER: secret} if secret else {}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); False for anything else, names
    included (a name may resolve to any interface)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class SharedSecretMiddleware:
    """ASGI middleware refusing, with 401, every HTTP or websocket request but ``OPEN_PATHS`` whose
    ``SECRET_HEADER`` is not the worker's secret (compared in constant time). vLLM builds it with the app
    only (``--middleware``), so the secret comes from the environment; starting without one is an error."""

    def __init__(self, app: ASGIApp) -> None:
        secret = worker_secret()
        if secret is None:
            raise RuntimeError(f"SharedSecretMiddleware needs {SECRET_ENV} or {SECRET_FILE_ENV} to be set")
        self.app = app
        self._secret = secret.encode()
        self._header = SECRET_HEADER.lower().encode()

    def _allowed(self, scope: dict[str, Any]) -> bool:
        if scope.get("path") in OPEN_PATHS:
            return True
        sent = dict(scope.get("headers") or []).get(self._header, b"")
        return hmac.compare_digest(sent, self._secret)

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": f"missing or wrong {SECRET_HEADER} header"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
