"""The reward server on loopback, driven by the official ``openai`` client and by httpx (fake engine).

The fake engine has no model but the real tokenizer, batcher, app, middleware and uvicorn; a second
file (``test_server_tiny.py``) runs the HF engine with a real tiny model.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread

KEY = "sk-test-123"


@pytest.fixture(scope="module")
def server():
    served = load_served_model("fake", base_latency_s=0.02, per_item_latency_s=0.001)
    settings = ServerSettings(api_key=KEY, max_batch_size=8, max_queue=64, timeout_s=20, max_request_bytes=20_000,
                              max_tokens_cap=256, batch_wait_ms=5)
    with serve_in_thread(create_app(served, settings)) as url:
        yield url, served.engine


@pytest.fixture()
def client(server):
    url, _ = server
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=20) as c:
        yield c


@pytest.fixture()
def oai(server):
    url, _ = server
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=20)


def assert_error(resp: httpx.Response, status: int, needle: str) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert needle.lower() in body["error"]["message"].lower(), body
    return body


# -- OpenAI-compatible API through the official client --------------------------------------------

def test_openai_models_completions_and_chat(oai):
    assert [m.id for m in oai.models.list().data] == ["fake-judge"]
    out = oai.completions.create(model="fake-judge", prompt="hello there", max_tokens=8, temperature=0)
    assert out.object == "text_completion" and len(out.choices) == 1
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 8
    many = oai.completions.create(model="fake-judge", prompt=["a", "b"], n=2, max_tokens=64, logprobs=1)
    assert len(many.choices) == 4 and [c.index for c in many.choices] == [0, 1, 2, 3]
    assert many.choices[0].finish_reason == "stop" and many.choices[0].logprobs.token_logprobs
    chat = oai.chat.completions.create(model="fake-judge", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], max_tokens=64)
    assert chat.object == "chat.completion" and chat.choices[0].message.role == "assistant"
    assert "echo" in chat.choices[0].message.content


def test_openai_chat_judge_returns_reasoning_content(oai):
    prompt = "# Assistant A\ngood answer\n\n# Assistant B\nbad\n\n# Your Response\n"
    chat = oai.chat.completions.create(model="fake-judge", messages=[{"role": "user", "content": prompt}],
                                       max_tokens=200, temperature=0)
    msg = chat.choices[0].message
    assert json.loads(msg.content)["score"] == "Assistant A"
    assert msg.model_extra.get("reasoning_content") == "compare"


def test_openai_errors_are_typed(server, oai):
    url, _ = server
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).completions.create(
            model="fake-judge", prompt="x")
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        oai.completions.create(model="gpt-17", prompt="x")
    with pytest.raises(openai.BadRequestError, match="over this server's limit"):
        oai.completions.create(model="fake-judge", prompt="x", max_tokens=100_000)
    with pytest.raises(openai.BadRequestError, match="stream"):
        oai.chat.completions.create(model="fake-judge", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        oai.completions.create(model="fake-judge", prompt="y" * 5000, max_tokens=10)


# -- rubric scoring through httpx -----------------------------------------------------------------

@pytest.mark.parametrize("body,reward,score", [
    ({"mode": "pairwise", "instruction": "Q", "responses": ["a good one", "meh"]}, 1.0, "Assistant A"),
    ({"mode": "pairwise", "instruction": "Q", "responses": ["meh", "a good one"]}, -1.0, "Assistant B"),
    ({"mode": "binary", "instruction": "2+2?", "responses": ["4"]}, 1.0, "true"),
    ({"mode": "binary", "instruction": "2+2?", "responses": ["wrong: 5"]}, 0.0, "false"),
    ({"mode": "pointwise", "instruction": "Q", "responses": ["x" * 25]}, 0.5, "3"),
])
def test_rubric_score_three_formats(client, body, reward, score):
    resp = client.post("/v1/rubric_score", json={**body, "temperature": 0})
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert out["parse_ok"] and out["reward"] == pytest.approx(reward) and out["score_raw"] == score
    assert out["usage"]["prompt_tokens"] > 0 and out["n_samples"] == (2 if body["mode"] == "pairwise" else 1)
    if body["mode"] == "pairwise":
        assert out["p_first"] == pytest.approx((reward + 1) / 2)


def test_rubric_custom_rubric_and_unparsable_is_neutral(client):
    rubric = {"1": "bad", "2": "ok", "3": "good"}
    out = client.post("/v1/rubric_score", json={"mode": "pointwise", "instruction": "Q", "responses": ["x" * 15],
                                                "rubric": rubric, "n_samples": 3}).json()
    assert out["score_raw"] == "2" and out["reward"] == 0.5 and out["n_samples"] == 3
    bad = client.post("/v1/rubric_score", json={"mode": "binary", "instruction": "<<garbage>>",
                                                "responses": ["x"]}).json()
    assert bad["parse_ok"] is False and bad["reward"] == 0.5 and bad["errors"]


def test_rubric_batch(client):
    items = [{"mode": "binary", "instruction": "Q", "responses": [r], "id": f"s{i}"}
             for i, r in enumerate(["fine", "wrong", "ok"])]
    items.append({"mode": "pairwise", "instruction": "Q", "responses": ["b", "good"]})
    resp = client.post("/v1/rubric_score/batch", json={"requests": items})
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert [r["reward"] for r in results] == [1.0, 0.0, 1.0, -1.0] and results[0]["id"] == "s0"


# -- auth, limits, malformed requests -------------------------------------------------------------

def test_auth(server):
    url, _ = server
    assert httpx.get(f"{url}/health").json()["status"] == "ok"  # open
    assert_error(httpx.post(f"{url}/v1/rubric_score", json={}), 401, "missing bearer")
    assert_error(httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer nope"}), 401, "invalid")
    assert_error(httpx.get(f"{url}/v1/models", headers={"Authorization": f"Basic {KEY}"}), 401, "invalid")


@pytest.mark.parametrize("content,status,needle", [
    (b"{not json", 400, "not valid JSON"),
    (b"", 422, "body is required"),
    (b"[1, 2]", 422, "valid dictionary"),
    (json.dumps({"mode": "ranking", "instruction": "Q", "responses": ["a"]}).encode(), 422, "mode"),
    (json.dumps({"mode": "pairwise", "instruction": "Q", "responses": ["a"]}).encode(), 422, "exactly 2"),
    (json.dumps({"mode": "binary", "responses": ["a"]}).encode(), 422, "instruction"),
    (json.dumps({"mode": "binary", "instruction": "Q", "responses": ["a"], "tempreature": 1}).encode(), 422,
     "tempreature"),
    (json.dumps({"mode": "binary", "instruction": "Q", "responses": ["a"], "n_samples": 0}).encode(), 422,
     "n_samples"),
    (json.dumps({"mode": "binary", "instruction": "Q", "responses": ["a"], "max_tokens": 9999}).encode(), 400,
     "limit"),
    (json.dumps({"mode": "binary", "instruction": "Q", "responses": ["a"], "rubric": {"x": "y"}}).encode(), 422,
     "two score values"),
    (json.dumps({"mode": "binary", "instruction": "Q" * 4000, "responses": ["a"]}).encode(), 400,
     "maximum context length"),
])
def test_malformed_rubric_requests(client, content, status, needle):
    resp = client.post("/v1/rubric_score", content=content, headers={"content-type": "application/json"})
    assert_error(resp, status, needle)


@pytest.mark.parametrize("path,body,status,needle", [
    ("/v1/completions", {"prompt": "x", "temperature": -1}, 422, "temperature"),
    ("/v1/completions", {"prompt": [], "max_tokens": 4}, 400, "prompt must be"),
    ("/v1/completions", {"prompt": [10**9]}, 400, "outside the vocabulary"),
    ("/v1/completions", {"prompt": "x", "echo": True}, 400, "not supported"),
    ("/v1/completions", {"prompt": "x", "n": 1000}, 422, "n:"),
    ("/v1/chat/completions", {"messages": []}, 422, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 422, "role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text"),
    ("/v1/rubric_score/batch", {"requests": []}, 422, "requests"),
    ("/v1/completions", {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {
        "name": "o", "schema": {"type": "integr"}}}}, 400, "response_format.json_schema.schema: json_schema is not"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "response_format": {
        "type": "json_schema"}}, 400, "response_format.json_schema.schema is required"),
    ("/v1/completions", {"prompt": "x", "response_format": {"type": "xml"}}, 422, "response_format.type"),
    ("/v1/completions", {"prompt": "x", "response_format": {"type": "json_object"}}, 400,
     "the fake engine (--backend fake) cannot constrain decoding"),
])
def test_malformed_openai_requests(client, path, body, status, needle):
    assert_error(client.post(path, json=body), status, needle)


def test_oversized_requests(client):
    big = {"mode": "binary", "instruction": "Q" * 50_000, "responses": ["a"]}
    assert_error(client.post("/v1/rubric_score", json=big), 413, "at most 20000")

    def chunks():  # no Content-Length: the limit is enforced while streaming the body
        for _ in range(30):
            yield b"x" * 1000

    assert_error(client.post("/v1/rubric_score", content=chunks()), 413, "over 20000")
    many = {"requests": [{"mode": "pairwise", "instruction": "Q", "responses": ["a", "b"]}] * 40}
    assert_error(client.post("/v1/rubric_score/batch", json=many), 413, "queues at most")
    assert client.get("/health").status_code == 200  # the server is still fine


def test_unknown_route_and_method(client):
    assert_error(client.get("/v2/nothing"), 404, "not found")
    assert_error(client.get("/v1/rubric_score"), 405, "method not allowed")


# -- batching, back-pressure, timeouts, metrics ---------------------------------------------------

def test_concurrent_requests_are_batched(server):
    url, engine = server
    before = len(engine.calls)

    async def go():
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=20) as c:
            return await asyncio.gather(*[
                c.post("/v1/rubric_score", json={"mode": "binary", "instruction": f"q{i}", "responses": ["a"]})
                for i in range(24)])

    responses = asyncio.run(go())
    assert all(r.status_code == 200 for r in responses)
    sizes = engine.calls[before:]
    assert sum(sizes) == 24 and max(sizes) > 1 and max(sizes) <= 8


def test_queue_full_gets_429_and_timeout_gets_504():
    slow = load_served_model("fake", base_latency_s=0.3)
    settings = ServerSettings(max_batch_size=1, max_queue=2, timeout_s=5)
    with serve_in_thread(create_app(slow, settings)) as url:
        async def go():
            async with httpx.AsyncClient(base_url=url, timeout=20) as c:
                return await asyncio.gather(*[c.post("/v1/completions", json={"prompt": f"p{i}", "max_tokens": 2})
                                              for i in range(8)])

        responses = asyncio.run(go())
        codes = sorted(r.status_code for r in responses)
        assert set(codes) == {200, 429} and codes.count(200) >= 2
        limited = next(r for r in responses if r.status_code == 429)
        assert limited.headers["retry-after"] == "1" and "queue full" in limited.json()["error"]["message"]
    with serve_in_thread(create_app(load_served_model("fake", base_latency_s=1.0), ServerSettings(timeout_s=0.2))) as url:
        assert_error(httpx.post(f"{url}/v1/completions", json={"prompt": "x"}, timeout=10), 504, "did not finish")
        assert httpx.get(f"{url}/health").json()["status"] == "ok"


def test_metrics(client):
    client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
    text = client.get("/metrics").text
    assert 'posttrain_requests_total{path="/v1/completions",status="200"}' in text
    assert "posttrain_batches_total" in text and "posttrain_queue_depth" in text
    data = client.get("/metrics", params={"format": "json"}).json()
    assert data["batcher"]["batches"] >= 1 and data["batcher"]["failures"] == 0


def test_cli_help_and_bad_flags(capsys):
    from rewards.server.cli import serve_main

    with pytest.raises(SystemExit) as exit_info:
        serve_main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--host" in out and "127.0.0.1" in out and "--max_request_bytes" in out
    assert serve_main(["--max_queue", "0"]) == 2
