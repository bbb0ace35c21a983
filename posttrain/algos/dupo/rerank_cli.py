"""``posttrain dupo-rerank``: DuPO's training-free best-of-N by backward accuracy, on any generation engine.

    posttrain dupo-rerank                                   # embedded default: tiny word-arithmetic model
    posttrain dupo-rerank --model smollm2-135m --n 4 8 --k 8
    posttrain dupo-rerank --engine http://127.0.0.1:8000 --model smollm2-135m

Samples max(N) solutions per held-out question once; for each N in ``--n`` the first N samples are reranked
(``posttrain.algos.dupo.rerank``) and compared, against the gold answers, with one sample, majority vote and
pass@N. Prints (and with ``--output`` writes) the JSON summary. The gold answers only grade the choices.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from posttrain.algos.dupo.rerank import rerank_choice, sample_solutions, score_answers, summarise
from posttrain.common.cli_help import CommandParser, summary_command
from posttrain.common.seeds import derive_seed
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.engines.cli import add_engine_arguments, check_engine_argument, command_engine
from posttrain.tasks import TASKS

ENGINES = ("hf", "vllm", "http")


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="posttrain dupo-rerank", description=__doc__)
    p.add_argument("--model", default=None, help="Model path, hub id or alias; default: the task's tiny model.")
    p.add_argument("--task", default="word-arithmetic", help="Built-in task whose held-out split is reranked.")
    p.add_argument("--split", default="test", choices=["test", "train"], help="Task split to rerank.")
    p.add_argument("--examples", type=int, default=128, help="Questions to rerank (the split's first ones; 0 = all).")
    p.add_argument("--n", type=int, nargs="+", default=[4, 8], help="Primal samples per question (one or more N).")
    p.add_argument("--k", type=int, default=8, help="Dual samples per (dual question, distinct answer) (paper: 8).")
    p.add_argument("--dual_questions", type=int, default=3, help="Most dual questions per problem.")
    p.add_argument("--temperature", type=float, default=1.0, help="Primal sampling temperature.")
    p.add_argument("--dual_temperature", type=float, default=1.0, help="Dual sampling temperature (0 = greedy).")
    p.add_argument("--max_new_tokens", type=int, default=16, help="Longest primal solution, in tokens.")
    p.add_argument("--dual_max_new_tokens", type=int, default=16, help="Longest dual answer, in tokens.")
    p.add_argument("--max_prompt_tokens", type=int, default=1024, help="Longer prompts are rejected with an error.")
    p.add_argument("--system_prompt", default=None, help="Optional system message for primal and dual prompts.")
    add_engine_arguments(p, ENGINES, "Generation engine.")
    p.add_argument("--seed", type=int, default=0, help="Sampling seed.")
    p.add_argument("--output", type=Path, default=None, help="Also write the JSON summary here.")
    return p


def _check(args: argparse.Namespace) -> None:
    for name in ("k", "dual_questions", "max_new_tokens", "dual_max_new_tokens", "batch_size"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if any(n < 1 for n in args.n):
        raise ValueError(f"--n values must be >= 1, got {args.n}")
    if args.examples < 0:
        raise ValueError(f"--examples must be >= 0, got {args.examples}")
    if args.k > 1 and args.dual_temperature == 0:
        raise ValueError(f"--k {args.k} greedy dual samples are all the same: use --k 1 or a --dual_temperature > 0")
    check_engine_argument(args.engine, ENGINES)


def build_engine(args: argparse.Namespace) -> GenerationEngine:
    """The engine ``--engine`` names, on ``--model`` (or the task's tiny model)."""
    return command_engine(args, args.model, args.task)


def run(args: argparse.Namespace, engine: GenerationEngine) -> dict[str, Any]:
    """Sample, score once, rerank for every N; the summary per N plus the settings."""
    task = TASKS.get(args.task)()
    examples = task.split(args.split)
    examples = examples[: args.examples] if args.examples else examples
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)
    dual_params = SamplingParams(max_new_tokens=args.dual_max_new_tokens, temperature=args.dual_temperature,
                                 seed=derive_seed(args.seed, "dual"))
    samples = sample_solutions(engine, examples, max(args.n), params, args.system_prompt, args.max_prompt_tokens)
    scores = score_answers(engine, examples, samples, args.k, dual_params, args.dual_questions, args.system_prompt,
                           args.max_prompt_tokens)
    results = {}
    for n in sorted(set(args.n)):
        choices = [rerank_choice(s, sc, n) for s, sc in zip(samples, scores)]
        results[f"N={n}"] = summarise(task, examples, choices)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return {"settings": settings, "results": results}


def dupo_rerank_main(argv: list[str] | None = None) -> int:
    return summary_command(argv, build_parser(), _check, lambda args: run(args, build_engine(args)))
