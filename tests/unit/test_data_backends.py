"""The data pipelines' engines: exact batched HF scoring (length-sorted, token-bounded batches), the text
conventions (BOS prepended), and ``load_backend`` building the project's engines from every spec
(folder, ``smollm2-135m``, ``cachelm``, an OpenAI-compatible URL)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from data_pipelines.common import backends
from data_pipelines.common.backends import (
    encode_text,
    engine_label,
    load_backend,
    load_backend_tokenizer,
    tokenize,
)
from data_pipelines.common.cachelm import CacheLMScorer
from posttrain.engines.base import GenerationEngine, SamplingParams, ScoringEngine
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.hf_scoring import length_sorted_batches
from posttrain.engines.http import OpenAIHTTPEngine
from posttrain.engines.scores import mass_above_from_logits, tied_mass_from_logits, topk_entropy

pytestmark = pytest.mark.heavy  # builds and loads models, starts a loopback server


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


@pytest.fixture(scope="module")
def tiny_dir(tiny, tmp_path_factory) -> str:
    model, tok = tiny
    path = tmp_path_factory.mktemp("tiny-corpus-lm")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_topk_helpers_by_hand():
    assert topk_entropy([math.log(0.5), math.log(0.5)]) == pytest.approx(math.log(2))
    # tail mass 0.5 counted as one atom
    assert topk_entropy([math.log(0.5)]) == pytest.approx(math.log(2))
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3]]))
    assert mass_above_from_logits(logits, torch.tensor([0])).item() == pytest.approx(0.9)


def test_length_sorted_batches_by_hand():
    # longest first (6, 5, 3, 2, 1); a batch ends at 2 rows or when rows x its longest would pass 10 tokens:
    # [6] (6+5 -> 2 x 6 = 12), [5, 3] (2 x 5 = 10 fits), [2, 1]
    assert length_sorted_batches([3, 6, 2, 5, 1], max_batch_size=2, max_batch_tokens=10) == [[1], [3, 0], [2, 4]]
    assert length_sorted_batches([4, 4, 4], max_batch_size=8, max_batch_tokens=100) == [[0, 1, 2]]
    assert length_sorted_batches([20], max_batch_size=8, max_batch_tokens=10) == [[0]]  # alone if too long


def test_text_conventions(tiny):
    _, tok = tiny
    assert tokenize(tok, "a b\nc") == tok("a b\nc", add_special_tokens=False)["input_ids"]
    assert encode_text(tok, "a b\nc") == [tok.bos_token_id] + tokenize(tok, "a b\nc")
    assert tok.decode(tokenize(tok, "a b\nc")) == "a b\nc"


def test_hf_batched_scores_equal_single_forward(tiny):
    model, tok = tiny
    engine = HFRolloutEngine(model, tok, max_batch_size=3, max_batch_tokens=64)
    seqs = [encode_text(tok, t) for t in ["hello world", "a", "the seal V7QXM.", "xyz" * 7, "registry of kupam"]]
    scores = engine.score(seqs, entropy=True, mass_above=True, full=True)
    for seq, s in zip(seqs, scores):
        ids = torch.tensor([seq])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].float()
        logp = logits.log_softmax(-1)
        target = ids[0, 1:]
        assert s.token_ids == target.tolist()
        assert torch.allclose(torch.tensor(s.logprobs), logp.gather(-1, target[:, None])[:, 0], atol=1e-4)
        assert torch.allclose(torch.tensor(s.entropies), -(logp.exp() * logp).sum(-1), atol=1e-4)
        assert torch.allclose(torch.tensor(s.mass_above), mass_above_from_logits(logits, target), atol=1e-4)
        assert torch.allclose(torch.tensor(s.tied_mass), tied_mass_from_logits(logits, target), atol=1e-4)
        assert torch.allclose(s.distributions, logp, atol=1e-4) and s.exact
    plain = engine.score(seqs[:1], entropy=False)[0]
    assert plain.entropies is None and plain.mass_above is None and plain.distributions is None
    assert plain.tied_mass is None
    with pytest.raises(TypeError, match="sequence 0 is text"):
        engine.score(["hello"])
    with pytest.raises(ValueError, match="sequence 1 has 1 token"):
        engine.score([seqs[0], [tok.bos_token_id]])


def test_load_backend_builds_the_project_engines(tiny_dir, smollm2):
    hf = load_backend(tiny_dir, batch_size=4)
    assert isinstance(hf, HFRolloutEngine) and hf.max_batch_size == 4
    assert isinstance(hf, GenerationEngine) and isinstance(hf, ScoringEngine)
    assert engine_label(hf) == f"HFRolloutEngine({tiny_dir})"
    out = hf.generate([encode_text(hf.tokenizer, "registry of")], SamplingParams(max_new_tokens=6, seed=0))
    assert len(out.completion_ids[0]) == len(out.logprobs[0]) > 0

    smol = load_backend("smollm2-135m")
    assert isinstance(smol, HFRolloutEngine) and smol.tokenizer.name_or_path == smollm2
    (s,) = smol.score([encode_text(smol.tokenizer, "The capital of France is Paris.")])
    assert len(s.logprobs) == len(tokenize(smol.tokenizer, "The capital of France is Paris."))

    cache = load_backend("cachelm")
    assert isinstance(cache, CacheLMScorer) and isinstance(cache, ScoringEngine)
    assert not isinstance(cache, GenerationEngine)
    (c,) = cache.score([encode_text(cache.tokenizer, "the seal VABCD. the seal VABCD.")], mass_above=True)
    assert c.exact and len(c.mass_above) == len(c.logprobs)


def test_load_backend_http_needs_a_tokenizer(tiny_dir):
    engine = load_backend(f"http://127.0.0.1:1/v1#{tiny_dir}", top_k=50)
    assert isinstance(engine, OpenAIHTTPEngine) and engine.top_k == 20 and engine.model == tiny_dir
    assert engine.url == "http://127.0.0.1:1/v1/completions"
    named = load_backend("http://127.0.0.1:1#served-name", tokenizer=tiny_dir)
    assert named.model == "served-name" and named.tokenizer.name_or_path == tiny_dir
    with pytest.raises(ValueError, match="needs the served model's tokenizer"):
        load_backend("http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="cannot load the tokenizer 'no-such-model'"):
        load_backend("http://127.0.0.1:1/v1#no-such-model")


@pytest.mark.parametrize("spec", ["tiny_dir", "smollm2-135m", "cachelm", "http://127.0.0.1:1/v1#tiny_dir", None])
def test_load_backend_tokenizer_is_the_engines_without_its_weights(tiny_dir, smollm2, spec, monkeypatch):
    spec = spec.replace("tiny_dir", tiny_dir) if spec else spec
    if spec is None:
        # no spec resolves to the embedded corpus LM's folder through build_tiny, for the tokenizer and the engine
        # alike; a fresh clone would train that model first (minutes), which this check of the tokenizer path
        # does not need: the module's small model of the same recipe stands in for the build
        built = []
        monkeypatch.setattr(backends, "build_tiny", lambda recipe, cache_dir=None: built.append(recipe) or tiny_dir)
    alone = load_backend_tokenizer(spec)
    engine = load_backend(spec)
    text = "The seal of Velnor is V7QXM."
    assert alone.get_vocab() == engine.tokenizer.get_vocab()
    assert tokenize(alone, text) == tokenize(engine.tokenizer, text)
    assert type(alone) is type(engine.tokenizer)
    if spec is None:
        assert built == [backends.EMBEDDED_RECIPE] * 2
