"""Duplicate detection: exact content hashes, and near-duplicates with MinHash LSH (``datasketch``) over
word or character shingles: ``minhash_dedup`` removes them from a list, ``NearDuplicateIndex`` finds the
stored texts that a query text nearly copies (and saves its signatures, so workers load instead of
rehashing a corpus)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

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


def minhash(text: str, num_perm: int = 128, n: int = 5, char_level: bool = False, seed: int = 1):
    """The MinHash signature of ``text``'s shingles (``shingles``)."""
    from datasketch import MinHash

    m = MinHash(num_perm=num_perm, seed=seed)
    for s in sorted(shingles(text, n, char_level)):
        m.update(s.encode("utf-8"))
    return m


def minhash_dedup(texts: list[str], threshold: float = 0.8, num_perm: int = 128, n: int = 5,
                  char_level: bool = False, seed: int = 1) -> tuple[list[int], dict[int, int]]:
    """Indices to keep (first occurrence wins) and ``{dropped index: kept index it duplicates}``.

    Two texts are near-duplicates when their estimated Jaccard similarity of shingles is >= ``threshold``.
    """
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    keep: list[int] = []
    dropped: dict[int, int] = {}
    for i, text in enumerate(texts):
        m = minhash(text, num_perm, n, char_level, seed)
        hits = lsh.query(m)
        if hits:
            dropped[i] = min(int(h) for h in hits)
            continue
        lsh.insert(str(i), m)
        keep.append(i)
    return keep, dropped


class NearDuplicateIndex:
    """Texts stored under keys; ``query(text)`` returns the keys of those whose estimated Jaccard similarity
    of shingles with ``text`` is at least ``threshold`` (LSH candidates, then the signature estimate).
    Several texts may share a key (a document stored in pieces): the key matches when one piece does.
    ``save``/``load`` keep the signatures, so a worker loads them instead of hashing the texts again."""

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, n: int = 5, char_level: bool = False,
                 seed: int = 1) -> None:
        from datasketch import MinHash, MinHashLSH

        if not 0 < threshold <= 1:
            raise ValueError(f"near-duplicate threshold must be in (0, 1], got {threshold}")
        self.params = {"threshold": threshold, "num_perm": num_perm, "n": n, "char_level": char_level, "seed": seed}
        self.scheme = MinHash(num_perm=num_perm, seed=seed).scheme  # how this datasketch hashes
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self.keys: list[str] = []
        self._signatures: list[np.ndarray] = []

    def _minhash(self, text: str):
        p = self.params
        return minhash(text, p["num_perm"], p["n"], p["char_level"], p["seed"])

    def add(self, key: str, text: str) -> None:
        self._insert(key, self._minhash(text).hashvalues)

    def _insert(self, key: str, hashvalues: np.ndarray) -> None:
        from datasketch import LeanMinHash

        self._lsh.insert(str(len(self.keys)), LeanMinHash(seed=self.params["seed"], hashvalues=hashvalues,
                                                           scheme=self.scheme))
        self.keys.append(key)
        self._signatures.append(np.asarray(hashvalues, dtype=np.uint64))

    def query(self, text: str) -> set[str]:
        """Keys of the stored texts that ``text`` nearly duplicates."""
        m = self._minhash(text)
        threshold = self.params["threshold"]
        hits = set()
        for slot in self._lsh.query(m):
            other = self._signatures[int(slot)]
            if float(np.mean(other == m.hashvalues)) >= threshold:  # the MinHash Jaccard estimate
                hits.add(self.keys[int(slot)])
        return hits

    def save(self, path: str | Path) -> None:
        """Signatures, keys and parameters to ``path`` (``.npz``)."""
        signatures = np.stack(self._signatures) if self._signatures else np.zeros((0, self.params["num_perm"]),
                                                                                  dtype=np.uint64)
        with open(path, "wb") as f:
            np.savez(f, signatures=signatures, keys=np.array(self.keys, dtype=str),
                     params=np.array(json.dumps(self.params)), scheme=np.array(self.scheme))

    @classmethod
    def load(cls, path: str | Path) -> NearDuplicateIndex:
        with np.load(path) as data:
            index = cls(**json.loads(str(data["params"])))
            if str(data["scheme"]) != index.scheme:
                raise ValueError(f"{path}: MinHash signatures of scheme {str(data['scheme'])!r}, this datasketch "
                                 f"hashes with {index.scheme!r}; build the index again")
            for key, hashvalues in zip(data["keys"].tolist(), data["signatures"]):
                index._insert(key, hashvalues)
        return index
