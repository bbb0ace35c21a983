"""The project's vLLM engine behind the same server on a GPU (``--backend vllm``; skipped without CUDA or
without vllm). The CPU build runs the same path in ``test_engines_agree.py``."""

from __future__ import annotations

import os

import httpx
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    pytest.importorskip("vllm")
    from rewards.server.app import ServerSettings, create_app
    from rewards.server.backends import load_served_model
    from rewards.server.local import serve_in_thread

    model = os.environ.get("POSTTRAIN_VLLM_TEST_MODEL")
    if not model:  # the tiny reward model architecture (qwen2), random weights, saved locally
        from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

        path = tmp_path_factory.mktemp("tiny-vllm")
        tokenizer = build_tokenizer()
        build_model(RECIPES.get("reward-mr3"), tokenizer).save_pretrained(path)
        tokenizer.save_pretrained(path)
        model = str(path)
    served = load_served_model("vllm", model)
    with serve_in_thread(create_app(served, ServerSettings(style="compact", max_tokens_cap=64)),
                         startup_timeout_s=600) as url:
        yield url, served


def test_vllm_completions_and_rubric(vllm_server):
    import openai

    url, served = vllm_server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    out = client.completions.create(model=served.model_name, prompt=["12+7=", "3-1="], max_tokens=6, logprobs=1)
    assert len(out.choices) == 2 and out.usage.completion_tokens > 0
    resp = httpx.post(f"{url}/v1/rubric_score", json={"mode": "pairwise", "instruction": "12+7=",
                                                       "responses": ["19", "18"], "max_tokens": 24}, timeout=120)
    assert resp.status_code == 200 and isinstance(resp.json()["reward"], float)
