"""Duplicate detection: exact content hashes, and near-duplicate removal with MinHash LSH
(``datasketch``) over word or character shingles."""

from __future__ import annotations

import hashlib
import re

_WORD = re.compile(r"\w+")


def content_hash(text: str) -> str:
    """SHA-256 of ``text`` with runs of whitespace collapsed and the ends stripped: the same document
    stored twice (under different ids, re-wrapped) hashes the same."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def shingles(text: str, n: int = 5, char_level: bool = False) -> set[str]:
    if char_level:
        text = " ".join(text.lower().split())
        return {text[i:i + n] for i in range(max(1, len(text) - n + 1))}
    words = _WORD.findall(text.lower())
    return {" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}


def minhash_dedup(texts: list[str], threshold: float = 0.8, num_perm: int = 128, n: int = 5,
                  char_level: bool = False, seed: int = 1) -> tuple[list[int], dict[int, int]]:
    """Indices to keep (first occurrence wins) and ``{dropped index: kept index it duplicates}``.

    Two texts are near-duplicates when their estimated Jaccard similarity of shingles is >= ``threshold``.
    """
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    keep: list[int] = []
    dropped: dict[int, int] = {}
    for i, text in enumerate(texts):
        m = MinHash(num_perm=num_perm, seed=seed)
        for s in shingles(text, n, char_level):
            m.update(s.encode("utf-8"))
        hits = lsh.query(m)
        if hits:
            dropped[i] = min(int(h) for h in hits)
            continue
        lsh.insert(str(i), m)
        keep.append(i)
    return keep, dropped
