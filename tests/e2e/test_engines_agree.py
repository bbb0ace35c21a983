"""One engine protocol, three ways to the same model: the HF engine, the reward server over HTTP (with the
HF engine, and with the vLLM engine behind it, ``--backend vllm``) and the vLLM engine in-process (vLLM's
CPU build) decode the same model greedily, also under a JSON schema; vLLM's top-k scores match the HF engine's
exact ones where top-k is exact.

Greedy decodes are compared through log-probs of each engine's own tokens (``sync_harness.assert_greedy_of``:
the HF model scores them as the engine did, and each is its argmax up to a near-tie), never as token
sequences: two kernels may break a near-tie of the same weights differently."""

from __future__ import annotations

import pytest
import torch

from posttrain.engines.base import SamplingParams, ScoringEngine
from posttrain.engines.http import OpenAIHTTPEngine
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread
from tests.e2e.sync_harness import assert_greedy_of
from tests.e2e.tiny_llama import save_tiny_llama

TEXTS = ["registry of kupam: the seal", "12+7=", "a b\nc", "hello"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), num_layers=2, seed=11)


@pytest.fixture(scope="module")
def hf_served(model_dir):
    return load_served_model("transformers", model_dir, max_batch_size=8)


@pytest.fixture(scope="module")
def vllm_served(model_dir):
    pytest.importorskip("vllm")
    return load_served_model("vllm", model_dir, dtype="fp32", max_model_len=256)


@pytest.fixture(scope="module")
def prompts(hf_served) -> list[list[int]]:
    tok = hf_served.tokenizer
    return [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]


def _other_ways(hf_served, vllm_served, prompts, params) -> dict:
    """The rollouts of vLLM in-process and of the server (over the HF and the vLLM engine) through the
    HTTP client."""
    got = {"vllm": vllm_served.engine.generate(prompts, params)}
    settings = ServerSettings(max_batch_size=8, max_tokens_cap=64)
    for label, served in (("server+hf", hf_served), ("server+vllm", vllm_served)):
        with serve_in_thread(create_app(served, settings)) as url, \
                OpenAIHTTPEngine(url, served.tokenizer, model=served.model_name) as client:
            got[label] = client.generate(prompts, params)
    return got


def test_every_way_decodes_the_model_greedily(hf_served, vllm_served, prompts):
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    model, tokenizer = hf_served.engine.model, hf_served.tokenizer
    assert vllm_served.max_context == 256 and vllm_served.tokenizer.decode(prompts[2][1:]) == "a b\nc"
    ways = {"hf": hf_served.engine.generate(prompts, greedy), **_other_ways(hf_served, vllm_served, prompts, greedy)}
    for label, out in ways.items():
        assert out.prompt_ids == prompts and any(len(c) >= 2 for c in out.completion_ids), label
        assert out.texts == tokenizer.batch_decode(out.completion_ids, skip_special_tokens=True), label
        assert_greedy_of(model, out)


def test_every_way_decodes_json_schema_greedily(hf_served, vllm_served, prompts):
    """Constrained greedy decoding (our xgrammar mask, vLLM's structured outputs, and either behind the
    server's ``response_format``) gives valid documents, greedy under the HF model's masked distribution."""
    import json

    schema = {"type": "integer", "minimum": 0, "maximum": 99999}  # no whitespace: ends within the budget
    params = SamplingParams(max_new_tokens=12, temperature=0.0, json_schema=json.dumps(schema))
    hf = hf_served.engine
    ways = {"hf": hf.generate(prompts, params), **_other_ways(hf_served, vllm_served, prompts, params)}
    grammar = hf._schema_compiler.compile(params.json_schema, "test")
    for label, out in ways.items():
        assert all(isinstance(json.loads(text), int) and reason == "stop"
                   for text, reason in zip(out.texts, out.finish_reasons)), label
        assert_greedy_of(hf.model, out, grammar, [hf_served.tokenizer.eos_token_id])


def test_vllm_topk_scores_match_the_exact_ones(hf_served, vllm_served, prompts):
    engine = vllm_served.engine
    assert isinstance(engine, ScoringEngine)
    exact = hf_served.engine.score(prompts, mass_above=True, full=True)
    built_top_k = engine.score_top_k
    for k in (built_top_k, 3):
        engine.score_top_k = k
        try:
            approx = engine.score(prompts, mass_above=True)
        finally:
            engine.score_top_k = built_top_k
        checked = 0
        for e, a in zip(exact, approx):
            assert a.token_ids == e.token_ids and not a.exact
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(e.logprobs), atol=1e-3)
            # top-k plus one tail atom never exceeds the exact entropy; the mass above never exceeds the exact
            assert all(x <= y + 1e-3 for x, y in zip(a.entropies, e.entropies))
            assert all(x <= y + 1e-3 for x, y in zip(a.mass_above, e.mass_above))
            ranks = (e.distributions > torch.tensor(e.logprobs)[:, None]).sum(-1)
            for rank, x, y in zip(ranks.tolist(), a.mass_above, e.mass_above):
                if rank < k:  # the observed token is in the top-k: every token above it was seen
                    assert x == pytest.approx(y, abs=1e-3)
                    checked += 1
        assert checked > 0
    with pytest.raises(ValueError, match="full distributions need the HF engine"):
        engine.score(prompts, full=True)
