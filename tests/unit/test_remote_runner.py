"""``RemoteVLLMEngine``'s request runner with stand-in requests (no worker needed): a worker that answers
nothing fails the call naming it after one ``generation_timeout_s`` however many of its requests are queued,
the queued ones are cancelled (never sent), and a failed request cancels the rest at once. Against a stand-in
worker on loopback (its completions and ``/weight_info``): an aborted completion is requested once more, then
fails the call naming the worker and the reason, and a weight version that changes during a call fails it."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from fastapi import FastAPI, Request  # module level: the handler's string annotations must resolve here

from posttrain.engines.base import SamplingParams
from posttrain.engines.remote import RemoteVLLMEngine, WorkerError
from rewards.server.local import serve_in_thread

URLS = ["http://127.0.0.1:9", "http://127.0.0.1:10"]


def _engine(generation_timeout_s: float) -> RemoteVLLMEngine:
    return RemoteVLLMEngine(URLS, tokenizer=object(), concurrency=2, generation_timeout_s=generation_timeout_s)


def test_a_silent_worker_fails_the_call_within_one_timeout_and_its_queue_is_cancelled() -> None:
    engine = _engine(generation_timeout_s=1.0)
    silent, started = threading.Event(), []
    owner = [0] * 4 + [1] * 40  # worker 1 never answers; its 40 requests, 2 at a time, would take 20 rounds

    def request(index: int) -> int:
        started.append(index)
        if owner[index] == 1:
            silent.wait()
        return index

    with pytest.raises(WorkerError, match=r"rollout worker http://127.0.0.1:10: answered none of its \d+ outstanding"):
        engine._run_requests([lambda i=i: request(i) for i in range(len(owner))], owner)
    silent.set()
    time.sleep(0.2)
    assert len([i for i in started if owner[i] == 1]) <= 2  # its concurrency; the rest were cancelled
    engine.close()


def test_a_failed_request_cancels_the_queued_ones_and_results_keep_their_order() -> None:
    engine = _engine(generation_timeout_s=60.0)
    assert engine._run_requests([lambda i=i: i * i for i in range(7)], [0, 0, 0, 0, 1, 1, 1]) == [0, 1, 4, 9, 16, 25, 36]
    started: list[int] = []

    def request(index: int) -> int:
        started.append(index)
        if index == 0:
            raise WorkerError(URLS[0], "generation failed: HTTP 400")
        time.sleep(0.05)
        return index

    with pytest.raises(WorkerError, match="HTTP 400"):
        engine._run_requests([lambda i=i: request(i) for i in range(200)], [0] * 100 + [1] * 100)
    time.sleep(0.5)
    assert len(started) < 200


def test_a_requests_own_http_timeout_outlasts_the_watchdog() -> None:
    """The watchdog, not a request's HTTP timeout, must be what a silent worker hits first: the two equal made the
    error a race between "answered none" (queue cancelled) and a bare "generation failed: ReadTimeout"."""
    engine = _engine(generation_timeout_s=3.0)
    read_timeouts = {client._http._client.timeout.read for client in engine._clients}
    assert read_timeouts == {6.0}
    engine.close()


def _stand_in_worker(finish_reasons: tuple[str, ...] = (), version_after_first: str | None = None) -> FastAPI:
    """A rollout worker's completions and ``/weight_info`` (version ``"0"``): its first generations end with
    ``finish_reasons`` in turn (vLLM answers an aborted request 200 with ``"abort"``), the rest with
    ``"length"``; ``version_after_first``: the version it holds once it answered its first generation."""
    app = FastAPI()
    app.state.bodies, app.state.version, app.state.finish_reasons = [], "0", list(finish_reasons)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        app.state.bodies.append(body)
        reason = app.state.finish_reasons.pop(0) if app.state.finish_reasons else "length"
        if version_after_first is not None:
            app.state.version = version_after_first
        return {"choices": [{"index": j, "text": "xy", "token_ids": [5, 6], "finish_reason": reason,
                             "logprobs": {"token_logprobs": [-0.5, -0.25]}} for j in range(body["n"])]}

    @app.get("/weight_info")
    async def weight_info():
        return {"weight_version": app.state.version}

    return app


def _generate(app: FastAPI) -> list[str]:
    with serve_in_thread(app) as url:
        engine = RemoteVLLMEngine([url], tokenizer=SimpleNamespace(eos_token_id=2), concurrency=2)
        try:
            return engine.generate([[1, 2], [1, 2]], SamplingParams(max_new_tokens=2, seed=3)).finish_reasons
        finally:
            engine.close()


def test_an_aborted_completion_is_requested_again_then_fails_the_call_naming_the_reason() -> None:
    app = _stand_in_worker(finish_reasons=("abort",))
    assert _generate(app) == ["length", "length"]
    assert len(app.state.bodies) == 2 and app.state.bodies[0] == app.state.bodies[1]  # the same request again
    app = _stand_in_worker(finish_reasons=("abort", "abort"))
    with pytest.raises(WorkerError, match=r"rollout worker http://127\.0\.0\.1:\d+: generation failed: .*prompts "
                                          r"0\.\.1: .*finish_reason 'abort' in all 2 attempts"):
        _generate(app)


def test_a_weight_version_that_changes_during_the_call_fails_it() -> None:
    with pytest.raises(WorkerError, match=r"changed from 0 to '1' during a generation call"):
        _generate(_stand_in_worker(version_after_first="1"))
    app = _stand_in_worker()
    app.state.version = "7"
    with pytest.raises(WorkerError, match=r"holds weight version '7' but the trainer expected version 0"):
        _generate(app)
    assert app.state.bodies == []  # refused before any request was sent
