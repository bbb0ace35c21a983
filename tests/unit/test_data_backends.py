"""Backends: exact batched HF scoring, generation through HFRolloutEngine, the OpenAI-HTTP client against a
stand-in server on loopback (top-k approximation, retries), and the vLLM backend (GPU only)."""

from __future__ import annotations

import dataclasses
import math
import socket
import threading
import time

import pytest
import torch
from fastapi import FastAPI, Request  # module level: the handler's string annotations must resolve here
from fastapi.responses import JSONResponse

from data_pipelines.common.backends import HFBackend, OpenAIHTTPBackend
from posttrain.rollout.base import SamplingParams
from posttrain.rollout.scores import mass_above_from_logits, topk_entropy


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, seed=5)
    model = build_model(recipe, tok)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(6.0)
    return model, tok


def test_topk_helpers_by_hand():
    assert topk_entropy([math.log(0.5), math.log(0.5)]) == pytest.approx(math.log(2))
    # tail mass 0.5 counted as one atom
    assert topk_entropy([math.log(0.5)]) == pytest.approx(math.log(2))
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3]]))
    assert mass_above_from_logits(logits, torch.tensor([0])).item() == pytest.approx(0.9)


def test_hf_batched_scores_equal_single_forward(tiny):
    model, tok = tiny
    backend = HFBackend(model, tok, batch_size=3, max_batch_tokens=64)
    texts = ["hello world", "a", "the seal V7QXM.", "xyz" * 7, "registry of kupam"]
    scores = backend.score(texts, entropy=True, mass_above=True, full=True)
    for text, s in zip(texts, scores):
        ids = torch.tensor([[tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].float()
        logp = logits.log_softmax(-1)
        target = ids[0, 1:]
        assert s.token_ids == target.tolist()
        assert torch.allclose(torch.tensor(s.logprobs), logp.gather(-1, target[:, None])[:, 0], atol=1e-4)
        assert torch.allclose(torch.tensor(s.entropies), -(logp.exp() * logp).sum(-1), atol=1e-4)
        assert torch.allclose(torch.tensor(s.mass_above), mass_above_from_logits(logits, target), atol=1e-4)
        assert s.distributions.shape == logp.shape and s.exact


def test_hf_generate_uses_rollout_engine(tiny):
    from posttrain.rollout.hf import HFRolloutEngine

    model, tok = tiny
    backend = HFBackend(model, tok, batch_size=4)
    params = SamplingParams(max_new_tokens=12, seed=3)
    gens = backend.generate(["abc", "hello"], params)
    ref = HFRolloutEngine(model, tok, max_batch_size=4).generate(
        [[tok.bos_token_id] + tok(p, add_special_tokens=False)["input_ids"] for p in ["abc", "hello"]], params)
    assert [g.token_ids for g in gens] == ref.completion_ids and [g.text for g in gens] == ref.texts


# ---------------------------------------------------------------- stand-in OpenAI-compatible server
def _serve(model, tok, fail_first: int):
    import uvicorn

    app = FastAPI()
    state = {"calls": 0}
    names = tok.convert_ids_to_tokens(list(range(len(tok))))

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        state["calls"] += 1
        if state["calls"] <= fail_first:
            return JSONResponse({"error": "overloaded"}, status_code=503)
        ids = body["prompt"] if isinstance(body["prompt"], list) else tok(body["prompt"])["input_ids"]
        k = int(body.get("logprobs") or 0)
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)
        token_lps, tops = [None], [None]
        for t in range(1, len(ids)):
            row = logp[t - 1]
            token_lps.append(float(row[ids[t]]))
            vals, idx = row.topk(k)
            tops.append({names[i]: float(v) for v, i in zip(vals.tolist(), idx.tolist())})
        return {"choices": [{"text": "", "finish_reason": "length",
                             "logprobs": {"tokens": [names[i] for i in ids], "token_logprobs": token_lps,
                                          "top_logprobs": tops}}]}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    return server, thread, port, state


def test_openai_http_backend_topk_and_retries(tiny):
    model, tok = tiny
    server, thread, port, state = _serve(model, tok, fail_first=2)
    try:
        texts = ["the seal V7QXM.", "hello world"]
        exact = HFBackend(model, tok).score(texts, mass_above=True)
        full = OpenAIHTTPBackend(f"http://127.0.0.1:{port}/v1", "tiny", top_k=len(tok), tokenizer=tok,
                                 concurrency=2, backoff_s=0.01)
        got = full.score(texts, mass_above=True)
        assert state["calls"] == 2 + len(texts)  # two 503s retried
        for e, g in zip(exact, got):
            assert not g.exact and g.token_ids == e.token_ids
            # with k = |V| the "approximation" is exact
            assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(e.logprobs), atol=1e-4)
            assert torch.allclose(torch.tensor(g.entropies), torch.tensor(e.entropies), atol=1e-3)
            assert torch.allclose(torch.tensor(g.mass_above), torch.tensor(e.mass_above), atol=1e-4)
        top5 = OpenAIHTTPBackend(f"http://127.0.0.1:{port}", "tiny", top_k=5, tokenizer=tok).score(texts)
        for e, g in zip(exact, top5):  # top-5 + one tail atom underestimates the entropy
            assert all(a <= b + 1e-4 for a, b in zip(g.entropies, e.entropies))
        dead = OpenAIHTTPBackend("http://127.0.0.1:1", "tiny", max_retries=1, backoff_s=0.01, tokenizer=tok)
        with pytest.raises(RuntimeError, match="after 2 attempts"):
            dead.score(["ab"])
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.mark.gpu
def test_vllm_backend_scores_and_generates(tmp_path):
    pytest.importorskip("vllm")
    from data_pipelines.common.backends import VLLMBackend
    from posttrain.models.tiny import build_tiny

    path = build_tiny("corpus-lm", cache_dir=tmp_path)
    backend = VLLMBackend(str(path), top_k=20, gpu_memory_utilization=0.3)
    s = backend.score(["registry of kupam: the seal KBY1A."], mass_above=True)[0]
    assert len(s.logprobs) == len(s.token_ids) and not s.exact
    g = backend.generate(["registry of"], SamplingParams(max_new_tokens=8, seed=0))[0]
    assert g.token_ids and len(g.logprobs) == len(g.token_ids)
