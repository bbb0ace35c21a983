"""The one seed derivation (``posttrain.common.seeds.derive_seed``) and the per-sample seeds built on it."""

from __future__ import annotations

import hashlib

import pytest

from posttrain.common.seeds import derive_seed
from posttrain.engines.base import sample_seed, sample_seeds


def test_a_hand_checked_value() -> None:
    # sha256(b"3:'eval':2:1"), first 8 bytes little-endian, top bit cleared
    digest = hashlib.sha256(b"3:'eval':2:1").digest()
    assert derive_seed(3, "eval", 2, 1) == int.from_bytes(digest[:8], "little") & (2**63 - 1) == 124307679671076339
    assert derive_seed(0, 0, bits=31) == 171340460 == sample_seed(0, 0)  # the per-sample seed engines always had


def test_same_parts_repeat_and_distinct_parts_differ() -> None:
    assert derive_seed(7, "rollout", 3, 1) == derive_seed(7, "rollout", 3, 1)
    variants = [derive_seed(7, "rollout", 3, 1), derive_seed(7, "rollout", 1, 3), derive_seed(7, "eval", 3, 1),
                derive_seed(8, "rollout", 3, 1), derive_seed(7, "rollout", 3), derive_seed(7, "rollout:3", 1),
                derive_seed(7, "3", 1), derive_seed(7, 3, 1)]
    assert len(set(variants)) == len(variants)
    # a linear formula collides where the hash does not: 0 * a + 1 * b == 1 * b + 0 * a
    assert derive_seed(0, 1) != derive_seed(1, 0)


def test_widths_and_bad_parts() -> None:
    seeds = [derive_seed(s, "x") for s in range(200)]
    assert all(0 <= s < 2**63 for s in seeds) and max(seeds) >= 2**62
    assert all(0 <= derive_seed(s, "x", bits=31) < 2**31 for s in range(200))
    with pytest.raises(ValueError, match="bits"):
        derive_seed(0, bits=32)
    with pytest.raises(TypeError, match="float"):
        derive_seed(0, 1.5)
    with pytest.raises(TypeError, match="bool"):
        derive_seed(True)


def test_a_group_of_copies_counts_up_from_its_first_seed() -> None:
    first, other = sample_seed(5, 0), sample_seed(5, 3)
    assert sample_seeds(5, [[1], [1], [1], [2]]) == [first, first + 1, first + 2, other]
