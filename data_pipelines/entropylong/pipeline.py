"""EntropyLong (Jia et al., ICLR 2026): long-context training data verified by the model's own entropy.

Per root document D = x_1..x_n (scored after a BOS token):

1. **Anchors**: positions whose predictive entropy H_t > mu_H + alpha * sigma_H of *this* document
   (alpha = 2.0). Position 0 (predicted from BOS alone) is never an anchor.
2. **Retrieval**: the query of anchor t is the token window x_{t-w..t+w} (w = 16) decoded to text; its
   top-K (K = 32) chunks come from a FAISS index of the retrieval corpus (or BM25). Chunks of D's own
   document are excluded (self-retrieval: same document id, the same content hash, or a corpus document
   that nearly copies D: MinHash Jaccard of word 5-grams >= ``near_dup_threshold``, so a separate
   ``--corpus`` holding D under another id, re-wrapped or lightly edited, does not hand D back as its own
   context) and each chunk is a candidate once per document.
3. **Verification**: for every *unique* candidate C one forward pass over [C ; sep ; D_{<=last anchor
   that retrieved C}] gives H'_t at all of D's anchors at once; dI_t = (H_t - H'_t) / H_t. The paper
   keeps C when dI > epsilon (0.4) at the anchor that retrieved it (``verify_rule="anchor"``: the max over
   the anchors that retrieved C); ``verify_rule="mean"`` asks the *mean* over those anchors to exceed
   epsilon, and ``verify_rule="doc_mean"`` the mean over *all* anchors of D (stricter against contexts
   that only help the first character of a copied span: a template match, not the fact).
4. **Assembly**: S = [C_pi(1) ; ... ; C_pi(m) ; D] with a seeded shuffle pi, joined by ``separator``; if S
   exceeds ``target_length`` tokens the lowest-dI contexts are dropped first, then D is truncated.
   No document mask separates contexts from D (the dependency must stay visible). The output text is
   the contexts' and D's own text joined (byte-exact, never a decode of token ids); a scorer whose
   tokenizer cannot represent a text exactly (``decode(tokenize(text)) != text``) is refused with an error
   naming the record or chunk.

Deviations / gaps (also in the report): one sequence per root document (packing several units into one
128K sequence is left to the loader); the anchor threshold and verification use exact entropies on the HF
backend but top-k approximations on vLLM/HTTP backends; the cross-dataset reuse cap of a chunk is a flag
(``max_reuse``, 0 = unlimited) counted in input order over the whole run.

The steps are separate methods so that a runner can spread them: ``verify_documents`` (steps 1-3, per
batch, independent of other batches), ``select_contexts`` (the keep rule, the reuse cap, the budget and
the shuffle: pure, cheap, applied in input order) and ``assemble_documents`` (the sequence and the final
entropies, per batch). ``EntropyLong.process`` runs all three in process.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from data_pipelines.common.backends import engine_label, tokenize
from data_pipelines.common.dedup import NearDuplicateIndex, content_hash
from data_pipelines.common.representable import check_representable
from data_pipelines.entropylong.index import near_duplicate_index, tokenize_chunks
from posttrain.common.seeds import derive_seed

RULE_FIELDS = {"anchor": "max_delta", "mean": "mean_delta", "doc_mean": "doc_mean_delta"}
"""verify_rule -> the candidate statistic compared with epsilon."""


@dataclass
class EntropyLongConfig:
    alpha: float = 2.0
    """Anchor threshold: H_t > mean + alpha * std of the document's entropies (paper: 2.0)."""
    window: int = 16
    """Query window half-width w in tokens around each anchor (paper: 16)."""
    top_k: int = 32
    """Candidates retrieved per anchor (paper: 32)."""
    epsilon: float = 0.4
    """Keep a candidate when its relative entropy reduction exceeds epsilon (paper: 0.4)."""
    verify_rule: str = "anchor"
    """"anchor" (paper: dI > eps at an anchor that retrieved it), "mean" (mean dI over those anchors) or
    "doc_mean" (mean dI over all anchors of the document)."""
    target_length: int = 131072
    """Token budget of one assembled sequence (paper: 128K)."""
    max_doc_tokens: int = 8192
    """Root documents are truncated to this many tokens before scoring."""
    max_anchors: int = 0
    """Keep at most this many highest-entropy anchors per document (0 = all)."""
    max_reuse: int = 0
    """Use one chunk in at most this many sequences (0 = unlimited)."""
    separator: str = "\n\n"
    """Text between contexts and before the root document."""
    seed: int = 0
    """Seed of the context shuffle (per document, resume-safe)."""
    near_dup_threshold: float = 0.8
    """A corpus document whose MinHash Jaccard estimate (word 5-grams) with D reaches this is D's copy: none
    of its chunks is a context of D (1.0: exact copies of the shingle set only)."""

    def __post_init__(self) -> None:
        if self.verify_rule not in RULE_FIELDS:
            raise ValueError(f"verify_rule must be one of {sorted(RULE_FIELDS)}, got {self.verify_rule!r}")
        if self.window < 0 or self.top_k < 1 or self.target_length < 2:
            raise ValueError("window must be >= 0, top_k >= 1 and target_length >= 2")
        if not 0 < self.near_dup_threshold <= 1:
            raise ValueError(f"near_dup_threshold must be in (0, 1], got {self.near_dup_threshold}")


