"""``posttrain prefix-cluster``: Prefix Clustering, the training-free probe of "Parameter-Efficient Reinforcement
Learning using Prefix Optimization" (ICLR 2026): find one fixed opening that helps a frozen target.

    posttrain prefix-cluster                          # embedded default: the answer-format task's tiny target
    posttrain prefix-cluster --target_model smollm2-135m --task arithmetic --prefix_tokens 16
    posttrain prefix-cluster --output clusters.json

1. One target sample per training question, its first k tokens (``--prefix_tokens``; EOS dropped).
2. The prefixes embedded (positional one-hot of the token ids, ``cluster.prefix_features``), k-means for
   c = 1..``--max_clusters``, c picked by the elbow rule (``cluster.elbow``).
3. Each cluster's representative (the member nearest its centroid) prepended, as token ids, to every training
   question; the target continues; the mean reward is the cluster's train score.
   ``--max_new_tokens`` is the whole answer's budget, prefix included: the target alone writes up to that many
   tokens, a prefixed target continues for that many less the prefix's length, so both arms get the same total.
4. The best representative prepended to every held-out question: held-out accuracy with it and without any
   prefix (the target alone), both at ``--eval_temperature`` (0 = greedy), overall and per ``kind`` column when the
   task's examples have one (the answer-format task's short and long problems).

Prints (and with ``--output`` writes) the JSON summary: the inertias, the clusters (size, representative,
sample members, train score), the chosen prefix and the held-out accuracies.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from posttrain.algos.prefix_rl.algo import EMBEDDED_PREFIX_TOKENS
from posttrain.algos.prefix_rl.cluster import best_cluster, elbow, kmeans, prefix_features, representatives
from posttrain.common.cli_help import CommandParser, summary_command
from posttrain.common.seeds import derive_seed
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.engines.cli import add_engine_arguments, check_engine_argument, command_engine
from posttrain.metrics import ProgressBar
from posttrain.tasks import TASKS
from posttrain.tasks.base import Example, Task
from posttrain.tasks.prompts import encode_prompts

CLUSTERING_PREFIX_TOKENS = 16
"""The paper's k for Prefix Clustering (with ``--target_model``; the embedded default uses
``EMBEDDED_PREFIX_TOKENS``, where its two answer formats part)."""
ENGINES = ("hf", "vllm")
"""The engine kinds ``--engine`` may name (the target is sampled in this process)."""
ANSWER_TOKENS = 40
"""Default answer budget, prefix included. The embedded answer-format task's answers are 10-13 tokens direct
and 27-33 worked (``Answer by steps: 40871+1 so 40872``), + EOS, measured over all its 800 problems with the
tiny models' character tokenizer; 40 holds the longest with room to spare, as the benchmark's trained target
arms get (benchmarks/bench_prefix_rl.py)."""
SAMPLE_MEMBERS = 3
"""Member prefixes shown per cluster in the summary."""


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="posttrain prefix-cluster", description=__doc__)
    p.add_argument("--target_model", default=None, help="Frozen target: path, hub id or alias (smollm2-135m); "
                   "default: the task's embedded tiny target.")
    p.add_argument("--task", default="answer-format", help="Built-in task: train split clustered, test split scored.")
    p.add_argument("--prefix_tokens", type=int, default=None, help=f"k; default {CLUSTERING_PREFIX_TOKENS} (the "
                   f"paper's) with --target_model, {EMBEDDED_PREFIX_TOKENS} on the embedded default.")
    p.add_argument("--max_clusters", type=int, default=8, help="Largest number of clusters the elbow rule considers.")
    p.add_argument("--train_examples", type=int, default=256, help="Training questions used (the first; 0 = all).")
    p.add_argument("--eval_examples", type=int, default=128, help="Held-out questions scored (the first; 0 = all).")
    p.add_argument("--temperature", type=float, default=0.7, help="The target's sampling temperature.")
    p.add_argument("--eval_temperature", type=float, default=None,
                   help="The target's temperature on the held-out questions (0 = greedy, as the trainer's "
                        "evaluation); unset = --temperature.")
    p.add_argument("--max_new_tokens", type=int, default=ANSWER_TOKENS, help="Longest answer in tokens, prefix "
                   "included: the same total budget for the target alone and for prefix + continuation; must "
                   "exceed the prefix length.")
    p.add_argument("--max_prompt_tokens", type=int, default=1024, help="Longer prompts are rejected with an error.")
    p.add_argument("--system_prompt", default=None, help="Optional system message in front of every question.")
    p.add_argument("--dims", type=int, default=4096, help="Width of the hashed prefix embedding.")
    add_engine_arguments(p, ENGINES, "Engine that serves the target.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the samples and of k-means++.")
    p.add_argument("--no_progress", action="store_true", help="No progress bar.")
    p.add_argument("--output", type=Path, default=None, help="Also write the JSON summary here.")
    return p


def _check(args: argparse.Namespace) -> None:
    for name in ("max_clusters", "max_new_tokens", "batch_size", "dims"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.prefix_tokens is not None and not 1 <= args.prefix_tokens < args.max_new_tokens:
        raise ValueError(f"--prefix_tokens must be >= 1 and below --max_new_tokens ({args.max_new_tokens}, the "
                         f"whole answer's budget), got {args.prefix_tokens}")
    for name in ("train_examples", "eval_examples"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name} must be >= 0 (0 = all), got {getattr(args, name)}")
    if args.temperature <= 0:
        raise ValueError(f"--temperature must be > 0 (one sample per question is drawn), got {args.temperature}")
    if args.eval_temperature is not None and args.eval_temperature < 0:
        raise ValueError(f"--eval_temperature must be >= 0 (0 = greedy), got {args.eval_temperature}")
    check_engine_argument(args.engine, ENGINES)


def build_engine(args: argparse.Namespace) -> GenerationEngine:
    """The target's engine (``--engine``) on ``--target_model``, or the task's embedded tiny target."""
    return command_engine(args, args.target_model, args.task)


def prefixed_correct(engine: GenerationEngine, task: Task, examples: list[Example], prompt_ids: list[list[int]],
                     prefix: list[int], params: SamplingParams) -> list[bool]:
    """Per example, whether the target is right with ``prefix`` (token ids) after its prompt: the answer is the
    prefix then the continuation, decoded from the ids together. ``params.max_new_tokens`` is the whole answer's
    budget, prefix included: the target continues for the rest."""
    if len(prefix) >= params.max_new_tokens:
        raise ValueError(f"a {len(prefix)}-token prefix leaves nothing of the {params.max_new_tokens}-token answer "
                         "budget (--max_new_tokens)")
    continuation = dataclasses.replace(params, max_new_tokens=params.max_new_tokens - len(prefix))
    done = engine.generate([list(p) + list(prefix) for p in prompt_ids], continuation)
    texts = engine.tokenizer.batch_decode([list(prefix) + ids for ids in done.completion_ids], skip_special_tokens=True)
    return [task.is_correct(text, ex) for text, ex in zip(texts, examples, strict=True)]


def prefixed_accuracy(engine: GenerationEngine, task: Task, examples: list[Example], prompt_ids: list[list[int]],
                      prefix: list[int], params: SamplingParams) -> dict[str, Any]:
    """``prefixed_correct`` as accuracy, overall and per ``kind`` column where examples have one."""
    correct = prefixed_correct(engine, task, examples, prompt_ids, prefix, params)
    out: dict[str, Any] = {"accuracy": sum(correct) / len(correct)}
    kinds = sorted({str(ex.columns["kind"]) for ex in examples if "kind" in ex.columns})
    if kinds:
        out["by_kind"] = {kind: _mean([c for c, ex in zip(correct, examples) if ex.columns.get("kind") == kind])
                          for kind in kinds}
    return out


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values) if values else 0.0


def run(args: argparse.Namespace, engine: GenerationEngine) -> dict[str, Any]:
    """Sample, cluster, score every representative on the train split, then the best one on the test split."""
    task = TASKS.get(args.task)()
    train, test = task.split("train"), task.split("test")
    train = train[: args.train_examples] if args.train_examples else train
    test = test[: args.eval_examples] if args.eval_examples else test
    tokenizer = engine.tokenizer
    k = args.prefix_tokens or (CLUSTERING_PREFIX_TOKENS if args.target_model else EMBEDDED_PREFIX_TOKENS)
    if k >= args.max_new_tokens:
        raise ValueError(f"--max_new_tokens ({args.max_new_tokens}) must exceed the prefix length {k}: it is the "
                         "whole answer's budget, prefix included")
    train_ids = encode_prompts(tokenizer, train, args.system_prompt, args.max_prompt_tokens)
    test_ids = encode_prompts(tokenizer, test, args.system_prompt, args.max_prompt_tokens)
    clusters_tried = min(args.max_clusters, len(train))
    bar = ProgressBar(total=1 + clusters_tried + 1, enabled=not args.no_progress)  # sample, fits, scoring

    def params(offset: int, temperature: float = args.temperature) -> SamplingParams:
        return SamplingParams(max_new_tokens=args.max_new_tokens, temperature=temperature,
                              seed=derive_seed(args.seed, offset))

    samples = engine.generate(train_ids, SamplingParams(max_new_tokens=k, temperature=args.temperature, seed=args.seed))
    special = set(tokenizer.all_special_ids)
    prefixes = [[t for t in ids if t not in special] for ids in samples.completion_ids]
    features = prefix_features(prefixes, k, len(tokenizer), args.dims)
    bar.update({})
    fits = []
    for c in range(1, clusters_tried + 1):
        fits.append(kmeans(features, c, seed=args.seed))
        bar.update({"clusters": c})
    chosen = elbow([fit.inertia for fit in fits])
    fit = fits[chosen - 1]
    reps = representatives(features, fit)
    clusters = []
    for c, rep in enumerate(reps):
        members = (fit.labels == c).nonzero().flatten().tolist()
        score = prefixed_accuracy(engine, task, train, train_ids, prefixes[rep], params(c + 1)) if members else None
        clusters.append({"cluster": c, "size": len(members),
                         "representative": tokenizer.decode(prefixes[rep]) if members else None,
                         "representative_ids": prefixes[rep] if members else [],
                         "members": [tokenizer.decode(prefixes[i]) for i in members[:SAMPLE_MEMBERS]],
                         "train": score})
    scores = [cl["train"]["accuracy"] if cl["train"] else -1.0 for cl in clusters]
    best = best_cluster(scores)
    bar.update({"best_train": scores[best]})
    bar.close()
    held_out = params(0, args.temperature if args.eval_temperature is None else args.eval_temperature)
    without = prefixed_accuracy(engine, task, test, test_ids, [], held_out)
    with_prefix = prefixed_accuracy(engine, task, test, test_ids, clusters[best]["representative_ids"], held_out)
    settings = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()}
    return {"settings": {**settings, "prefix_tokens": k}, "inertias": [fit.inertia for fit in fits],
            "clusters_chosen": chosen, "clusters": clusters, "best_cluster": best,
            "chosen_prefix": clusters[best]["representative"],
            "chosen_prefix_ids": clusters[best]["representative_ids"],
            "heldout": {"target_alone": without, "with_chosen_prefix": with_prefix}}


def prefix_cluster_main(argv: list[str] | None = None) -> int:
    return summary_command(argv, build_parser(), _check, lambda args: run(args, build_engine(args)))
