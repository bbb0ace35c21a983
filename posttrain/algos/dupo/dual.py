"""DuPO's dual reward (She et al. 2025, arXiv 2508.14460, section 3): r = exp(-lambda * d(x_u, x̂_u)).

x_u is the hidden part of the input and x̂_u what the dual solver recovered from the primal output.

- Math: d is variable equality, ``equality_distance`` = 0 when the recovered value equals the hidden
  number (``posttrain.tasks.verifiers.math_equal``), else 1, so the reward is binary (1 or exp(-lambda)).
- Text-to-text duals (back-translation): d = 1 - sentence BLEU / 100 (sacrebleu), in [0, 1].

Deviation: for translation the paper uses r = BLEU(x, back-translation) itself; here every dual goes through
the same exp(-lambda * d), which is monotone in BLEU and, for lambda = 1, close to it on small d. Under GRPO's
group normalisation any lambda > 0 gives the same advantages for a binary distance (an affine change of the
reward), so lambda only matters for graded distances such as BLEU or averages over several dual questions.

``final_answer`` takes the answer a primal completion states (the content of the last ``\\boxed{}``, else the
last number), which is what the dual question is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from posttrain.tasks.verifiers import math_equal

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:/\d+)?")
_BOXED = "\\boxed{"


def _last_boxed(text: str) -> str | None:
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth, i = 1, start + len(_BOXED)
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip() or None
    return None


def final_answer(completion: str) -> str | None:
    """The answer a completion states: its last ``\\boxed{...}``, else its last number; None if neither."""
    boxed = _last_boxed(completion)
    if boxed is not None:
        return boxed
    numbers = _NUMBER.findall(completion)
    return numbers[-1] if numbers else None


def equality_distance(recovered: str, hidden: str) -> float:
    """Variable equality (the paper's math distance): 0.0 if ``recovered`` states the hidden value, else 1.0."""
    answer = final_answer(recovered)
    return 0.0 if answer is not None and math_equal(answer, hidden) else 1.0


def bleu_distance(hypothesis: str, reference: str) -> float:
    """1 - sentence BLEU(hypothesis, reference) / 100 with sacrebleu's defaults (exponential smoothing).

    Clamped to [0, 1]: sacrebleu's score of an exact copy can exceed 100 by a float round-off."""
    import sacrebleu

    return min(1.0, max(0.0, 1.0 - sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100.0))


def dual_reward(distance: float, lam: float) -> float:
    """exp(-lam * distance): 1 for a perfect recovery, exp(-lam) at distance 1."""
    if lam <= 0:
        raise ValueError(f"lambda must be > 0, got {lam}")
    if not 0.0 <= distance <= 1.0:
        raise ValueError(f"a dual distance must be in [0, 1], got {distance}")
    return math.exp(-lam * distance)


def back_translation_rewards(sources: Sequence[str], back_translations: Sequence[str], lam: float) -> list[float]:
    """exp(-lam * bleu_distance) per (source, back-translation) pair: the text-to-text dual reward."""
    if len(sources) != len(back_translations):
        raise ValueError(f"{len(sources)} sources but {len(back_translations)} back-translations")
    return [dual_reward(bleu_distance(back, source), lam) for source, back in zip(sources, back_translations)]