def find_anchors(entropies: torch.Tensor, alpha: float, max_anchors: int = 0, skip_first: int = 1) -> list[int]:
    """Positions t >= skip_first with H_t > mean + alpha * std (population std) of ``entropies[skip_first:]``."""
    h = torch.as_tensor(entropies, dtype=torch.float64)
    if h.numel() <= skip_first:
        return []
    tail = h[skip_first:]
    tau = tail.mean() + alpha * tail.std(unbiased=False)
    idx = [t for t in range(skip_first, h.numel()) if h[t] > tau]
    if max_anchors and len(idx) > max_anchors:
        idx = sorted(sorted(idx, key=lambda t: -float(h[t]))[:max_anchors])
    return idx


def relative_reduction(before: float, after: float) -> float:
    """dI = (H - H') / H (0 when H is 0)."""
    return (before - after) / before if before > 0 else 0.0


def select_contexts(verified: dict, config: EntropyLongConfig, counts: dict[str, int]) -> dict:
    """Which verified candidates go into the sequence, and in what order (step 4 before any text is built).

    A candidate is kept when its statistic under ``config.verify_rule`` exceeds ``epsilon``, unless
    ``max_reuse`` is set and ``counts`` (chunk id -> sequences that used it so far) has reached it
    (``dropped="max_reuse"``). The kept contexts are sorted by ``max_delta`` and the lowest dropped until
    their token cost fits ``context_budget`` (they stay ``kept``: they passed verification); the rest are
    shuffled with the document's seed. ``counts`` gains one use per chosen context. Returns ``verified``
    with ``kept``/``dropped`` on every candidate and ``order`` (chunk indices, in sequence order).

    Pure and cheap: the runner applies it to the verified records of the whole run in input order, in the
    driver, so the reuse counts never depend on which worker verified which block, or when.
    """
    field = RULE_FIELDS[config.verify_rule]
    candidates, kept = [], []
    for c in verified["candidates"]:
        ok, dropped = c[field] > config.epsilon, None
        if ok and config.max_reuse and counts.get(c["chunk_id"], 0) >= config.max_reuse:
            ok, dropped = False, "max_reuse"
        candidates.append({**c, "kept": ok, "dropped": dropped})
        if ok:
            kept.append(candidates[-1])
    chosen = sorted(kept, key=lambda c: -c["max_delta"])  # the lowest dI leaves first
    while chosen and sum(c["tokens"] for c in chosen) > verified["context_budget"]:
        chosen.pop()
    random.Random(derive_seed(config.seed, verified["id"])).shuffle(chosen)
    for c in chosen:
        counts[c["chunk_id"]] = counts.get(c["chunk_id"], 0) + 1
    return {**verified, "candidates": candidates, "order": [c["chunk_index"] for c in chosen]}


