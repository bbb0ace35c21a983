"""Span precision / recall of span feedback against the program's labels, and the chance baselines it must beat
(Text2Grad, arXiv 2505.22338; ``posttrain text2grad-eval``, ``rewards.text2grad.evaluate``).

The paper's ``3_metrics.py`` scores its reward model's spans against held-out annotations at the word level and
by span overlap. Here the labels are exact (``posttrain.tasks.step_arithmetic.program_feedback``) and, for each
kind (``poor``, ``good``), ``span_metrics`` gives:

- token level: precision / recall / F1 of the response characters the predicted spans cover (after
  ``alignment.match_span``) against those the program's spans cover; with the character tokenizer of the
  embedded models a character is a token;
- span overlap: a predicted span is correct when its located extent overlaps a gold span of the same kind
  (precision), a gold span is found when a predicted span overlaps it (recall);
- ``incomplete``: precision / recall of the flag "steps are missing at the end" over responses.

Unparsable outputs count as predicting nothing (they lower recall) and are reported as ``parse_rate``;
``exact_match`` is the share of outputs whose parsed feedback equals the label.

A number means something only beside what no reading of the response scores (``chance_baselines``), computed
with the same ``span_metrics`` on the same labels:

- ``all_good``: every step (each comma-separated piece of the response) called good, nothing poor, never
  incomplete;
- ``random``: each step called poor with probability ``base_rate`` (the share of the labels' steps that are
  poor), else good, and a response called incomplete at the labels' rate of incomplete responses; its metrics
  are the **mean over ``RANDOM_DRAWS`` seeded draws** (the expectation of a ratio has no closed form here).

``verdict`` says whether the predictions' poor-span token precision **and** recall are both above the random
flagger's by at least ``MARGIN``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from posttrain.algos.span_reward.alignment import match_span
from posttrain.tasks.span_feedback import SpanFeedback

KINDS = ("poor", "good")
RANDOM_DRAWS = 32
"""Seeded draws the random flagger's metrics are averaged over."""
RANDOM_SEED = 0
MARGIN = 0.05
"""How far above the random flagger's poor-span token precision and recall a critic must be to beat chance."""


def _located(spans: Sequence[str], response: str) -> list[tuple[int, int]]:
    return [w for w in (match_span(s, response) for s in spans) if w is not None]


def _overlaps(x: tuple[int, int], ys: list[tuple[int, int]]) -> bool:
    return any(x[0] < y[1] and y[0] < x[1] for y in ys)


def _prf(tp: float, n_pred: float, n_gold: float) -> dict[str, float]:
    p = tp / n_pred if n_pred else (1.0 if not n_gold else 0.0)
    r = tp / n_gold if n_gold else 1.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def span_metrics(predicted: Sequence[SpanFeedback | None], gold: Sequence[SpanFeedback],
                 responses: Sequence[str]) -> dict[str, Any]:
    """Token-level and span-overlap P/R/F1 per kind, the ``incomplete`` flag's P/R/F1, parse rate and exact
    match (module docstring)."""
    if not len(predicted) == len(gold) == len(responses):
        raise ValueError(f"{len(predicted)} predictions, {len(gold)} labels, {len(responses)} responses")
    out: dict[str, Any] = {"n": len(gold), "parse_rate": sum(p is not None for p in predicted) / max(1, len(gold)),
                           "exact_match": sum(p == g for p, g in zip(predicted, gold)) / max(1, len(gold))}
    for kind in KINDS:
        tok = [0, 0, 0]  # tp, predicted, gold characters
        span = [0, 0, 0, 0]  # predicted correct, predicted, gold found, gold
        for pred, lab, response in zip(predicted, gold, responses):
            p_ext = _located(getattr(pred, kind), response) if pred is not None else []
            g_ext = _located(getattr(lab, kind), response)
            p_chars = {i for a, b in p_ext for i in range(a, b)}
            g_chars = {i for a, b in g_ext for i in range(a, b)}
            tok[0] += len(p_chars & g_chars)
            tok[1] += len(p_chars)
            tok[2] += len(g_chars)
            span[0] += sum(_overlaps(x, g_ext) for x in p_ext)
            span[1] += len(p_ext)
            span[2] += sum(_overlaps(y, p_ext) for y in g_ext)
            span[3] += len(g_ext)
        out[kind] = {"token": _prf(*tok),
                     "span": {"precision": span[0] / span[1] if span[1] else float(not span[3]),
                              "recall": span[2] / span[3] if span[3] else 1.0}}
        s = out[kind]["span"]
        s["f1"] = 2 * s["precision"] * s["recall"] / (s["precision"] + s["recall"]) if sum(s.values()) else 0.0
    flagged = [p is not None and p.incomplete for p in predicted]
    out["incomplete"] = _prf(sum(f and g.incomplete for f, g in zip(flagged, gold)), sum(flagged),
                             sum(g.incomplete for g in gold))
    return out


