"""Near-duplicate lookup (``NearDuplicateIndex``, MinHash over word 5-grams) on texts whose Jaccard
similarity is known by hand, and its save/load round trip."""

from __future__ import annotations

import pytest

from data_pipelines.common.dedup import NearDuplicateIndex, shingles

WORDS = [f"w{i}" for i in range(40)]
BASE = " ".join(WORDS)  # 36 word 5-grams


def test_shingle_counts_by_hand() -> None:
    assert len(shingles(BASE)) == 36
    # one word appended: 36 shared of 37 -> Jaccard 0.973; the last 20 words replaced: 16 shared of 56 -> 0.286
    assert len(shingles(BASE) & shingles(BASE + " extra")) == 36
    half = " ".join(WORDS[:20] + [f"v{i}" for i in range(20)])
    assert len(shingles(BASE) & shingles(half)) == 16 and len(shingles(BASE) | shingles(half)) == 56


def test_query_finds_near_copies_only(tmp_path) -> None:
    index = NearDuplicateIndex(threshold=0.8)
    index.add("doc-a", BASE + " extra")
    index.add("doc-b", " ".join(WORDS[:20] + [f"v{i}" for i in range(20)]))
    index.add("doc-a", "an unrelated second piece of document a with other words in it")
    assert index.query(BASE) == {"doc-a"}  # Jaccard 0.97 >= 0.8; doc-b's 0.29 is not
    assert index.query("nothing in common with any stored text at all today") == set()
    index.save(tmp_path / "nd.npz")
    loaded = NearDuplicateIndex.load(tmp_path / "nd.npz")
    assert loaded.keys == ["doc-a", "doc-b", "doc-a"] and loaded.params == index.params
    assert loaded.query(BASE) == {"doc-a"}
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\]"):
        NearDuplicateIndex(threshold=0)
