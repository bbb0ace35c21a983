"""Retrieval over a corpus of chunks: FAISS inner-product search on embeddings, or BM25.

Both return ``list[list[tuple[int, float]]]`` (chunk index, score), best first. ``FaissRetriever`` uses
``IndexFlatIP`` (exact cosine on normalised embeddings) and can ``save``/``load`` the index; swap in an
IVF/HNSW index for very large corpora via ``index_factory``; ``BM25Retriever`` saves and loads its
statistics the same way, so a corpus is indexed once and every worker loads the index. ``chunk_text`` follows NExtLong's practice:
newline-separated segments grouped up to ``max_chars`` characters.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np

_WORD = re.compile(r"\w+")


def chunk_text(text: str, max_chars: int = 2048) -> list[str]:
    """Group newline-separated segments into chunks of at most ``max_chars`` (longer segments are cut)."""
    chunks, current = [], ""
    for segment in text.split("\n"):
        while len(segment) > max_chars:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(segment[:max_chars])
            segment = segment[max_chars:]
        if current and len(current) + 1 + len(segment) > max_chars:
            chunks.append(current)
            current = segment
        else:
            current = f"{current}\n{segment}" if current else segment
    if current.strip():
        chunks.append(current)
    return [c for c in chunks if c.strip()]


class FaissRetriever:
    def __init__(self, embedder, texts: list[str] | None = None, index_factory: str = "Flat") -> None:
        import faiss

        self.embedder = embedder
        self.index_factory = index_factory
        self.index = None
        self._faiss = faiss
        if texts is not None:
            self.add(texts)

    def add(self, texts: list[str]) -> None:
        vectors = self.embedder.encode(texts)
        if self.index is None:
            self.index = self._faiss.index_factory(vectors.shape[1], self.index_factory,
                                                   self._faiss.METRIC_INNER_PRODUCT)
            if not self.index.is_trained:
                self.index.train(vectors)
        self.index.add(vectors)

    def search(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        if self.index is None or self.index.ntotal == 0:
            return [[] for _ in queries]
        scores, ids = self.index.search(self.embedder.encode(queries), min(k, self.index.ntotal))
        return [[(int(i), float(s)) for i, s in zip(row_i, row_s) if i >= 0] for row_i, row_s in zip(ids, scores)]

    def save(self, path: str | Path) -> None:
        self._faiss.write_index(self.index, str(path))

    def load(self, path: str | Path) -> None:
        self.index = self._faiss.read_index(str(path))


class BM25Retriever:
    """Okapi BM25 (``rank_bm25``) on lower-cased ``\\w+`` tokens."""

    def __init__(self, texts: list[str]) -> None:
        from rank_bm25 import BM25Okapi

        self.bm25 = BM25Okapi([_WORD.findall(t.lower()) or ["<empty>"] for t in texts])
        self.n = len(texts)

    def save(self, path: str | Path) -> None:
        """The fitted statistics to ``path`` (a pickle: load only files this class wrote)."""
        with open(path, "wb") as f:
            pickle.dump(self.bm25, f)

    @classmethod
    def load(cls, path: str | Path) -> BM25Retriever:
        retriever = cls.__new__(cls)
        with open(path, "rb") as f:
            retriever.bm25 = pickle.load(f)
        retriever.n = retriever.bm25.corpus_size
        return retriever

    def search(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        out = []
        for q in queries:
            scores = self.bm25.get_scores(_WORD.findall(q.lower()))
            top = np.argsort(-scores, kind="stable")[: min(k, self.n)]
            out.append([(int(i), float(scores[i])) for i in top])
        return out
