"""The rollout workers' shared secret (``engines.worker_auth``): where it is read from, the middleware's 401
(the e2e check against a real worker, whose command line must not hold the secret, is in
tests/e2e/test_rollout_workers.py) and the worker's refusal of a non-loopback ``--host`` without a secret."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from posttrain.engines.worker import rollout_worker_main
from posttrain.engines.worker_auth import (
    SECRET_ENV,
    SECRET_FILE_ENV,
    SECRET_HEADER,
    SharedSecretMiddleware,
    is_loopback,
    worker_secret,
)


def test_the_secret_comes_from_the_variable_or_the_file(tmp_path: Path) -> None:
    assert worker_secret({}) is None
    assert worker_secret({SECRET_ENV: "s3"}) == "s3"
    path = tmp_path / "secret"
    path.write_text("  from-file\n")
    assert worker_secret({SECRET_FILE_ENV: str(path)}) == "from-file"
    path.write_text("\n")
    with pytest.raises(ValueError, match=f"{SECRET_FILE_ENV}=.*the file is empty"):
        worker_secret({SECRET_FILE_ENV: str(path)})
    with pytest.raises(ValueError, match=f"{SECRET_FILE_ENV}=.*cannot read"):
        worker_secret({SECRET_FILE_ENV: str(tmp_path / "missing")})


def test_loopback_hosts() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "10.0.0.5", "::", "worker-1"]))


def _call(middleware: SharedSecretMiddleware, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, list]:
    sent: list[dict[str, Any]] = []

    async def app(scope: dict, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    middleware.app = app
    asyncio.run(middleware({"type": "http", "path": path, "headers": headers}, None, send))
    return sent[0]["status"], sent


def test_the_middleware_refuses_a_request_without_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_FILE_ENV, raising=False)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(RuntimeError, match=SECRET_ENV):
        SharedSecretMiddleware(app=None)
    monkeypatch.setenv(SECRET_ENV, "s3cret")
    middleware = SharedSecretMiddleware(app=None)
    header = SECRET_HEADER.lower().encode()
    assert _call(middleware, "/update_weights", [])[0] == 401
    assert _call(middleware, "/collective_rpc", [(header, b"wrong")])[0] == 401
    assert _call(middleware, "/update_weights", [(header, b"s3cret")])[0] == 200
    assert _call(middleware, "/health", [])[0] == 200


def test_a_non_loopback_host_needs_a_secret(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SECRET_FILE_ENV, raising=False)
    assert rollout_worker_main(["--model", "tiny", "--host", "0.0.0.0"]) == 2
    assert "--host 0.0.0.0 is not a loopback address" in capsys.readouterr().err
