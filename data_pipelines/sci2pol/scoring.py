"""Sci2Pol-Bench metrics: label extraction, exact-label micro-F1 and bootstrap standard errors.

Micro-F1 as the paper's ``Eval.py`` computes it (sklearn's ``f1_score(average="micro")`` over every label
that occurs, gold or predicted): a correct label is a true positive; any wrong answer, an invalid one (no
label, ``None``) included, is a false positive for what it predicted and a false negative for the gold
label. So F1 = 2 TP / (2 TP + FP + FN) = TP / n, the accuracy. The paper scores the
raw response string (``strict``); ``extract_label`` is the robust extractor (JSON ``verdict``, option
letters, first label named), which moves scores away from the paper's, so both are reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np

_LETTER = re.compile(r"^\s*(?:answer\s*[:\-]?\s*)?[\(\[]?([A-Za-z])[\)\].:]?(?:\s|$)", re.IGNORECASE)
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*[\(\[]?([A-Za-z])\b[\)\]]?", re.IGNORECASE)


def normalise(text: str) -> str:
    """Lower case, quotes/punctuation at the ends stripped, inner whitespace collapsed."""
    return " ".join(text.strip().strip("\"'`.,;:!()[]{} \n").lower().split())


def extract_label(response: str, labels: Sequence[str]) -> str | None:
    """The label of ``labels`` that ``response`` gives, or None. Tried in order: the whole response;
    a JSON object's ``verdict``/``answer``/``label`` field; a leading or "answer is X" option letter
    (when the labels are letters); the earliest label named in the text (longest first on ties)."""
    by_norm = {normalise(label): label for label in labels}
    whole = normalise(response)
    if whole in by_norm:
        return by_norm[whole]
    match = re.search(r"\{.*?\}", response, re.DOTALL)
    if match:
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            for key in ("verdict", "answer", "label"):
                if isinstance(obj.get(key), str) and normalise(obj[key]) in by_norm:
                    return by_norm[normalise(obj[key])]
    if all(len(n) == 1 for n in by_norm):
        for pattern in (_ANSWER_IS, _LETTER):
            found = pattern.search(response)
            if found and found.group(1).lower() in by_norm:
                return by_norm[found.group(1).lower()]
        return None
    low = response.lower()
    best: tuple[int, int, str] | None = None
    for norm, label in by_norm.items():
        found = re.search(r"(?<![a-z0-9])" + re.escape(norm) + r"(?![a-z0-9])", low)
        if found and (best is None or (found.start(), -len(norm)) < (best[0], best[1])):
            best = (found.start(), -len(norm), label)
    return best[2] if best else None


def micro_f1(gold: Sequence[str], predicted: Sequence[str | None]) -> float:
    """Micro-F1 over every label, an invalid answer (``None``) being a wrong label (module docstring): equal
    to accuracy; 0.0 when there is nothing to score."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    tp = sum(1 for g, p in zip(gold, predicted) if p == g)
    fp = fn = len(gold) - tp  # each wrong answer: a false positive for its prediction, a false negative for gold
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def bootstrap_se(n: int, statistic: Callable[[np.ndarray], float], resamples: int = 1000, seed: int = 42) -> float:
    """Standard error of ``statistic(indices)`` over ``resamples`` bootstrap resamples of ``range(n)``
    (with replacement; sample standard deviation, ddof=1), as the paper (B = 1000, seed 42)."""
    if n < 2:
        return 0.0
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, size=n)) for _ in range(resamples)]
    return float(np.std(values, ddof=1))
