"""DESIGNER's question filters: MinHash near-duplicates and 13-gram benchmark decontamination.

DESIGNER (Liu et al., 2025) removes near-duplicate questions with MinHash and drops every question sharing
a 13-gram with an evaluation benchmark. N-grams are over lower-cased ``\\w+`` words.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")


def word_ngrams(text: str, n: int = 13) -> set[tuple[str, ...]]:
    """The set of ``n``-word tuples of ``text`` (empty when it has fewer than ``n`` words)."""
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


class Decontaminator:
    """Holds the ``n``-grams of benchmark texts; ``hit(text)`` returns one shared n-gram or None."""

    def __init__(self, benchmark_texts: list[str], n: int = 13) -> None:
        self.n = n
        self.grams: set[tuple[str, ...]] = set()
        for text in benchmark_texts:
            self.grams |= word_ngrams(text, n)

    def hit(self, text: str) -> str | None:
        """The first ``n``-gram of ``text`` in reading order that a benchmark text shares (not one picked from
        a set, whose order changes with each process's string hashing: a reject's reason must not)."""
        words = _WORD.findall(text.lower())
        for start in range(len(words) - self.n + 1):
            gram = tuple(words[start:start + self.n])
            if gram in self.grams:
                return " ".join(gram)
        return None


def benchmark_texts(path: str) -> list[str]:
    """Every string value of every record of a benchmark file (JSONL / Parquet / ...), so prompts,
    options and answers all count."""
    from data_pipelines.common.io import Malformed, open_source

    source = open_source(path)
    texts: list[str] = []
    for index, record in enumerate(source.chunk(0, len(source))):
        if isinstance(record, Malformed):
            raise ValueError(f"--decontaminate {path}: record {index} is malformed ({record.reason})")
        texts += _strings(record)
    if not texts:
        raise ValueError(f"--decontaminate {path}: no text in the file")
    return texts


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