class EntropyLong:
    """The pipeline over one backend, one retriever and a chunked retrieval corpus.

    ``chunks`` are dicts ``{"chunk_id", "doc_id", "doc_hash", "text"}`` (``build_chunks``);
    ``retriever.search(queries, k)`` returns (chunk index, score) lists (``None``: a pipeline that only
    assembles). ``chunk_token_ids`` (the chunks' token ids, checked representable) and ``near_duplicates``
    (the corpus documents' MinHash index) come from an index built once (``entropylong.index``); without
    them they are computed here (``tokenize_chunks``, ``near_duplicate_index``). ``reuse_counts`` maps a
    chunk id to the number of sequences that ``process`` built with it so far (the ``max_reuse`` state of
    in-process use). ``progress`` shows a bar over the forwards.
    """

    def __init__(self, backend, retriever, chunks: list[dict], config: EntropyLongConfig | None = None,
                 progress: bool = False, chunk_token_ids: list[list[int]] | None = None,
                 near_duplicates: NearDuplicateIndex | None = None) -> None:
        self.backend = backend
        self.retriever = retriever
        self.chunks = chunks
        self.config = config or EntropyLongConfig()
        self.progress = progress
        if chunk_token_ids is None:
            chunk_token_ids = tokenize_chunks(backend.tokenizer, engine_label(backend), chunks)
        if len(chunk_token_ids) != len(chunks):
            raise ValueError(f"chunk_token_ids: {len(chunk_token_ids)} token lists for {len(chunks)} chunks")
        self.check_representable(self.config.separator, "the separator")
        self._chunk_ids = chunk_token_ids
        if near_duplicates is None:
            near_duplicates = near_duplicate_index(chunks, self.config.near_dup_threshold)
        self.near_duplicates = near_duplicates
        self._sep_ids = tokenize(backend.tokenizer, self.config.separator)
        self._bos = getattr(backend.tokenizer, "bos_token_id", None)
        self.reuse_counts: dict[str, int] = {}

    def check_representable(self, text: str, what: str, ids: list[int] | None = None) -> None:
        """``check_representable`` under this pipeline's scorer (``ids``: the text's tokens, if known)."""
        check_representable(self.backend.tokenizer, engine_label(self.backend), text, what, ids)

    # ------------------------------------------------------------------ stages
    def _root(self, text: str) -> list[int]:
        """D's token ids, truncated to ``max_doc_tokens``."""
        return self._truncate(tokenize(self.backend.tokenizer, text), text, self.config.max_doc_tokens)[0]

    def _prefix(self) -> list[int]:
        return [self._bos] if self._bos is not None else []

    def anchors(self, docs: list[list[int]]) -> list[tuple[list[float], list[int]]]:
        """Per doc: (entropies of D's tokens, anchor positions)."""
        scores = self.backend.score([self._prefix() + d for d in docs], entropy=True)
        out = []
        for s in scores:
            ent = s.entropies if self._prefix() else [0.0] + s.entropies  # ent[t] = H of D's token t
            out.append((ent, find_anchors(torch.tensor(ent), self.config.alpha,
                                                  self.config.max_anchors)))
        return out

    def retrieve(self, doc_ids: list[str], docs: list[list[int]], anchors: list[list[int]],
                 root_texts: list[str] | None = None) -> list[dict[int, list[int]]]:
        """Per doc: {chunk index: [anchor positions that retrieved it]}, self-retrieval removed: a chunk of
        the same document id and, given the roots' whole ``root_texts``, a chunk whose document or own text
        has the root's content hash or whose document nearly copies the root (``near_duplicates``)."""
        w = self.config.window
        queries, owners = [], []
        for d, (doc, pos) in enumerate(zip(docs, anchors)):
            for t in pos:
                queries.append(self.backend.tokenizer.decode(doc[max(0, t - w): t + w + 1]))
                owners.append((d, t))
        results: list[dict[int, list[int]]] = [{} for _ in docs]
        if not queries:
            return results
        own = [{doc_id} for doc_id in doc_ids]
        hashes: list[str | None] = [None] * len(docs)
        if root_texts is not None:
            hashes = [content_hash(text) for text in root_texts]
            own = [ids | self.near_duplicates.query(text) for ids, text in zip(own, root_texts)]
        for (d, t), hits in zip(owners, self.retriever.search(queries, self.config.top_k)):
            for chunk_index, _score in hits:
                chunk = self.chunks[chunk_index]
                if chunk["doc_id"] in own[d] or hashes[d] in (chunk["doc_hash"], content_hash(chunk["text"])):
                    continue
                results[d].setdefault(chunk_index, []).append(t)
        return results

    def verify(self, docs: list[list[int]], entropies: list[list[float]],
               candidates: list[dict[int, list[int]]], per_pair: bool = False,
               doc_anchors: list[list[int]] | None = None) -> list[list[dict]]:
        """dI of every candidate at the anchors that retrieved it.

        Batched (default): one sequence [C; sep; D up to its last anchor] per (doc, unique candidate), all
        scored in one ``backend.score`` call; it yields H' at *every* anchor of D (``doc_mean_delta``).
        ``per_pair=True`` is the naive baseline: one forward per (candidate, anchor) pair, truncated at
        that anchor (same ``delta`` numbers; ``doc_mean_delta`` then covers the retrieving anchors only).
        """
        jobs, seqs = [], []
        for d, (doc, cands) in enumerate(zip(docs, candidates)):
            all_anchors = sorted({t for ts in cands.values() for t in ts} | set(doc_anchors[d] if doc_anchors else []))
            for chunk_index, ts in cands.items():
                head = self._prefix() + self._chunk_ids[chunk_index] + self._sep_ids
                groups = [[t] for t in ts] if per_pair else [all_anchors]
                for group in groups:
                    jobs.append((d, chunk_index, group, len(head)))
                    seqs.append(head + doc[: max(group) + 1])
        after: dict[tuple[int, int], dict[int, float]] = {}
        scored = self._score(seqs, "verify", step=1 if per_pair else None)
        for (d, chunk_index, group, offset), s in zip(jobs, scored):
            slot = after.setdefault((d, chunk_index), {})
            for t in group:
                slot[t] = s.entropies[offset + t - 1]
        out: list[list[dict]] = [[] for _ in docs]
        for (d, chunk_index), h_after in after.items():
            ts = sorted(set(candidates[d][chunk_index]))
            deltas = [relative_reduction(entropies[d][t], h_after[t]) for t in ts]
            every = [relative_reduction(entropies[d][t], h) for t, h in h_after.items()]
            out[d].append({"chunk_index": chunk_index, "anchors": ts,
                           "entropy_after": [round(h_after[t], 5) for t in ts],
                           "delta": [round(x, 5) for x in deltas],
                           "max_delta": max(deltas), "mean_delta": sum(deltas) / len(deltas),
                           "doc_mean_delta": sum(every) / len(every)})
        for cands in out:
            cands.sort(key=lambda c: c["chunk_index"])
        return out

    def _score(self, seqs: list[list[int]], desc: str, step: int | None = None) -> list:
        """Entropy scores of ``seqs``, ``step`` sequences per engine call (default: 4 batches), with a
        progress bar when ``progress`` is on."""
        step = step or max(1, 4 * getattr(self.backend, "max_batch_size", 16))
        scored = []
        with tqdm(total=len(seqs), desc=desc, unit="seq", disable=not self.progress or not seqs, leave=False) as bar:
            for start in range(0, len(seqs), step):
                scored += self.backend.score(seqs[start:start + step], entropy=True)
                bar.update(len(seqs[start:start + step]))
        return scored

    def verify_documents(self, records: list[dict], text_field: str = "text",
                         id_field: str = "id") -> list[dict]:
        """Steps 1-3 for a batch of root records: one JSON-ready *verified* record per root (the input of
        ``select_contexts``) with D's token ids, its anchors and their entropies, and
        every candidate's dI statistics, token cost and chunk id. Nothing here depends on other batches."""
        for r in records:
            if not isinstance(r.get(text_field), str) or not r[text_field].strip():
                raise ValueError(f"record {r.get(id_field)!r}: field {text_field!r} missing or empty")
        doc_ids = [str(r.get(id_field)) for r in records]
        roots = []
        for r, doc_id in zip(records, doc_ids):
            ids = tokenize(self.backend.tokenizer, r[text_field])
            self.check_representable(r[text_field], f"record {doc_id!r} (field {text_field!r})", ids)
            roots.append(self._truncate(ids, r[text_field], self.config.max_doc_tokens))
        docs = [ids for ids, _ in roots]
        scored = self.anchors(docs)
        entropies = [e for e, _ in scored]
        anchors = [a for _, a in scored]
        candidates = self.retrieve(doc_ids, docs, anchors, [r[text_field] for r in records])
        verified = self.verify(docs, entropies, candidates, doc_anchors=anchors)
        budget = self.config.target_length - len(self._prefix())
        out = []
        for d, doc_id in enumerate(doc_ids):
            in_budget = len(self._truncate(docs[d], roots[d][1], budget)[0])
            out.append({
                "id": doc_id, "text": roots[d][1], "tokens": docs[d], "anchors": anchors[d],
                "anchor_entropies": [entropies[d][t] for t in anchors[d]],
                "entropy_mean": round(float(torch.tensor(entropies[d]).mean()), 5) if entropies[d] else None,
                "context_budget": budget - in_budget,
                "embedder": getattr(getattr(self.retriever, "embedder", None), "name", type(self.retriever).__name__),
                "candidates": [{**c, "chunk_id": self.chunks[c["chunk_index"]]["chunk_id"],
                                "tokens": len(self._chunk_ids[c["chunk_index"]]) + len(self._sep_ids)}
                               for c in verified[d]],
            })
        return out

    def assemble_documents(self, selected: list[dict]) -> list[dict]:
        """Step 4 for a batch of *selected* records (``select_contexts``'s output): the sequence of each,
        its text byte-exact (the contexts' and D's own text, D cut at a token boundary when the budget
        truncates it), and the anchors' entropy with the chosen contexts in front (one forward each)."""
        budget = self.config.target_length - len(self._prefix())
        built = []
        for rec in selected:
            doc, doc_text = self._truncate(rec["tokens"], rec["text"], budget)
            by_index = {c["chunk_index"]: c for c in rec["candidates"]}
            ids: list[int] = []
            text = ""
            layout = []
            for chunk_index in rec["order"]:
                layout.append({**by_index[chunk_index], "offset": len(ids),
                               "length": len(self._chunk_ids[chunk_index]), "char_offset": len(text)})
                ids += self._chunk_ids[chunk_index] + self._sep_ids
                text += self.chunks[chunk_index]["text"] + self.config.separator
            built.append((ids + doc, text + doc_text, layout, len(ids), len(text)))
        final_scores = iter(self._score([self._prefix() + ids for ids, _, layout, _, _ in built if layout],
                                        "assembled"))
        results = []
        for rec, (ids, text, layout, d_offset, d_char_offset) in zip(selected, built):
            after = next(final_scores).entropies if layout else None
            anchor_rows = [{"pos": t, "token": self.backend.tokenizer.decode([rec["tokens"][t]]),
                            "entropy": round(h, 5),
                            "entropy_with_contexts": None if after is None or d_offset + t >= len(ids)
                            else round(after[d_offset + t - 1 + len(self._prefix())], 5)}
                           for t, h in zip(rec["anchors"], rec["anchor_entropies"])]
            contexts = [{"chunk_id": c["chunk_id"], "doc_id": self.chunks[c["chunk_index"]]["doc_id"],
                         "offset": c["offset"], "length": c["length"], "char_offset": c["char_offset"],
                         "anchors": c["anchors"], "delta": c["delta"], "max_delta": round(c["max_delta"], 5)}
                        for c in layout]
            cands = [{"chunk_id": c["chunk_id"], "doc_id": self.chunks[c["chunk_index"]]["doc_id"],
                      "anchors": c["anchors"], "delta": c["delta"], "max_delta": round(c["max_delta"], 5),
                      "mean_delta": round(c["mean_delta"], 5), "doc_mean_delta": round(c["doc_mean_delta"], 5),
                      "kept": c["kept"], "dropped": c["dropped"]} for c in rec["candidates"]]
            results.append({
                "id": rec["id"],
                "text": text,
                "num_tokens": len(ids),
                "d_offset_tokens": d_offset,
                "d_offset_chars": d_char_offset,
                "contexts": contexts,
                "anchors": anchor_rows,
                "candidates": cands,
                "entropy_mean": rec["entropy_mean"],
                "params": asdict(self.config),
                "scorer": engine_label(self.backend),
                "embedder": rec["embedder"],
            })
        return results

    def _truncate(self, doc: list[int], doc_text: str, limit: int) -> tuple[list[int], str]:
        """The first ``limit`` tokens of D and their text: a prefix of ``doc_text`` (a cut inside a
        multi-byte character backs off to the previous token)."""
        n = min(len(doc), limit)
        while n < len(doc):
            head = self.backend.tokenizer.decode(doc[:n])
            if doc_text.startswith(head):
                return doc[:n], head
            n -= 1
        return doc, doc_text

    # ------------------------------------------------------------------ one batch of root documents
    def process(self, records: list[dict], text_field: str = "text", id_field: str = "id") -> list[dict]:
        """All four steps over one batch, in process: verify, select (``reuse_counts`` carried over from
        earlier calls of this object, committed only when the whole batch succeeds), assemble."""
        counts = dict(self.reuse_counts)
        selected = [select_contexts(v, self.config, counts)
                    for v in self.verify_documents(records, text_field, id_field)]
        results = self.assemble_documents(selected)
        self.reuse_counts = counts
        return results

