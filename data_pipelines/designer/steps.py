"""DESIGNER's whole-dataset steps between the LLM stages: seed sampling, logic dedup, source segments,
coarse retrieval and question filtering. Each is a function of all its input records, run once and
stored (``data_pipelines.common.runner.run_once``).

DESIGNER (Liu et al., 2025), stages A (sampling), C (dedup), D (segments), E (coarse retrieval: top-5
logics of the segment's discipline by embedding cosine) and F (filters). Deviations: segments are not
scored for readability or educational value (the paper's ModernBERT / FineWeb-Edu classifiers), and a
segment's discipline comes from its source record instead of a classifier.
"""

from __future__ import annotations

import hashlib

from data_pipelines.common.dedup import minhash_dedup
from data_pipelines.common.retrieval import FaissRetriever, chunk_text
from data_pipelines.designer.filtering import Decontaminator
from data_pipelines.designer.logic_dedup import dedup_logics
from data_pipelines.designer.sampling import sample_seeds


def seeds_step(annotated: list[dict], embedder, per_cluster: int, k_max: int,
               seed: int) -> tuple[list[dict], list[dict]]:
    """Seed questions and the clusters whose draw could not honour 3:2:1 (``sample_seeds``)."""
    if not annotated:
        return [], []
    vectors = embedder.encode([r["question"] for r in annotated])
    return sample_seeds(annotated, vectors, per_cluster, k_max, seed)


def dedup_step(logics: list[dict], embedder, tau: float) -> tuple[list[dict], list[dict]]:
    """Unique logics (each with ``logic_id`` and ``duplicates``) and the dropped ones (``duplicate_of``)."""
    if not logics:
        return [], []
    vectors = embedder.encode([r["logic_mermaid"] for r in logics])
    keep, dropped = dedup_logics(vectors, [r["discipline"] for r in logics], tau)
    ids = [f"L-{r['id']}" for r in logics]
    members: dict[int, list[str]] = {i: [] for i in keep}
    for j, centre in dropped.items():
        members[centre].append(ids[j])
    kept = [{**logics[i], "logic_id": ids[i], "duplicates": sorted(members[i])} for i in keep]
    gone = [{"logic_id": ids[j], "duplicate_of": ids[c]} for j, c in sorted(dropped.items())]
    return kept, gone


def segments_step(sources: list[dict], segment_chars: int, threshold: float, limit: int) -> tuple[list[dict], int]:
    """Chunks of the source texts (``chunk_text``), near-duplicates removed by MinHash; at most ``limit``
    (0 = all). Returns the segments and how many near-duplicates were removed."""
    segments = []
    for source in sources:
        for n, text in enumerate(chunk_text(source["text"], segment_chars)):
            segments.append({"segment_id": f"{source['id']}#{n}", "source_id": source["id"],
                             "discipline": source.get("discipline"), "segment": text})
    keep, dropped = minhash_dedup([s["segment"] for s in segments], threshold=threshold)
    kept = [segments[i] for i in keep]
    return (kept[:limit] if limit else kept), len(dropped)


def retrieve_step(segments: list[dict], pool: list[dict], embedder, top_k: int) -> list[dict]:
    """Per segment, the ``top_k`` pool items (logics or exemplars: ``id``, ``text``, ``discipline``,
    ``question_type``, ``difficulty``) by cosine, among those of the segment's discipline when the pool
    has any (else among all). Each segment gains ``candidates`` (with ``score``)."""
    if not pool:
        return []
    by_discipline: dict[str | None, list[int]] = {}
    for i, item in enumerate(pool):
        by_discipline.setdefault(item["discipline"], []).append(i)
    retrievers: dict[str | None, tuple[FaissRetriever, list[int]]] = {}
    out = []
    for segment in segments:
        key = segment["discipline"] if segment["discipline"] in by_discipline else None
        if key not in retrievers:
            members = by_discipline[key] if key is not None else list(range(len(pool)))
            retrievers[key] = (FaissRetriever(embedder, [pool[i]["text"] for i in members]), members)
        retriever, members = retrievers[key]
        hits = retriever.search([segment["segment"]], top_k)[0]
        candidates = [{**_candidate(pool[members[i]]), "score": round(score, 6)} for i, score in hits]
        out.append({**segment, "discipline": segment["discipline"] or pool[members[hits[0][0]]]["discipline"],
                    "candidates": candidates})
    return out


def _candidate(item: dict) -> dict:
    return {k: item[k] for k in ("id", "text", "question_type", "difficulty")}


def filter_step(questions: list[dict], threshold: float, decontaminator: Decontaminator | None,
                demonstrations: Decontaminator | None = None) -> tuple[list[dict], list[dict]]:
    """MinHash near-duplicate questions removed (first kept), then questions sharing an n-gram with the
    benchmark removed, then (an addition to the paper) questions sharing an n-gram with the prompts'
    worked examples (``demonstrations``: copies, not new questions). Returns the kept records and the
    rejects (with ``reason``)."""
    if not questions:
        return [], []
    keep, dropped = minhash_dedup([q["question"] for q in questions], threshold=threshold)
    rejects = [{"record": questions[j], "reason": f"near-duplicate of question {questions[i]['segment_id']}"}
               for j, i in sorted(dropped.items())]
    kept = []
    for i in keep:
        gram = decontaminator.hit(questions[i]["question"]) if decontaminator else None
        copied = demonstrations.hit(questions[i]["question"]) if demonstrations else None
        if gram:
            rejects.append({"record": questions[i], "reason": f"benchmark {decontaminator.n}-gram: {gram!r}"})
        elif copied:
            rejects.append({"record": questions[i], "reason": f"copies the prompt's worked example: {copied!r}"})
        else:
            kept.append(questions[i])
    return kept, rejects


def record_id(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

