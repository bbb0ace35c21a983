"""The server's transformers backend (the project's HFRolloutEngine) with a real tiny model on loopback."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from rewards.server.app import ServerSettings, create_app
from rewards.server.local import serve_in_thread


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
    from rewards.server.backends import load_served_model

    path = tmp_path_factory.mktemp("tiny-rm")
    tokenizer = build_tokenizer()
    build_model(RECIPES.get("reward-mr3"), tokenizer).save_pretrained(path)  # random weights: fast, real path
    tokenizer.save_pretrained(path)
    served = load_served_model("transformers", str(path), max_batch_size=16)
    settings = ServerSettings(max_batch_size=16, style="compact", max_tokens_cap=64, rubric_max_tokens=24)
    with serve_in_thread(create_app(served, settings)) as url:
        yield url, served


def test_the_tokenizer_keeps_whitespace(tiny_server):
    """A tiny-model folder saved without its recipe.json still loads through the one tokenizer loader."""
    url, served = tiny_server
    assert served.tokenizer.decode(served.encode("a b\nc", add_special_tokens=False)) == "a b\nc"
    out = httpx.post(f"{url}/v1/completions", json={"prompt": "a b\nc", "max_tokens": 1, "return_token_ids": True})
    assert out.status_code == 200, out.text
    assert served.tokenizer.decode(out.json()["choices"][0]["prompt_token_ids"]) == "a b\nc"


def test_openai_client_on_a_real_model(tiny_server):
    url, served = tiny_server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    out = client.completions.create(model=served.model_name, prompt=["12+7=", "3-1="], max_tokens=6, seed=1,
                                    logprobs=1)
    assert len(out.choices) == 2 and out.usage.completion_tokens >= 2
    assert all(c.finish_reason in ("stop", "length") for c in out.choices)
    assert len(out.choices[0].logprobs.token_logprobs) <= 6
    greedy = [client.completions.create(model=served.model_name, prompt="12+7=", max_tokens=5,
                                        temperature=0).choices[0].text for _ in range(2)]
    assert greedy[0] == greedy[1]
    chat = client.chat.completions.create(model=served.model_name, max_tokens=5,
                                          messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.role == "assistant"
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=served.model_name, prompt="x" * 250, max_tokens=10)


@pytest.mark.parametrize("body", [
    {"mode": "pairwise", "instruction": "12+7=", "responses": ["19", "18"]},
    {"mode": "binary", "instruction": "12+7=", "responses": ["19"]},
    {"mode": "pointwise", "instruction": "12+7=", "responses": ["19"]},
])
def test_rubric_scoring_on_a_real_model(tiny_server, body):
    url, _ = tiny_server
    out = httpx.post(f"{url}/v1/rubric_score", json=body, timeout=60)
    assert out.status_code == 200, out.text
    result = out.json()
    assert isinstance(result["reward"], float) and result["usage"]["completion_tokens"] > 0
    if not result["parse_ok"]:  # random weights: the verdict is unreadable, and the reward neutral
        assert result["errors"] and result["reward"] in (0.0, 0.5)


def test_concurrent_requests_share_generate_calls(tiny_server):
    url, _ = tiny_server

    async def go():
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            return await asyncio.gather(*[c.post("/v1/completions", json={"prompt": f"{i}+1=", "max_tokens": 4})
                                          for i in range(12)])

    assert all(r.status_code == 200 for r in asyncio.run(go()))
    stats = httpx.get(f"{url}/metrics", params={"format": "json"}).json()["batcher"]
    assert stats["max_batch"] > 1 and stats["failures"] == 0
