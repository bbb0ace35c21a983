"""EntropyLong pieces by hand; batched verification equals the per-(candidate, anchor) baseline; corpus,
retrieval and dedup helpers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from data_pipelines.common.backends import encode_text, tokenize
from data_pipelines.common.corpus import echo_drill, make_corpus, training_text, warm_start
from data_pipelines.common.dedup import minhash_dedup
from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.common.retrieval import BM25Retriever, FaissRetriever, chunk_text
from data_pipelines.entropylong.pipeline import (
    EntropyLong,
    EntropyLongConfig,
    build_chunks,
    evaluate,
    find_anchors,
    relative_reduction,
)
from posttrain.rollout.hf import HFRolloutEngine


def test_find_anchors_by_hand():
    h = [9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0]
    # stats over positions 1..9: mean 13/9, population std ~1.257 -> tau(alpha=2) ~ 3.96
    assert find_anchors(torch.tensor(h), alpha=2.0) == [9]
    assert find_anchors(torch.tensor(h), alpha=2.0, skip_first=0) == [0]  # tau = 2.2 + 2*2.6 ~ 7.4 < 9
    assert find_anchors(torch.tensor([1.0, 1.0, 1.0]), alpha=0.0) == []  # nothing strictly above
    assert find_anchors(torch.tensor([0.0, 1.0, 3.0, 2.0]), alpha=0.0, max_anchors=1) == [2]
    assert relative_reduction(2.0, 0.5) == 0.75 and relative_reduction(0.0, 1.0) == 0.0


def test_corpus_is_deterministic_with_planted_pairs():
    a, b = make_corpus(5, 2, seed=1), make_corpus(5, 2, seed=1)
    assert a.documents == b.documents and len(a.documents) == 12 and len(a.true_pairs()) == 10
    docs = {d["id"]: d["text"] for d in a.documents}
    for dep in a.dependencies:
        assert dep["code"] in docs[dep["doc"]] and dep["code"] in docs[dep["needs"]]
        assert dep["code"][0] == dep["entity"][0].upper()
    import random

    rng = random.Random(0)
    assert all(("seal" in t or "stone" in t) for t in (training_text(rng) for _ in range(50)))
    for far, shuffle in ((False, False), (True, True)):
        first, again = echo_drill(rng, far=far, shuffle=shuffle).split("\n\nagain: ")
        codes = first.removeprefix("seals: ").split(".")[0].split()
        assert sorted(codes) == sorted(again.rstrip(".").split()) and len({c[0] for c in codes}) == len(codes)


def test_warm_start_is_deterministic_and_trains():
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, warm_start_steps=8, batch_size=2)
    models = [build_model(recipe, tok) for _ in range(2)]
    start = [p.detach().clone() for p in models[0].parameters()]
    for m in models:
        warm_start(m, tok, recipe, torch.Generator().manual_seed(0))
    after = list(models[0].parameters())
    assert any(not torch.equal(a, b) for a, b in zip(start, after)) and not models[0].training
    assert all(torch.equal(a, b) for a, b in zip(after, models[1].parameters()))


def test_retrieval_dedup_and_chunking():
    texts = ["the seal K2PQZ of kolmar", "a river runs by the mill", "registry of velnor: the seal V7QXM."]
    assert BM25Retriever(texts).search(["seal V7QXM"], 1)[0][0][0] == 2
    assert FaissRetriever(HashingEmbedder(), texts).search(["velnor seal V7QXM"], 2)[0][0][0] == 2
    keep, dropped = minhash_dedup(["one two three four five six", "one two three four five six", "x y z w v u"],
                                  threshold=0.8, n=3)
    assert keep == [0, 2] and dropped == {1: 0}
    assert chunk_text("aaaa\nbbbb\ncccc", max_chars=9) == ["aaaa\nbbbb", "cccc"]
    assert [len(c) for c in chunk_text("x" * 25, max_chars=10)] == [10, 10, 5]


@pytest.fixture(scope="module")
def pipeline():
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, seed=2)
    backend = HFRolloutEngine(build_model(recipe, tok), tok, max_batch_size=8)
    corpus = make_corpus(4, 2, seed=3)
    chunks = build_chunks(corpus.documents)
    retriever = BM25Retriever([c["text"] for c in chunks])
    config = EntropyLongConfig(alpha=1.0, top_k=3, epsilon=-10.0, target_length=400)  # keep everything
    return EntropyLong(backend, retriever, chunks, config), corpus


def test_batched_verification_equals_per_pair(pipeline):
    el, corpus = pipeline
    docs = [el._root(d["text"]) for d in corpus.documents[:4]]
    scored = el.anchors(docs)
    ents, anchors = [e for e, _ in scored], [a for _, a in scored]
    assert all(anchors)
    cands = el.retrieve([d["id"] for d in corpus.documents[:4]], docs, anchors)
    batched = el.verify(docs, ents, cands)
    naive = el.verify(docs, ents, cands, per_pair=True)
    assert sum(len(c) for c in batched) > 0
    for b_doc, n_doc in zip(batched, naive):
        assert [c["chunk_index"] for c in b_doc] == [c["chunk_index"] for c in n_doc]
        for b, n in zip(b_doc, n_doc):
            assert b["anchors"] == n["anchors"]
            assert b["delta"] == pytest.approx(n["delta"], abs=2e-3)


def test_process_layout_and_budget(pipeline):
    el, corpus = pipeline
    out = el.process(corpus.documents[:3])
    for o, doc in zip(out, corpus.documents[:3]):
        assert o["id"] == doc["id"] and o["num_tokens"] <= 400
        assert all(c["doc_id"] != doc["id"] for c in o["candidates"])  # no self-retrieval
        ids = tokenize(el.backend.tokenizer, o["text"])
        assert len(ids) == o["num_tokens"]
        assert o["text"].endswith(doc["text"][-20:]) or o["num_tokens"] == 400
        for c in o["contexts"]:  # provenance offsets point at the context text
            chunk = next(ch for ch in el.chunks if ch["chunk_id"] == c["chunk_id"])
            assert el.backend.tokenizer.decode(ids[c["offset"]:c["offset"] + c["length"]]) == chunk["text"]
        for a in o["anchors"]:
            assert a["entropy_with_contexts"] is None or a["entropy_with_contexts"] >= 0
    again = el.process(corpus.documents[:3])
    assert [o["text"] for o in again] == [o["text"] for o in out]  # seeded shuffle: repeatable
    report = evaluate(out, corpus.true_pairs())
    assert report["roots"] == 3 and report["predicted_pairs"] >= report["true_positives"]
    with pytest.raises(ValueError, match="text"):
        el.process([{"id": "x", "text": ""}])


def test_cache_lm_copies_from_context():
    from data_pipelines.common.cachelm import CacheLMScorer
    from posttrain.models.tiny import build_tokenizer

    lm = CacheLMScorer(build_tokenizer(), ["a courier from velnor showed the seal VABCD."] * 3)
    use = "a courier from kolmar showed the seal K7QX2."
    alone = lm.score([encode_text(lm.tokenizer, use)])[0].entropies
    with_def = lm.score([encode_text(lm.tokenizer, "registry of kolmar: the seal K7QX2.\n\n" + use)])[0].entropies
    i = use.index("K7QX2") + 1  # second code character
    assert alone[i] > 2.0 and with_def[-len(use) + i] < 0.5
