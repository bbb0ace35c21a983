"""OpenAIHTTPEngine: generation through our own server on loopback equals the HF engine's (also under a JSON
schema, sent as ``response_format``), per-prompt seeds, top-k scoring against a stand-in server (exact when k = |V|), retries, timeouts and errors; an aborted completion is retried once, then refused."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch
from fastapi import FastAPI, Request  # module level: the handler's string annotations must resolve here
from fastapi.responses import JSONResponse

from posttrain.common.http import RequestFailed
from posttrain.engines.base import GenerationEngine, SamplingParams, ScoringEngine, sample_seed, sample_seeds
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.http import OpenAIHTTPEngine, completions_url
from posttrain.engines.weight_sync import free_port
from rewards.server.app import ServerSettings, create_app
from rewards.server.local import serve_in_thread


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, seed=5)
    model = build_model(recipe, tok).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(6.0)  # a peaked distribution: greedy ties are unlikely
    return model, tok


@pytest.fixture(scope="module")
def our_server(tiny, tmp_path_factory):
    """``posttrain serve``'s app around the HF engine of the tiny model."""
    from rewards.server.backends import load_served_model

    model, tok = tiny
    path = tmp_path_factory.mktemp("tiny-lm")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    served = load_served_model("transformers", str(path), max_batch_size=8)
    with serve_in_thread(create_app(served, ServerSettings(max_batch_size=8, max_tokens_cap=64))) as url:
        yield url, served


def _ids(tok, texts: list[str]) -> list[list[int]]:
    return [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_seed_and_url_helpers():
    assert sample_seed(7, 0) == sample_seed(7, 0)
    seeds = {sample_seed(s, i) for s in range(5) for i in range(5)}
    assert len(seeds) == 25 and all(0 <= s < 2**31 for s in seeds)
    assert completions_url("http://h:1/v1/") == "http://h:1/v1/completions"
    assert completions_url("http://h:1") == "http://h:1/v1/completions"


def test_generation_through_our_server_equals_the_hf_engine(tiny, our_server):
    model, tok = tiny
    url, served = our_server
    prompts = _ids(tok, ["12+7=", "registry of", "a"])
    local = HFRolloutEngine(model, tok, max_batch_size=8)
    with OpenAIHTTPEngine(url, tok, model=served.model_name, concurrency=3) as remote:
        assert isinstance(remote, GenerationEngine) and isinstance(remote, ScoringEngine)
        greedy = SamplingParams(max_new_tokens=10, temperature=0.0)
        want, got = local.generate(prompts, greedy), remote.generate(prompts, greedy)
        assert got.completion_ids == want.completion_ids and got.texts == want.texts
        assert got.finish_reasons == want.finish_reasons and got.prompt_ids == prompts
        for a, b in zip(got.logprobs, want.logprobs):
            assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-4)

        sampled = SamplingParams(max_new_tokens=12, temperature=1.0, seed=3)
        copies = [prompts[1]] * 4
        first, again = remote.generate(copies, sampled), remote.generate(copies, sampled)
        assert first.completion_ids == again.completion_ids  # repeatable with a seed
        assert len({tuple(c) for c in first.completion_ids}) > 1  # copies of one prompt get their own seeds
        # copy 2 was sent with seed sample_seeds(3, copies)[2]; the server seeds a request's sample 0 from it in turn
        seed = sample_seed(sample_seeds(3, copies)[2], 0)
        one = local.generate([prompts[1]], dataclasses.replace(sampled, seed=seed))
        assert first.completion_ids[2] == one.completion_ids[0]


