"""EntropyLong pieces by hand; batched verification equals the per-(candidate, anchor) baseline; corpus,
retrieval and dedup helpers."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from data_pipelines.common.backends import encode_text, tokenize
from data_pipelines.common.corpus import echo_drill, make_corpus, prose_fact, training_text, warm_start
from data_pipelines.common.dedup import minhash_dedup
from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.common.retrieval import BM25Retriever, FaissRetriever, chunk_text
from data_pipelines.entropylong.evaluation import evaluate
from data_pipelines.entropylong.index import build_chunks
from data_pipelines.entropylong.pipeline import (
    EntropyLong,
    EntropyLongConfig,
    find_anchors,
    relative_reduction,
    select_contexts,
)
from posttrain.engines.hf import HFRolloutEngine

pytestmark = pytest.mark.heavy  # builds tiny models and runs the pipeline


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


def test_prose_corpus_plants_the_same_facts():
    corpus = make_corpus(3, 1, seed=2, style="prose")
    docs = {d["id"]: d["text"] for d in corpus.documents}
    assert len(docs) == 7 and corpus.documents == make_corpus(3, 1, seed=2, style="prose").documents
    for dep in corpus.dependencies:
        fact = prose_fact(dep["entity"], dep["code"])
        assert fact in docs[dep["doc"]] and fact in docs[dep["needs"]]
        others = [text for doc_id, text in docs.items() if doc_id not in (dep["doc"], dep["needs"])]
        assert not any(dep["entity"].capitalize() in text or dep["code"] in text for text in others)
    with pytest.raises(ValueError, match="style"):
        make_corpus(1, 0, style="poetry")


def test_evaluate_by_hand():
    def cand(doc_id, max_delta, mean_delta, kept):
        return {"doc_id": doc_id, "max_delta": max_delta, "mean_delta": mean_delta, "doc_mean_delta": mean_delta,
                "kept": kept}

    outputs = [
        {"id": "use-0", "anchors": [{"entropy": 4.0, "entropy_with_contexts": 1.0}],
         "candidates": [cand("def-0", 0.9, 0.5, True), cand("def-1", 0.95, 0.2, True), cand("misc-0", 0.1, 0.1, False)]},
        {"id": "use-1", "anchors": [{"entropy": 2.0, "entropy_with_contexts": None}],
         "candidates": [cand("def-1", 0.3, 0.3, False), cand("misc-0", 0.2, 0.2, False)]},
    ]
    truth = {("use-0", "def-0"), ("use-1", "def-1"), ("def-0", "use-0")}
    kept = evaluate(outputs, truth)
    assert (kept["true_pairs"], kept["predicted_pairs"], kept["true_positives"]) == (2, 2, 1)
    assert kept["precision"] == 0.5 and kept["recall"] == 0.5 and kept["retrieval_recall"] == 1.0
    assert kept["top1_planted"] == 0.5  # use-0's best by max dI is def-1; use-1's best is def-1
    assert kept["anchor_entropy_before"] == 4.0 and kept["anchor_entropy_after"] == 1.0
    assert kept["anchor_entropy_before_all"] == 3.0
    strict = evaluate(outputs, truth, epsilon=0.25, rule="mean")  # mean dI > 0.25: def-0 and def-1 of use-1
    assert strict["predicted_pairs"] == 2 and strict["precision"] == 1.0 and strict["top1_planted"] == 1.0


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
    config = EntropyLongConfig(alpha=1.0, top_k=3, target_length=400)
    return EntropyLong(backend, retriever, chunks, config), corpus


@pytest.fixture(scope="module")
def copying():
    """EntropyLong with a scorer that copies from context (the cache LM), paper defaults but alpha=1."""
    import random

    from data_pipelines.common.cachelm import CacheLMScorer
    from posttrain.models.tiny import build_tokenizer

    rng = random.Random(1234)
    backend = CacheLMScorer(build_tokenizer(), [training_text(rng) for _ in range(200)])
    corpus = make_corpus(4, 2, seed=3)
    chunks = build_chunks(corpus.documents)
    config = EntropyLongConfig(alpha=1.0, target_length=4000)
    return EntropyLong(backend, BM25Retriever([c["text"] for c in chunks]), chunks, config), corpus


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


def test_process_values_rule_and_layout(copying):
    """dI recomputed by hand from separate forwards; kept exactly when max dI > eps = 0.4 (the paper's
    rule); the kept contexts, and only they, are laid out before D, byte-exact and within the budget."""
    el, corpus = copying
    docs = corpus.documents[:4]
    out = el.process(docs)
    prefix = [el.backend.tokenizer.bos_token_id]
    chunk_by_id = {c["chunk_id"]: c for c in el.chunks}
    decisions = []
    for o, doc in zip(out, docs):
        root = tokenize(el.backend.tokenizer, doc["text"])
        alone = el.backend.score([prefix + root])[0].entropies  # alone[t] = H of D's token t
        anchors = [a["pos"] for a in o["anchors"]]
        assert [a["entropy"] for a in o["anchors"]] == pytest.approx([alone[t] for t in anchors], abs=1e-4)
        for c in o["candidates"]:
            head = prefix + tokenize(el.backend.tokenizer, chunk_by_id[c["chunk_id"]]["text"]) + \
                tokenize(el.backend.tokenizer, el.config.separator)
            after = el.backend.score([head + root])[0].entropies
            by_hand = [(alone[t] - after[len(head) + t - 1]) / alone[t] for t in c["anchors"]]
            assert c["delta"] == pytest.approx(by_hand, abs=1e-4)
            assert c["kept"] == (max(by_hand) > 0.4)
            decisions.append(c["kept"])
        kept = {c["chunk_id"] for c in o["candidates"] if c["kept"]}
        assert {c["chunk_id"] for c in o["contexts"]} == kept
        text = "".join(chunk_by_id[c["chunk_id"]]["text"] + el.config.separator for c in o["contexts"])
        assert o["text"] == text + doc["text"] and o["text"][o["d_offset_chars"]:] == doc["text"]
        ids = tokenize(el.backend.tokenizer, o["text"])
        assert len(ids) == o["num_tokens"] and ids[o["d_offset_tokens"]:] == root
        for c in o["contexts"]:
            assert o["text"][c["char_offset"]:].startswith(chunk_by_id[c["chunk_id"]]["text"])
            assert el.backend.tokenizer.decode(ids[c["offset"]:c["offset"] + c["length"]]) == \
                chunk_by_id[c["chunk_id"]]["text"]
    assert any(decisions) and not all(decisions)  # epsilon decides something here
    truth = corpus.true_pairs()
    assert any((o["id"], c["doc_id"]) in truth for o in out for c in o["contexts"])  # a planted fact is kept
    again = el.process(docs)
    assert [o["text"] for o in again] == [o["text"] for o in out]  # seeded shuffle: repeatable
    report = evaluate(out, truth)
    assert report["roots"] == 4 and report["predicted_pairs"] == sum(len(o["contexts"]) for o in out)
    # a budget that fits only some kept contexts drops the lowest dI first
    busiest = max(range(4), key=lambda d: len(out[d]["contexts"]))
    by_delta = sorted((c for c in out[busiest]["candidates"] if c["kept"]), key=lambda c: -c["max_delta"])
    budget = out[busiest]["num_tokens"] - 1
    tight = EntropyLong(el.backend, el.retriever, el.chunks, dataclasses.replace(el.config, target_length=budget + 1))
    small = tight.process([docs[busiest]])[0]
    m = len(small["contexts"])
    assert small["num_tokens"] <= budget and 0 < m < len(by_delta)
    assert {c["chunk_id"] for c in small["contexts"]} == {c["chunk_id"] for c in by_delta[:m]}
    with pytest.raises(ValueError, match="text"):
        el.process([{"id": "x", "text": ""}])


def test_unrepresentable_text_is_refused_naming_the_record(copying):
    el, _ = copying
    with pytest.raises(ValueError, match=r"record 'cafe-1'.*'é résumé'"):
        el.process([{"id": "cafe-1", "text": "Café résumé"}])
    with pytest.raises(ValueError, match=r"retrieval chunk 'x#0' of document 'x'"):
        EntropyLong(el.backend, el.retriever, [{"chunk_id": "x#0", "doc_id": "x", "doc_hash": "", "text": "naïve"}])


@pytest.mark.parametrize("edit", ["rewrapped", "edited"])
def test_self_retrieval_is_caught_by_content_hash_and_minhash(copying, edit):
    """A separate retrieval corpus holding the roots under other ids, re-wrapped (same content hash) or
    lightly edited (a word appended: another hash, a MinHash near-duplicate), must not hand a root back as
    its own context; without the near-duplicate index the edited copies come back."""
    from data_pipelines.common.dedup import NearDuplicateIndex

    el, corpus = copying
    docs = corpus.documents[:4]
    change = (lambda t: t.replace(" ", "  ", 1)) if edit == "rewrapped" else (lambda t: t + " again")
    copies = [{"id": f"copy-of-{d['id']}", "text": change(d["text"])} for d in docs]
    chunks = build_chunks(copies + corpus.documents[4:])
    retriever = BM25Retriever([c["text"] for c in chunks])
    out = EntropyLong(el.backend, retriever, chunks, el.config).process(docs)
    assert sum(len(o["candidates"]) for o in out) > 0
    for o in out:
        assert all(c["doc_id"] != f"copy-of-{o['id']}" for c in o["candidates"]), o["id"]
    if edit == "edited":
        blind = EntropyLong(el.backend, retriever, chunks, el.config, near_duplicates=NearDuplicateIndex())
        assert any(c["doc_id"] == f"copy-of-{o['id']}" for o in blind.process(docs) for c in o["candidates"])


def test_index_built_once_loads_into_the_same_pipeline(copying, tmp_path):
    """``build_index`` tokenises, indexes and MinHashes the corpus once; a pipeline on ``load_index`` (what
    every actor does) embeds no corpus text and processes exactly as one built in process; an index of
    another identity is refused naming what changed."""
    from data_pipelines.entropylong.index import build_index, ensure_index, load_index

    el, corpus = copying
    calls: list[int] = []

    class CountingEmbedder(HashingEmbedder):
        def encode(self, texts):
            calls.append(len(texts))
            return super().encode(texts)

    identity = {"chunks": "abc", "retriever": "faiss"}
    folder = tmp_path / "index"
    build = lambda: build_index(folder, el.chunks, el.backend.tokenizer, "cachelm", "faiss",
                                CountingEmbedder(), el.config.near_dup_threshold, identity)
    assert ensure_index(folder, identity, build) and calls == [len(el.chunks)]
    assert not ensure_index(folder, identity, build) and calls == [len(el.chunks)]  # reused, not rebuilt
    with pytest.raises(ValueError, match=r"retriever \(was 'faiss', now 'bm25'\)"):
        ensure_index(folder, {**identity, "retriever": "bm25"}, build)
    index = load_index(folder, "faiss", CountingEmbedder())
    assert calls == [len(el.chunks)] and index.chunks == el.chunks and index.token_ids == el._chunk_ids
    loaded = EntropyLong(el.backend, index.retriever, index.chunks, el.config, chunk_token_ids=index.token_ids,
                         near_duplicates=index.near_duplicates)
    in_process = EntropyLong(el.backend, FaissRetriever(HashingEmbedder(), [c["text"] for c in el.chunks]),
                             el.chunks, el.config)
    docs = corpus.documents[:3]
    out = loaded.process(docs)
    assert out == in_process.process(docs)
    assert calls[1:] == [sum(len(o["anchors"]) for o in out)]  # one query per anchor, no corpus text
    # --overwrite rebuilds an index of another identity instead of refusing it
    other = {**identity, "retriever": "bm25"}
    rebuild = lambda: build_index(folder, el.chunks, el.backend.tokenizer, "cachelm", "bm25", None,
                                  el.config.near_dup_threshold, other)
    assert ensure_index(folder, other, rebuild, overwrite=True)
    assert json.loads((folder / "index.json").read_text())["identity"] == other
    assert not ensure_index(folder, other, rebuild)


def _verified(doc_id: str, budget: int, *cands: tuple[int, float, float, int]) -> dict:
    """A verified record by hand: candidates (chunk index, max_delta, doc_mean_delta, token cost)."""
    return {"id": doc_id, "context_budget": budget,
            "candidates": [{"chunk_index": i, "chunk_id": f"c{i}", "max_delta": m, "mean_delta": m,
                            "doc_mean_delta": dm, "tokens": t} for i, m, dm, t in cands]}


def test_select_contexts_by_hand():
    """The keep rule, the reuse cap (counted in call order), the budget dropping the lowest dI first, and
    the seeded shuffle, on hand-made records."""
    config = EntropyLongConfig(epsilon=0.4, max_reuse=1)
    counts: dict[str, int] = {}
    # c0 and c2 pass (0.9, 0.5 > 0.4), c1 fails (0.3); both fit in 10 tokens
    first = select_contexts(_verified("a", 10, (0, 0.9, 0.1, 4), (1, 0.3, 0.0, 4), (2, 0.5, 0.5, 4)), config, counts)
    assert [c["kept"] for c in first["candidates"]] == [True, False, True]
    assert [c["dropped"] for c in first["candidates"]] == [None, None, None]
    assert sorted(first["order"]) == [0, 2] and counts == {"c0": 1, "c2": 1}
    # c0 and c2 have been used once: the cap drops them; c3 passes but costs 6 > budget 5: kept, not placed
    second = select_contexts(_verified("b", 5, (0, 0.9, 0.9, 1), (2, 0.8, 0.8, 1), (3, 0.7, 0.7, 6)), config, counts)
    assert [(c["kept"], c["dropped"]) for c in second["candidates"]] == \
        [(False, "max_reuse"), (False, "max_reuse"), (True, None)]
    assert second["order"] == [] and counts == {"c0": 1, "c2": 1}
    # budget 6 holds two of the three 3-token contexts: the one with the lowest max_delta (c5) leaves
    third = select_contexts(_verified("c", 6, (4, 0.6, 0, 3), (5, 0.45, 0, 3), (6, 0.8, 0, 3)),
                            EntropyLongConfig(), {})
    assert sorted(third["order"]) == [4, 6] and all(c["kept"] for c in third["candidates"])
    # the stricter doc_mean rule decides on doc_mean_delta (only c2 clears it in the first record)
    strict = select_contexts(_verified("a", 10, (0, 0.9, 0.1, 4), (2, 0.5, 0.5, 4)),
                             EntropyLongConfig(verify_rule="doc_mean"), {})
    assert strict["order"] == [2]
    # the shuffle is seeded by (seed, document id): repeatable, and a permutation of the chosen
    many = _verified("d", 100, *[(i, 0.5 + i / 100, 0, 1) for i in range(8)])
    orders = {tuple(select_contexts(many, EntropyLongConfig(), {})["order"]) for _ in range(3)}
    assert len(orders) == 1 and sorted(next(iter(orders))) == list(range(8))
    assert select_contexts(many, EntropyLongConfig(seed=1), {})["order"] != list(next(iter(orders)))


def test_process_carries_the_reuse_counts_across_calls(copying):
    el, corpus = copying
    capped = EntropyLong(el.backend, el.retriever, el.chunks, dataclasses.replace(el.config, max_reuse=1))
    first = capped.process(corpus.documents[:3])
    second = capped.process(corpus.documents[3:6])
    used = [c["chunk_id"] for o in first + second for c in o["contexts"]]
    assert used and len(used) == len(set(used))  # each chunk at most once over both calls
    assert capped.reuse_counts == {cid: 1 for cid in used}
    assert any(c["dropped"] == "max_reuse" for o in second for c in o["candidates"])  # the cap binds


def test_cache_lm_copies_from_context():
    from data_pipelines.common.cachelm import CacheLMScorer
    from posttrain.models.tiny import build_tokenizer

    lm = CacheLMScorer(build_tokenizer(), ["a courier from velnor showed the seal VABCD."] * 3)
    use = "a courier from kolmar showed the seal K7QX2."
    alone = lm.score([encode_text(lm.tokenizer, use)])[0].entropies
    with_def = lm.score([encode_text(lm.tokenizer, "registry of kolmar: the seal K7QX2.\n\n" + use)])[0].entropies
    i = use.index("K7QX2") + 1  # second code character
    assert alone[i] > 2.0 and with_def[-len(use) + i] < 0.5
