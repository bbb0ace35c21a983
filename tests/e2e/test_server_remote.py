"""The remote reward function against a real server on loopback, and against failing servers."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from posttrain.engines.weight_sync import free_port
from rewards.remote import from_env, remote_reward
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread


@pytest.fixture(scope="module")
def judge_url():
    settings = ServerSettings(api_key="k", max_batch_size=16)
    with serve_in_thread(create_app(load_served_model("fake"), settings)) as url:
        yield url


def test_binary_pointwise_pairwise_through_the_real_server(judge_url):
    prompts = ["2+2?", "2+2?", [{"role": "user", "content": "3+3?"}]]
    completions = ["4", "wrong 5", [{"role": "assistant", "content": "6"}]]
    binary = remote_reward(judge_url, "binary", api_key="k", batch_size=2, max_concurrency=2)
    assert binary(prompts, completions, answer=["4", "4", "6"]) == [1.0, 0.0, 1.0]
    assert binary.__name__ == "remote_binary" and binary.stats.requests == 2
    pointwise = remote_reward(judge_url, "pointwise", rubric={"1": "bad", "2": "good"}, api_key="k")
    assert pointwise(["q"], ["x" * 12]) == [1.0]
    pairwise = remote_reward(judge_url, "pairwise", api_key="k")
    assert pairwise(["q", "q"], ["a good answer", "meh"], answer=["meh", "a good answer"]) == [1.0, 0.0]
    assert pairwise(["q"], ["x"]) == [None]  # no reference column: masked, not a crash


def test_unparsable_verdicts_neutral_or_none(judge_url):
    args = (["<<garbage>>"], ["x"])
    assert remote_reward(judge_url, "binary", api_key="k")(*args) == [0.5]
    assert remote_reward(judge_url, "binary", api_key="k", on_parse_fail="none")(*args) == [None]


def test_a_mostly_unreadable_batch_warns_and_is_reported(judge_url, caplog):
    """A judge that says nothing must not pass as a run of neutral rewards: the batch warns with the rate and
    the counts, and ``reward/parse_fail_rate`` goes to the trainer's metrics."""
    fn = remote_reward(judge_url, "binary", api_key="k", batch_size=2)
    with caplog.at_level(logging.WARNING, logger="rewards.remote"):
        assert fn(["<<garbage>>"] * 3 + ["2+2?"], ["x", "x", "x", "4"], answer=["4"] * 4) == [0.5, 0.5, 0.5, 1.0]
    assert "3 of 4 verdicts unreadable (75%)" in caplog.text
    assert fn.pop_metrics() == {"reward/parse_fail_rate": 0.75}
    assert fn.pop_metrics() == {}  # popped
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rewards.remote"):
        fn(["<<garbage>>", "2+2?"], ["x", "4"], answer=["4", "4"])  # half: no warning, still reported
    assert "unreadable" not in caplog.text and fn.pop_metrics() == {"reward/parse_fail_rate": 0.5}


def test_refused_requests_are_none_without_retries(judge_url):
    fn = remote_reward(judge_url, "binary", api_key="wrong", max_retries=3, backoff=0.01)
    assert fn(["q", "q"], ["a", "b"]) == [None, None]
    assert fn.stats.retries == 0 and fn.stats.failed_samples == 2


def test_server_down_gives_none_after_retries():
    fn = remote_reward(f"http://127.0.0.1:{free_port()}", "binary", max_retries=2, backoff=0.01, timeout=2)
    assert fn(["q"] * 3, ["a"] * 3) == [None] * 3
    assert fn.stats.retries == 2


def flaky_app(failures: int, delay_s: float = 0.0) -> FastAPI:
    app = FastAPI()
    state = {"calls": 0}

    @app.post("/v1/rubric_score/batch")
    async def batch(request: Request):
        state["calls"] += 1
        if delay_s:
            await asyncio.sleep(delay_s)
        if state["calls"] <= failures:
            code = 429 if state["calls"] % 2 else 503
            return JSONResponse({"error": {"message": "busy"}}, code, headers={"Retry-After": "0"})
        body = await request.json()
        return {"results": [{"parse_ok": True, "reward": 0.25, "p_first": None} for _ in body["requests"]]}

    app.state.calls = state
    return app


def test_transient_failures_are_retried():
    app = flaky_app(failures=2)
    with serve_in_thread(app) as url:
        fn = remote_reward(url, "binary", max_retries=3, backoff=0.01, max_concurrency=1)
        assert fn(["q"] * 4, ["a"] * 4) == [0.25] * 4
        assert fn.stats.retries == 2 and app.state.calls["calls"] == 3


def test_timeouts_give_none():
    with serve_in_thread(flaky_app(failures=0, delay_s=2.0)) as url:
        fn = remote_reward(url, "binary", max_retries=1, backoff=0.01, timeout=0.3)
        assert fn(["q"], ["a"]) == [None] and fn.stats.retries == 1


def test_loadable_default_reads_env(judge_url, monkeypatch):
    with pytest.raises(RuntimeError, match="POSTTRAIN_REWARD_URL"):
        from_env({})
    fn = from_env({"POSTTRAIN_REWARD_URL": judge_url, "POSTTRAIN_REWARD_MODE": "pointwise",
                   "POSTTRAIN_REWARD_API_KEY": "k", "POSTTRAIN_REWARD_RUBRIC": '{"1": "bad", "3": "good"}'})
    assert fn.mode == "pointwise" and fn(["q"], ["x" * 25]) == [1.0]
    from rewards import remote

    monkeypatch.setattr(remote, "reward", remote.EnvRemoteReward())
    monkeypatch.setenv("POSTTRAIN_REWARD_URL", judge_url)
    monkeypatch.setenv("POSTTRAIN_REWARD_API_KEY", "k")
    assert remote.reward(["q"], ["fine"]) == [1.0]