def test_json_schema_through_our_server_equals_the_hf_engine(tiny, our_server):
    """The schema travels as ``response_format``; the server's engine decodes under it, as the local one."""
    import json

    model, tok = tiny
    url, served = our_server
    prompts = _ids(tok, ["12+7=", "registry of", "a"])
    schema = json.dumps({"enum": ["north", "south", "east", "west"]})
    for params in (SamplingParams(max_new_tokens=10, temperature=0.0, json_schema=schema),
                   SamplingParams(max_new_tokens=10, temperature=1.0, seed=1, json_schema=schema)):
        with OpenAIHTTPEngine(url, tok, model=served.model_name, concurrency=1) as remote:
            got = remote.generate(prompts, params)
        # prompt i went out with seed sample_seed(1, i), which the server reseeds its sample 0 from
        want = [HFRolloutEngine(model, tok).generate([p], dataclasses.replace(
            params, seed=None if params.seed is None else sample_seed(sample_seed(1, i), 0))) for i, p in
            enumerate(prompts)]
        assert got.completion_ids == [w.completion_ids[0] for w in want]
        assert all(json.loads(text) in ("north", "south", "east", "west") for text in got.texts)
    bad = SamplingParams(max_new_tokens=4, json_schema='{"type": "integer", "minimum": 5, "maximum": 1}')
    with pytest.raises(RuntimeError, match="HTTP 400: .*HFRolloutEngine: xgrammar cannot compile json_schema"):
        OpenAIHTTPEngine(url, tok, model=served.model_name).generate(prompts[:1], bad)


def test_refused_requests_name_the_url_and_are_not_retried(tiny, our_server):
    _, tok = tiny
    url, served = our_server
    engine = OpenAIHTTPEngine(url, tok, model=served.model_name, max_retries=3, backoff_s=0.01)
    with pytest.raises(RuntimeError, match=r"/v1/completions: HTTP 400: .*outside the vocabulary"):
        engine.generate([[len(tok) + 5]], SamplingParams(max_new_tokens=2))
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate([[1], []], SamplingParams(max_new_tokens=2))
    with pytest.raises(ValueError, match="full distributions need the HF engine"):
        engine.score([[1, 2]], full=True)
    with pytest.raises(ValueError, match="sequence 0 has 1 token"):
        engine.score([[1]])


# ---------------------------------------------------------------- stand-in OpenAI-compatible server
def _stand_in(model, tok, fail_first: int = 0, delay_s: float = 0.0, finish_reasons: tuple[str, ...] = ()) -> FastAPI:
    """Scores echo requests with the model (top-k as asked, token strings as keys, like vLLM with
    ``return_tokens_as_token_ids``) and records every body; fails the first requests with 503; the first
    generations end with ``finish_reasons`` in turn (vLLM answers an aborted request 200, ``"abort"``), the
    rest with ``"length"``."""
    app = FastAPI()
    app.state.bodies = []
    app.state.failures_left = fail_first
    app.state.finish_reasons = list(finish_reasons)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        app.state.bodies.append(body)
        if delay_s:
            await asyncio.sleep(delay_s)
        if app.state.failures_left > 0:
            app.state.failures_left -= 1
            return JSONResponse({"error": "overloaded"}, status_code=503)
        ids = body["prompt"]
        if not body.get("echo"):  # generation: answer with a fixed completion
            reason = app.state.finish_reasons.pop(0) if app.state.finish_reasons else "length"
            return {"choices": [{"text": "xy", "token_ids": [5, 6], "finish_reason": reason,
                                 "logprobs": {"token_logprobs": [-0.5, -0.25]}}]}
        k = int(body["logprobs"])
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)
        names = [f"token_id:{i}" for i in ids]
        token_lps, tops = [None], [None]
        for t in range(1, len(ids)):
            row = logp[t - 1]
            token_lps.append(float(row[ids[t]]))
            values, index = row.topk(k)
            top = {f"token_id:{i}": float(v) for v, i in zip(values.tolist(), index.tolist())}
            top.setdefault(names[t], float(row[ids[t]]))  # vLLM adds the observed token when outside the top-k
            tops.append(top)
        return {"choices": [{"text": "", "finish_reason": "length",
                             "logprobs": {"tokens": names, "token_logprobs": token_lps, "top_logprobs": tops}}]}

    return app


