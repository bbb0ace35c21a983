"""DuPO's unknown-component selection (She et al. 2025, arXiv 2508.14460, section 3, "filtering").

Over a pool of candidate answers to one primal question, a dual question is kept only if it is

1. answerable: at least one candidate answer lets the dual solver recover the hidden number, and
2. unique: at most one *distinct* candidate answer does,

so exactly one answer in the pool leads to a correct dual: a one-to-one signal. A candidate "lets the solver
recover" the number when at least ``threshold`` of its K dual samples do (with K = 1: when the one does).
The paper runs this once offline with an auxiliary model's pool (32 then 8 candidates per question) and does
not say how K > 1 dual samples count; the threshold of one half is our choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SOLVED_THRESHOLD = 0.5
"""Backward accuracy at which a candidate answer counts as solving the dual question."""


@dataclass(frozen=True)
class Selection:
    """The verdict on one dual question over one pool of distinct candidate answers."""

    answerable: bool
    unique: bool

    @property
    def kept(self) -> bool:
        return self.answerable and self.unique


def select_unknown(accuracy_by_answer: Mapping[str, float], threshold: float = SOLVED_THRESHOLD) -> Selection:
    """Answerable and unique over ``accuracy_by_answer`` (distinct answer -> backward accuracy in [0, 1])."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    for answer, accuracy in accuracy_by_answer.items():
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"backward accuracy of answer {answer!r} must be in [0, 1], got {accuracy}")
    solving = sum(accuracy >= threshold for accuracy in accuracy_by_answer.values())
    return Selection(answerable=solving >= 1, unique=solving <= 1)
