"""``posttrain text2grad-eval``: a span reward model's precision / recall against the program's labels, beside the
chance baselines, on two held-out splits (Text2Grad, arXiv 2505.22338).

The metrics and baselines are ``rewards.text2grad.span_metrics``. The splits, both on ``step-arithmetic``'s test
problems (disjoint from every warm start's):

- ``noisy``: the critic's own task's test split (``step-arithmetic-feedback`` or its ``-nocritique`` twin): one
  response per problem with ``noisy_response``'s injected step errors (35% right), labels its targets;
- ``policy_samples``: one response per problem sampled from the warm-start policy ``causal-step-arithmetic``
  (``rewards.text2grad.policy_samples``; temperature ``POLICY_TEMPERATURE``, seed ``POLICY_SEED``), whose errors
  come from its ``distractor``; labels ``program_feedback``. This is what the critic scores during RL.

Each split reports the critic's ``span_metrics``, the ``all_good`` and ``random`` baselines with the ``base_rate``,
and a ``verdict`` (poor-span token precision and recall both ``MARGIN`` above the random flagger's). The top-level
``verdict`` is the ``policy_samples`` split's: the distribution the trainer feeds the critic. Greedy decoding
through ``HFRolloutEngine``, one intra-op thread. ``--recipe``: an embedded span reward model (built on first
use); ``--model DIR``: any compact-style one. ``--output`` also writes the JSON (the benchmarks keep
``benchmarks/results/text2grad_span_rm*.json``); ``--store`` writes it beside the embedded critic's build
(``posttrain.algos.span_reward.stored_eval``), where ``--algo text2grad --span_oracle false`` reads it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain.algos.span_reward import SPAN_RM_RECIPES
from posttrain.algos.span_reward.scorer import SpanRewardModel
from posttrain.algos.span_reward.stored_eval import write_stored_eval
from posttrain.common.cli_help import CommandParser, summary_command
from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.tiny import RECIPES, build_tiny
from posttrain.tasks import TASKS
from posttrain.tasks.span_feedback import SpanFeedback, parse_feedback
from posttrain.tasks.step_arithmetic import program_feedback
from rewards.text2grad.policy_samples import POLICY_RECIPE, policy_responses
from rewards.text2grad.span_metrics import MARGIN, chance_baselines, span_metrics, verdict

POLICY_TEMPERATURE, POLICY_SEED = 0.7, 0
"""The policy-sample split: the benchmark's sampling temperature, one fixed seed."""


def _critic(model_dir: str, max_batch_size: int) -> SpanRewardModel:
    engine = HFRolloutEngine(load_causal_lm(model_dir), load_tokenizer(model_dir), max_batch_size=max_batch_size)
    return SpanRewardModel(engine, "spans", sampling=SamplingParams(max_new_tokens=160, temperature=0.0),
                           style="compact", max_prompt_tokens=128)


def score_split(critic: SpanRewardModel, problems: Sequence[str], responses: Sequence[str],
                gold: Sequence[SpanFeedback]) -> dict[str, Any]:
    """The critic's ``span_metrics`` on one split, with the chance baselines and the verdict."""
    parsed = critic.feedback(problems, responses)
    predicted = [p if isinstance(p, SpanFeedback) else None for p in parsed]
    metrics = span_metrics(predicted, gold, responses)
    baselines = chance_baselines(gold, responses)
    return {**metrics, "base_rate": baselines.pop("base_rate"), "baselines": baselines,
            "verdict": verdict(metrics, baselines["random"])}


