"""Top-k token scores (vLLM / HTTP engines) against hand-computed values."""

from __future__ import annotations

import math

import pytest

from posttrain.engines.topk import scores_from_topk

LOG = math.log


def test_scores_from_topk_by_hand():
    # position 1: the observed token ties with another at 0.25 under a 0.5 head; nothing in the tail
    # position 2: the observed token (0.1) is outside the top-2 (0.6, 0.2); tail 0.2 holds it
    s = scores_from_topk([7, 8], [LOG(0.25), LOG(0.1)], [[LOG(0.5), LOG(0.25), LOG(0.25)], [LOG(0.6), LOG(0.2)]],
                         entropy=True, mass_above=True)
    assert s.token_ids == [7, 8] and not s.exact
    assert s.logprobs == pytest.approx([LOG(0.25), LOG(0.1)])
    assert s.entropies == pytest.approx([1.5 * LOG(2), -(0.6 * LOG(0.6) + 0.2 * LOG(0.2) + 0.2 * LOG(0.2))])
    assert s.mass_above == pytest.approx([0.5, 0.8])
    assert s.tied_mass == pytest.approx([0.5, 0.1])  # outside the top-k: the observed token alone
    plain = scores_from_topk([7], [None], [[LOG(0.5)]], entropy=False, mass_above=False)
    assert plain.logprobs == [-math.inf] and plain.entropies is None and plain.mass_above is None
    assert plain.tied_mass is None
    with pytest.raises(ValueError, match="misaligned: 2 tokens, 1 observed"):
        scores_from_topk([7, 8], [LOG(0.5)], [[LOG(0.5)]], entropy=True, mass_above=False)
