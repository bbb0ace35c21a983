"""EntropyLong's retrieval corpus, indexed once per run and loaded by every worker.

``build_chunks`` cuts the corpus into chunks; ``build_index`` (in the driver, before any actor starts)
tokenises every chunk once with the scorer's tokenizer (refusing, naming the chunk, a text it cannot
represent), embeds the chunks once (FAISS) or fits BM25 once, and hashes every corpus document once
(MinHash, for the near-duplicate exclusion), into one folder::

    index.json          its identity (what it was built from) and size; written last: the index is complete
    chunks.jsonl        the chunks with their token ids
    retriever.faiss | retriever.bm25
    near_dups.npz       the corpus documents' MinHash signatures (``NearDuplicateIndex``)

``load_index`` gives a worker the same four things without embedding, tokenising or hashing the corpus
again. ``ensure_index`` reuses a complete index whose identity (the chunks' content, the scorer, the
retriever and embedder, the near-duplicate threshold) equals the run's, refuses one built from anything
else naming what changed, and rebuilds one a killed run left incomplete.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_pipelines.common.backends import tokenize
from data_pipelines.common.dedup import NearDuplicateIndex, content_hash
from data_pipelines.common.representable import check_representable
from posttrain.common.files import atomic_write_jsonl, atomic_write_text
from posttrain.common.jsonl import read_jsonl

RETRIEVER_FILES = {"faiss": "retriever.faiss", "bm25": "retriever.bm25"}


def build_chunks(records: list[dict], text_field: str = "text", id_field: str = "id",
                 max_chars: int = 2048) -> list[dict]:
    """Chunk a retrieval corpus (NExtLong style) into ``{"chunk_id", "doc_id", "doc_hash", "text"}``
    (``doc_hash``: ``content_hash`` of the whole source document, for self-retrieval checks)."""
    from data_pipelines.common.retrieval import chunk_text

    chunks = []
    for n, r in enumerate(records):
        text = r.get(text_field)
        if not isinstance(text, str) or not text.strip():
            continue
        doc_id = str(r.get(id_field, n))
        doc_hash = content_hash(text)
        for j, piece in enumerate(chunk_text(text, max_chars)):
            chunks.append({"chunk_id": f"{doc_id}#{j}", "doc_id": doc_id, "doc_hash": doc_hash, "text": piece})
    return chunks


def tokenize_chunks(tokenizer: Any, scorer: str, chunks: list[dict]) -> list[list[int]]:
    """Each chunk's token ids, tokenised once; ``ValueError`` naming the chunk when the tokenizer cannot
    represent its text exactly (``check_representable``)."""
    out = []
    for c in chunks:
        ids = tokenize(tokenizer, c["text"])
        check_representable(tokenizer, scorer, c["text"], f"retrieval chunk {c['chunk_id']!r} of document "
                            f"{c['doc_id']!r}", ids)
        out.append(ids)
    return out


def near_duplicate_index(chunks: list[dict], threshold: float) -> NearDuplicateIndex:
    """The corpus documents' MinHash index (word 5-grams), one entry per document id: its chunks' text
    joined by newlines (how ``chunk_text`` cut it)."""
    texts: dict[str, list[str]] = {}
    for c in chunks:
        texts.setdefault(c["doc_id"], []).append(c["text"])
    index = NearDuplicateIndex(threshold)
    for doc_id, pieces in texts.items():
        index.add(doc_id, "\n".join(pieces))
    return index


def chunks_digest(chunks: list[dict]) -> str:
    """SHA-256 of the chunks' ids, documents and texts in order: the corpus content the index holds."""
    digest = hashlib.sha256()
    for c in chunks:
        digest.update(json.dumps([c["chunk_id"], c["doc_id"], c["text"]], ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


@dataclass
class RetrievalIndex:
    """What a worker needs from the corpus: the chunks, their token ids, the retriever (None when not
    loaded) and the documents' near-duplicate index."""

    chunks: list[dict]
    token_ids: list[list[int]]
    retriever: Any
    near_duplicates: NearDuplicateIndex


def build_index(folder: str | Path, chunks: list[dict], tokenizer: Any, scorer: str, retriever: str,
                embedder: Any, near_dup_threshold: float, identity: dict) -> None:
    """Write the index of ``chunks`` to ``folder`` (the module docstring); ``embedder``: the FAISS
    retriever's (unused for BM25). ``index.json`` (``identity`` and the size) goes last."""
    from data_pipelines.common.retrieval import BM25Retriever, FaissRetriever

    if retriever not in RETRIEVER_FILES:
        raise ValueError(f"retriever must be one of {sorted(RETRIEVER_FILES)}, got {retriever!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    token_ids = tokenize_chunks(tokenizer, scorer, chunks)
    atomic_write_jsonl(folder / "chunks.jsonl", [{**c, "ids": ids} for c, ids in zip(chunks, token_ids)])
    texts = [c["text"] for c in chunks]
    built = BM25Retriever(texts) if retriever == "bm25" else FaissRetriever(embedder, texts)
    built.save(folder / RETRIEVER_FILES[retriever])
    near_duplicate_index(chunks, near_dup_threshold).save(folder / "near_dups.npz")
    atomic_write_text(folder / "index.json", json.dumps({"identity": identity, "chunks": len(chunks)},
                                                        indent=2, sort_keys=True) + "\n")


def ensure_index(folder: str | Path, identity: dict, build, overwrite: bool = False) -> bool:
    """``build()`` unless ``folder`` holds a complete index of this ``identity``; False when reused. An
    index of another identity is a ``ValueError`` naming the keys that differ, or, with ``overwrite``, is
    rebuilt (its ``index.json`` removed first, so a rebuild killed midway never passes for the old index)."""
    path = Path(folder) / "index.json"
    if path.exists():
        old = json.loads(path.read_text())["identity"]
        changed = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
        if not changed:
            return False
        if not overwrite:
            raise ValueError(f"{folder} holds a retrieval index built with other "
                             + ", ".join(f"{k} (was {old.get(k)!r}, now {identity.get(k)!r})" for k in changed)
                             + "; rerun with --overwrite to rebuild it, or use a fresh --output folder")
        path.unlink()
    build()
    return True


def load_index(folder: str | Path, retriever: str | None, embedder: Any = None) -> RetrievalIndex:
    """The index in ``folder``; ``retriever`` ("faiss", with its query ``embedder``, or "bm25") or None
    (assembly: no retriever)."""
    from data_pipelines.common.retrieval import BM25Retriever, FaissRetriever

    folder = Path(folder)
    if not (folder / "index.json").exists():
        raise FileNotFoundError(f"{folder}: no complete retrieval index (index.json missing)")
    rows = read_jsonl(folder / "chunks.jsonl")
    loaded = None
    if retriever == "bm25":
        loaded = BM25Retriever.load(folder / RETRIEVER_FILES["bm25"])
    elif retriever == "faiss":
        loaded = FaissRetriever(embedder)
        loaded.load(folder / RETRIEVER_FILES["faiss"])
    elif retriever is not None:
        raise ValueError(f"retriever must be one of {sorted(RETRIEVER_FILES)} or None, got {retriever!r}")
    return RetrievalIndex([{k: v for k, v in r.items() if k != "ids"} for r in rows], [r["ids"] for r in rows],
                          loaded, NearDuplicateIndex.load(folder / "near_dups.npz"))