def response_steps(response: str) -> list[str]:
    """The steps a flagger can quote: the response's comma-separated pieces, stripped (as ``program_feedback``
    splits it)."""
    return [p.strip() for p in response.split(",") if p.strip()]


def base_rates(gold: Sequence[SpanFeedback]) -> dict[str, float]:
    """``poor_steps``: the share of the labels' steps that are poor; ``incomplete``: the share of labels that
    call the response incomplete."""
    poor = sum(len(g.poor) for g in gold)
    steps = poor + sum(len(g.good) for g in gold)
    return {"poor_steps": poor / steps if steps else 0.0,
            "incomplete": sum(g.incomplete for g in gold) / max(1, len(gold))}


def _flagged(response: str, poor_probability: float, incomplete_probability: float,
             rng: random.Random) -> SpanFeedback:
    good: list[str] = []
    poor: list[str] = []
    for step in response_steps(response):
        (poor if rng.random() < poor_probability else good).append(step)
    return SpanFeedback("spans", good=tuple(good), poor=tuple(poor), incomplete=rng.random() < incomplete_probability)


def _mean_metrics(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The leaf-wise mean of metric dicts of one shape."""
    first = runs[0]
    return {k: _mean_metrics([r[k] for r in runs]) if isinstance(first[k], dict) else sum(r[k] for r in runs) / len(runs)
            for k in first}


def chance_baselines(gold: Sequence[SpanFeedback], responses: Sequence[str], draws: int = RANDOM_DRAWS,
                     seed: int = RANDOM_SEED) -> dict[str, Any]:
    """``span_metrics`` of the all-good flagger and the mean over ``draws`` seeded draws of the random flagger at
    the labels' base rates (module docstring), on ``gold`` and ``responses``."""
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    rates = base_rates(gold)
    all_good = [SpanFeedback("spans", good=tuple(response_steps(r))) for r in responses]
    rng = random.Random(seed)
    runs = [span_metrics([_flagged(r, rates["poor_steps"], rates["incomplete"], rng) for r in responses], gold,
                         responses) for _ in range(draws)]
    return {"base_rate": rates, "all_good": span_metrics(all_good, gold, responses),
            "random": {"draws": draws, "seed": seed, "poor_probability": rates["poor_steps"],
                       "incomplete_probability": rates["incomplete"], **_mean_metrics(runs)}}


def verdict(metrics: dict[str, Any], random_baseline: dict[str, Any], margin: float = MARGIN) -> dict[str, Any]:
    """Whether ``metrics``' poor-span token precision and recall are both at least ``margin`` above the random
    flagger's, with the four numbers."""
    mine, chance = metrics["poor"]["token"], random_baseline["poor"]["token"]
    beats = all(mine[k] >= chance[k] + margin for k in ("precision", "recall"))
    return {"beats_chance": beats, "margin": margin, "measure": "poor-span token precision and recall",
            "precision": mine["precision"], "recall": mine["recall"],
            "random_precision": chance["precision"], "random_recall": chance["recall"]}
