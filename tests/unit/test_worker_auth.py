"""The rollout workers' shared secret (``engines.worker_auth``): where it is read from, the middleware's 401
(the e2e check against a real worker, whose command line must not hold the secret, is in
tests/e2e/test_rollout_workers.py) and the worker's refusal of a non-loopback ``--host`` without a secret, also
where vLLM would read it: pass-through options that change the bind or the middleware are refused, and the rule
is applied to the host vLLM's own parser takes from the final command (the last ``--host`` wins there)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from posttrain.engines.worker import (
    VLLM_ARGUMENTS_START,
    effective_bind_problem,
    refused_passthrough_problem,
    rollout_worker_main,
    worker_command,
)
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


@pytest.mark.parametrize(("passthrough", "option", "instead"), [
    (["--host", "0.0.0.0"], "--host", "the worker's own --host"),
    (["--host=0.0.0.0"], "--host", "the worker's own --host"),
    (["--hos", "0.0.0.0"], "--host", "the worker's own --host"),  # argparse's abbreviations reach it too
    (["--port", "8101", "--uds", "/tmp/x"], "--uds", "the worker's --host and --port"),
    (["--middleware", "m"], "--middleware", "installs its own"),
])
def test_passthrough_options_that_change_the_bind_or_the_middleware_are_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, passthrough: list[str], option: str,
        instead: str) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SECRET_FILE_ENV, raising=False)
    assert rollout_worker_main(["--model", "tiny", "--", *passthrough]) == 2
    err = capsys.readouterr().err
    assert f"`-- {option}` is refused" in err and instead in err
    monkeypatch.setenv(SECRET_ENV, "s3cret")  # refused with a secret too: the worker sets them itself
    assert rollout_worker_main(["--model", "tiny", "--host", "10.0.0.5", "--", *passthrough]) == 2
    assert f"`-- {option}` is refused" in capsys.readouterr().err


def test_the_rule_applies_to_the_host_vllm_binds() -> None:
    def vllm_arguments(host: str, extra: list[str]) -> list[str]:
        return worker_command("/ckpt", 8100, host, cuda=True, extra=extra)[VLLM_ARGUMENTS_START:]

    assert refused_passthrough_problem(["--port", "8101", "--tensor-parallel-size", "1"]) is None
    assert refused_passthrough_problem([]) is None
    assert effective_bind_problem(vllm_arguments("127.0.0.1", ["--port", "8101"]), secret=False) is None
    assert effective_bind_problem(vllm_arguments("10.0.0.5", []), secret=True) is None
    # the last --host wins in vLLM's parser: the worker's 127.0.0.1 is not what it would bind
    problem = effective_bind_problem(vllm_arguments("127.0.0.1", ["--host=0.0.0.0"]), secret=False)
    assert problem is not None and "vLLM's effective --host 0.0.0.0 is not a loopback address" in problem


def test_a_passed_through_logprobs_mode_is_refused() -> None:
    """The worker sets --logprobs-mode processed_logprobs; a later one after `--` would win in vLLM's parser."""
    from posttrain.engines.worker import refused_passthrough_problem

    assert "--logprobs-mode" in refused_passthrough_problem(["--logprobs-mode", "raw_logprobs"])
    assert refused_passthrough_problem(["--max-model-len", "256"]) is None
