"""``RemoteVLLMEngine``'s request runner with stand-in requests (no worker needed): a worker that answers
nothing fails the call naming it after one ``generation_timeout_s`` however many of its requests are queued,
the queued ones are cancelled (never sent), and a failed request cancels the rest at once."""

from __future__ import annotations

import threading
import time

import pytest

from posttrain.engines.remote import RemoteVLLMEngine, WorkerError

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