def evaluate_model(model_dir: str, n: int = 256, max_batch_size: int = 64,
                   task: str = "step-arithmetic-feedback") -> dict[str, Any]:
    """Both splits (module docstring) of the compact-style span reward model at ``model_dir`` on ``n`` held-out
    problems; ``task`` is the critic's SFT task (its test split is the ``noisy`` one)."""
    import torch

    torch.set_num_threads(1)
    critic = _critic(model_dir, max_batch_size)
    examples = TASKS.get(task)().split("test")[:n]
    problems = [e.columns["problem"] for e in examples]
    noisy = [e.columns["response"] for e in examples]
    sampled = policy_responses(problems, POLICY_TEMPERATURE, POLICY_SEED)
    splits = {"noisy": score_split(critic, problems, noisy, [parse_feedback(e.answer, "spans") for e in examples]),
              "policy_samples": score_split(critic, problems, sampled,
                                            [program_feedback(p, r) for p, r in zip(problems, sampled)])}
    return {"splits": splits, "verdict": splits["policy_samples"]["verdict"]}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="posttrain text2grad-eval",
                           description="Span precision / recall of a Text2Grad span reward model against "
                           "the step-arithmetic program's labels, beside the all-good and random baselines, on "
                           "held-out noisy responses and held-out samples of the warm-start policy.\nWith no "
                           "--model: an embedded tiny span reward model (--recipe, built on first use).")
    parser.add_argument("--model", default=None, help="A span reward model folder (compact style, trained on "
                        "--recipe's task); default: the embedded --recipe.")
    parser.add_argument("--recipe", default=SPAN_RM_RECIPES[0], choices=list(SPAN_RM_RECIPES),
                        help="The embedded span reward model: reward-text2grad (critique, then spans) or "
                        "reward-text2grad-nocritique (spans only); its task gives the noisy split's labels.")
    parser.add_argument("--n", type=int, default=256, help="Held-out problems per split.")
    parser.add_argument("--output", type=Path, default=None, help="Also write the JSON summary here.")
    parser.add_argument("--store", action="store_true", help="Also store the summary beside the embedded "
                        "--recipe's build, where --algo text2grad --span_oracle false checks it (not with --model).")
    return parser


def text2grad_eval_main(argv: list[str] | None = None) -> int:
    """``posttrain text2grad-eval``: the JSON summary of ``evaluate_model``."""
    def check(args: argparse.Namespace) -> None:
        if args.n < 1:
            raise ValueError(f"--n must be >= 1, got {args.n}")
        if args.store and args.model:
            raise ValueError("--store writes beside an embedded --recipe's build; it takes no --model")

    def run(args: argparse.Namespace) -> dict[str, Any]:
        started = time.time()
        recipe = RECIPES.get(args.recipe)
        model = args.model or str(build_tiny(recipe.name))
        summary: dict[str, Any] = {"command": "posttrain text2grad-eval" + (f" --model {args.model}" if args.model else "")
                                   + (f" --recipe {args.recipe}" if args.recipe != SPAN_RM_RECIPES[0] else "")
                                   + (f" --n {args.n}" if args.n != 256 else "") + (" --store" if args.store else ""),
                                   "model": model}
        if args.model is None:
            summary["recipe"] = {"name": recipe.name, "task": recipe.task,
                                 **{k: getattr(recipe, k) for k in ("warm_start_steps", "batch_size", "lr",
                                                                     "hidden_size", "num_layers", "data_version")}}
        summary["held_out"] = {
            "noisy": f"{recipe.task} test split: problems disjoint from the warm starts', one response each with "
                     "injected step errors (35% right)",
            "policy_samples": f"the same problems, one response each sampled from {POLICY_RECIPE} at temperature "
                              f"{POLICY_TEMPERATURE} (seed {POLICY_SEED}), labelled by program_feedback"}
        summary["verdict_rule"] = (f"beats chance: poor-span token precision and recall both >= the random "
                                   f"flagger's + {MARGIN} (random: each step poor at the split's base rate, mean "
                                   "of seeded draws); the top-level verdict is the policy_samples split's")
        summary.update(evaluate_model(model, args.n, task=recipe.task))
        summary["wall_s"] = round(time.time() - started, 1)
        if args.store:
            summary["stored"] = str(write_stored_eval(Path(model), summary))
        return summary

    return summary_command(argv, build_parser(), check, run)
