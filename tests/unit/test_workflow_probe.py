"""The EntropyLong workflow's held-out probe (``examples/workflows/entropylong_lm.py``): which characters are the
planted dependent tokens, and which tokens cover them, on hand-written cases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workflows"))
from entropylong_lm import dependent_span, held_out_pairs, span_token_positions


def test_dependent_span_is_the_codes_characters_two_to_five() -> None:
    document = "one, two, three. Velnor: V7QXM. may, june."
    start, end = dependent_span(document, "velnor", "V7QXM")
    assert document[start:end] == "7QXM"
    with pytest.raises(ValueError, match="not found"):
        dependent_span(document, "kupam", "KBY1A")


def test_span_token_positions_overlap_and_never_the_first_token() -> None:
    offsets = [(0, 3), (3, 6), (6, 8), (8, 12)]  # four tokens over 12 characters
    assert span_token_positions(offsets, 4, 7) == [1, 2]  # partial overlaps count
    assert span_token_positions(offsets, 6, 8) == [2]  # exact
    assert span_token_positions(offsets, 0, 5) == [1]  # token 0 has nothing to predict it
    assert span_token_positions(offsets, 12, 14) == []


def test_held_out_pairs_share_their_planted_fact() -> None:
    pairs = held_out_pairs(seed=1000, num_entities=3)
    assert len(pairs) == 3
    for pair in pairs:
        fact = f"{pair['place'].capitalize()}: {pair['code']}."
        assert fact in pair["use"] and fact in pair["definition"] and pair["use"] != pair["definition"]
