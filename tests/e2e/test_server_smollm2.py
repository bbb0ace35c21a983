"""``posttrain serve --model smollm2-135m``: the packaged alias resolves, the chat goes through the one chat
renderer with the model's own template, and the real pretrained model answers over the OpenAI API; the
HTTP engine drives the same server with token ids."""

from __future__ import annotations

import openai
import pytest

from posttrain.engines.base import SamplingParams
from posttrain.engines.http import OpenAIHTTPEngine
from posttrain.models.chat import render_chat
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread


@pytest.fixture(scope="module")
def served(smollm2):
    return load_served_model("transformers", "smollm2-135m", max_batch_size=4)


def test_alias_serves_the_pretrained_model(served, smollm2):
    assert served.model_name == "smollm2-135m" and served.default_style == "mr3"
    assert served.max_context == 8192 and served.tokenizer.chat_template
    question = [{"role": "user", "content": "What is the capital of France?"}]
    with serve_in_thread(create_app(served, ServerSettings(max_batch_size=4))) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        chat = client.chat.completions.create(model="smollm2-135m", messages=question, max_tokens=12, temperature=0)
        assert "Paris" in chat.choices[0].message.content
        prompt = served.encode(render_chat(served.tokenizer, question), add_special_tokens=False)
        with OpenAIHTTPEngine(url, served.tokenizer, model="smollm2-135m") as engine:
            out = engine.generate([prompt], SamplingParams(max_new_tokens=12, temperature=0.0))
        assert out.texts[0] == chat.choices[0].message.content