def test_topk_scores_retries_and_seeds(tiny):
    model, tok = tiny
    local = HFRolloutEngine(model, tok)
    app = _stand_in(model, tok, fail_first=2)
    with serve_in_thread(app) as url:
        seqs = _ids(tok, ["the seal V7QXM.", "hello world"])
        exact = local.score(seqs, mass_above=True)
        full = OpenAIHTTPEngine(f"{url}/v1", tok, top_k=len(tok), concurrency=2, backoff_s=0.01)
        got = full.score(seqs, mass_above=True)
        assert len(app.state.bodies) == 2 + len(seqs)  # two 503s retried
        assert all(b["echo"] and b["logprobs"] == len(tok) for b in app.state.bodies)
        for e, g in zip(exact, got):
            assert not g.exact and g.token_ids == e.token_ids
            # with k = |V| the "approximation" is exact
            assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(e.logprobs), atol=1e-4)
            assert torch.allclose(torch.tensor(g.entropies), torch.tensor(e.entropies), atol=1e-3)
            assert torch.allclose(torch.tensor(g.mass_above), torch.tensor(e.mass_above), atol=1e-4)
            assert torch.allclose(torch.tensor(g.tied_mass), torch.tensor(e.tied_mass), atol=1e-4)
        top5 = OpenAIHTTPEngine(url, tok, top_k=5).score(seqs, mass_above=True)
        for e, g in zip(exact, top5):  # top-5 + one tail atom underestimates the entropy and the mass above
            assert all(a <= b + 1e-4 for a, b in zip(g.entropies, e.entropies))
            assert all(a <= b + 1e-4 for a, b in zip(g.mass_above, e.mass_above))
            assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(e.logprobs), atol=1e-4)

        app.state.bodies.clear()
        params = SamplingParams(max_new_tokens=2, seed=7, top_k=3, stop_token_ids=(9,))
        out = OpenAIHTTPEngine(url, tok, weight_version=4).generate([[1, 2]] * 3, params)
        assert out.completion_ids == [[5, 6]] * 3 and out.logprobs == [[-0.5, -0.25]] * 3
        assert out.weight_version == 4 and out.finish_reasons == ["length"] * 3
        # three copies of one prompt: the seeds the vLLM engines give a group (sample_seed(7, 0) + j for copy j)
        assert sorted(b["seed"] for b in app.state.bodies) == [sample_seed(7, 0) + j for j in range(3)]
        assert all(b["top_k"] == 3 and b["stop_token_ids"] == [9] and b["return_token_ids"]
                   and "response_format" not in b for b in app.state.bodies)
        OpenAIHTTPEngine(url, tok).generate([[1, 2]], dataclasses.replace(params, json_schema='{"type": "integer"}'))
        assert app.state.bodies[-1]["response_format"] == {  # OpenAI's form, which vLLM's server takes too
            "type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "integer"}}}


def test_dead_and_slow_servers_fail_after_retries(tiny):
    _, tok = tiny
    dead = OpenAIHTTPEngine(f"http://127.0.0.1:{free_port()}", tok, max_retries=1, backoff_s=0.01)
    with pytest.raises(RuntimeError, match=r"http://127\.0\.0\.1:\d+/v1/completions: request failed after 2 attempts"):
        dead.score([[1, 2]])
    model, _ = tiny
    app = _stand_in(model, tok, delay_s=1.0)
    with serve_in_thread(app) as url:
        slow = OpenAIHTTPEngine(url, tok, max_retries=1, backoff_s=0.01, timeout_s=0.2)
        with pytest.raises(RuntimeError, match="after 2 attempts: ReadTimeout"):
            slow.generate([[1, 2]], SamplingParams(max_new_tokens=2))
        assert len(app.state.bodies) == 2


def test_an_aborted_completion_is_retried_once_then_refused(tiny):
    """vLLM answers an aborted request 200 with a partial output and ``finish_reason="abort"``: no rollout."""
    model, tok = tiny
    params = SamplingParams(max_new_tokens=2)
    app = _stand_in(model, tok, finish_reasons=("abort",))
    with serve_in_thread(app) as url, OpenAIHTTPEngine(url, tok) as engine:
        assert engine.generate([[1, 2]], params).finish_reasons == ["length"]
        assert len(app.state.bodies) == 2  # the aborted answer, then the good one
        app.state.finish_reasons = ["abort", "abort"]
        with pytest.raises(RequestFailed, match=rf"{url}/v1/completions: prompt 0: .*finish_reason 'abort' in all 2"):
            engine.generate([[1, 2]], params)
        assert len(app.state.bodies) == 4 and not app.state.finish_reasons
