"""Span precision / recall of a span reward model against the program's labels (Text2Grad, arXiv 2505.22338).

The paper's ``3_metrics.py`` scores its reward model's spans against held-out annotations at the word
level and by span overlap. Here the labels are exact (``posttrain.tasks.step_arithmetic.program_feedback``
on held-out problems with injected step errors) and, for each kind (``poor``, ``good``):

- token level: precision / recall / F1 of the response characters the predicted spans cover (after
  ``alignment.match_span``) against those the program's spans cover; with the character tokenizer of the
  embedded models a character is a token;
- span overlap: a predicted span is correct when its located extent overlaps a gold span of the same kind
  (precision), a gold span is found when a predicted span overlaps it (recall).

Unparsable outputs count as predicting nothing (they lower recall) and are reported as ``parse_rate``;
``exact_match`` is the share of outputs whose parsed feedback equals the label (the program's feedback as the
model's training task writes it: without the critique for a spans-only model). ``posttrain text2grad-eval``
runs it on an embedded span reward model (``--recipe``: ``reward-text2grad``, or the spans-only
``reward-text2grad-nocritique``) or on ``--model DIR``, and writes the JSON summary (``--output``; the
benchmarks keep ``benchmarks/results/text2grad_span_rm*.json``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain.algos.span_reward import SPAN_RM_RECIPES
from posttrain.algos.span_reward.alignment import match_span
from posttrain.algos.span_reward.scorer import SpanRewardModel
from posttrain.common.cli_help import CommandParser, summary_command
from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.tiny import RECIPES, build_tiny
from posttrain.tasks import TASKS
from posttrain.tasks.span_feedback import SpanFeedback, parse_feedback

KINDS = ("poor", "good")


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
    """Token-level and span-overlap P/R/F1 per kind, parse rate and exact match (module docstring)."""
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
    return out


def evaluate_model(model_dir: str, n: int = 256, max_batch_size: int = 64,
                   task: str = "step-arithmetic-feedback") -> dict[str, Any]:
    """``span_metrics`` of the compact-style span reward model at ``model_dir`` on ``n`` held-out examples of
    ``task`` (``step-arithmetic-feedback`` or its ``-nocritique`` twin; greedy decoding through
    ``HFRolloutEngine``); the labels are the examples' own targets, parsed."""
    import torch


    torch.set_num_threads(1)
    examples = TASKS.get(task)().split("test")[:n]
    engine = HFRolloutEngine(load_causal_lm(model_dir), load_tokenizer(model_dir), max_batch_size=max_batch_size)
    rm = SpanRewardModel(engine, "spans", sampling=SamplingParams(max_new_tokens=160, temperature=0.0),
                         style="compact", max_prompt_tokens=128)
    problems = [e.columns["problem"] for e in examples]
    responses = [e.columns["response"] for e in examples]
    parsed = rm.feedback(problems, responses)
    predicted = [p if isinstance(p, SpanFeedback) else None for p in parsed]
    gold = [parse_feedback(e.answer, "spans") for e in examples]
    return span_metrics(predicted, gold, responses)


def build_parser() -> argparse.ArgumentParser:

    parser = CommandParser(prog="posttrain text2grad-eval",
                           description="Span precision / recall of a Text2Grad span reward model against "
                           "the step-arithmetic program's labels, on held-out problems.\nWith no --model: an "
                           "embedded tiny span reward model (--recipe, built on first use).")
    parser.add_argument("--model", default=None, help="A span reward model folder (compact style, trained on "
                        "--recipe's task); default: the embedded --recipe.")
    parser.add_argument("--recipe", default=SPAN_RM_RECIPES[0], choices=list(SPAN_RM_RECIPES),
                        help="The embedded span reward model: reward-text2grad (critique, then spans) or "
                        "reward-text2grad-nocritique (spans only); its task gives the held-out labels.")
    parser.add_argument("--n", type=int, default=256, help="Held-out examples.")
    parser.add_argument("--output", type=Path, default=None, help="Also write the JSON summary here.")
    return parser


def text2grad_eval_main(argv: list[str] | None = None) -> int:
    """``posttrain text2grad-eval``: the JSON summary of ``evaluate_model``."""
    def check(args: argparse.Namespace) -> None:
        if args.n < 1:
            raise ValueError(f"--n must be >= 1, got {args.n}")

    def run(args: argparse.Namespace) -> dict[str, Any]:
        started = time.time()
        recipe = RECIPES.get(args.recipe)
        model = args.model or str(build_tiny(recipe.name))
        summary: dict[str, Any] = {"command": "posttrain text2grad-eval" + (f" --model {args.model}" if args.model else "")
                                   + (f" --recipe {args.recipe}" if args.recipe != SPAN_RM_RECIPES[0] else "")
                                   + (f" --n {args.n}" if args.n != 256 else ""), "model": model}
        if args.model is None:
            summary["recipe"] = {"name": recipe.name, "task": recipe.task,
                                 **{k: getattr(recipe, k) for k in ("warm_start_steps", "batch_size", "lr",
                                                                     "hidden_size", "num_layers")}}
        summary["held_out"] = (f"{recipe.task} test split: problems disjoint from the warm start's, one response "
                               "each with injected step errors (35% right)")
        summary.update(evaluate_model(model, args.n, task=recipe.task))
        summary["wall_s"] = round(time.time() - started, 1)
        return summary

    return summary_command(argv, build_parser(), check, run)
