"""Whether a scorer's tokenizer can represent a text exactly: ``decode(tokenize(text)) == text``.

A character tokenizer (the embedded tiny models') turns characters outside its alphabet into ``<unk>``, so
scores computed on such a text would be those of another text. EntropyLong refuses the run naming the record;
DMAP rejects the record with the reason.
"""

from __future__ import annotations

from typing import Any

from data_pipelines.common.backends import tokenize


def representation_problem(tokenizer: Any, text: str, ids: list[int] | None = None) -> str | None:
    """Why ``tokenizer`` cannot give ``text`` back exactly (where the round trip first differs), or None;
    ``ids``: the text's token ids when the caller has them already (not tokenised again)."""
    back = tokenizer.decode(tokenize(tokenizer, text) if ids is None else ids)
    if back == text:
        return None
    where = next((i for i, (x, y) in enumerate(zip(text, back)) if x != y), min(len(text), len(back)))
    return (f"the tokenizer cannot represent this text exactly (from character {where}: "
            f"{text[where:where + 12]!r} comes back as {back[where:where + 12]!r})")


def check_representable(tokenizer: Any, scorer: str, text: str, what: str, ids: list[int] | None = None) -> None:
    """``ValueError`` naming ``what`` (the text) and ``scorer`` unless ``tokenizer`` represents ``text`` exactly
    (``ids``: its token ids, when already computed)."""
    problem = representation_problem(tokenizer, text, ids)
    if problem:
        raise ValueError(f"{what}: scorer {scorer!r}: {problem}; use a scorer whose tokenizer covers it "
                         "(e.g. --model smollm2-135m)")
