"""The one seed derivation: every seed the project computes from another seed goes through ``derive_seed``.

A derived seed is a SHA-256 of the base seed and named parts (a step, a rank, a sample index, a purpose such as
``"eval"``), so different parts give unrelated seeds (no two formulas can collide the way ``seed * a + step * b``
does), the same parts repeat in every process, and nearby base seeds share nothing.
"""

from __future__ import annotations

import hashlib

SEED_BITS = (31, 63)
"""The widths ``derive_seed`` returns: 31 bits fit every engine's seed type (vLLM, numpy, a signed int32); 63 bits
fit a ``torch.Generator`` and a signed int64."""


def derive_seed(seed: int, *parts: int | str, bits: int = 63) -> int:
    """The seed derived from ``seed`` and ``parts``: the first 8 bytes (little-endian) of the SHA-256 of
    ``seed`` and the parts' ``repr``s joined by ``:``, kept to ``bits`` bits (31 or 63).

    Integers appear as their digits and strings quoted, so ``derive_seed(s, i, bits=31)`` is the SHA-256 of
    ``"s:i"`` and a string part never reads as two parts.

    >>> derive_seed(0, 0, bits=31) == int.from_bytes(hashlib.sha256(b"0:0").digest()[:8], "little") & (2**31 - 1)
    True
    """
    if bits not in SEED_BITS:
        raise ValueError(f"bits = {bits!r} is invalid: derive_seed returns {SEED_BITS[0]} or {SEED_BITS[1]} bits")
    for part in (seed, *parts):
        if isinstance(part, bool) or not isinstance(part, (int, str)):
            raise TypeError(f"derive_seed takes int and str parts, not {type(part).__name__} ({part!r})")
    text = ":".join(repr(part) for part in (seed, *parts))
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**bits - 1)
