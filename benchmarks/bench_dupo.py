"""DuPO in miniature (She et al. 2025, arXiv 2508.14460): label-free DuPO vs GRPO with the gold-label verifier
(the paper's oracle RLVR) vs DuPO without unknown-component selection, from the same warm start, over seeds;
then DuPO's training-free reranking against one sample and majority vote at N = 4 and 8.

    python benchmarks/bench_dupo.py --seeds 0 1 2 -- --steps 15

Every arm runs ``posttrain/train.py`` exactly as a user would (single-threaded, one process) on the embedded
default (``causal-word-arithmetic`` on word-arithmetic); only the algorithm and the reward differ:

- ``dupo``: ``--algo dupo`` (dual reward, selection on, snapshot dual solver);
- ``grpo-oracle``: ``--algo grpo`` with the task's verifier (reads the gold answers);
- ``dupo-no-filter``: ``--algo dupo --dual_selection none``;
- ``dupo-offline-selection``: ``--algo dupo --dual_selection offline`` (the paper's per-problem selection over a
  pool of 16 answers from the frozen warm start).

The translation dual (``--arms dupo-translation grpo-oracle-translation``, on ``word-translation`` with the
``causal-word-translation`` warm start): ``--algo dupo --dual_task translation`` (back-translation, BLEU) vs GRPO
on the exact-match verifier; run it with its own ``--out`` and ``--rerank_n`` empty (reranking is math only):

    python benchmarks/bench_dupo.py --arms dupo-translation grpo-oracle-translation --rerank_n \\
        --out benchmarks/results/dupo_translation -- --steps 40 --eval_every 10

Writes PREFIX.json (the command, per-arm and per-seed curves, the rerank table) and PREFIX.png (held-out greedy
accuracy per step, mean over seeds with each seed faint). An arm/seed whose run already finished under
``--runs`` is reused, so an interrupted benchmark resumes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.seed_curves import metric_curves, plot_seed_curves, run_training
from posttrain.common.cli_help import CommandParser

ORACLE_BUDGET = ["--task", "word-arithmetic", "--max_new_tokens", "6", "--steps", "120"]
TRANSLATION = ["--task", "word-translation", "--max_new_tokens", "14"]
ARMS: dict[str, list[str]] = {
    "dupo": ["--algo", "dupo"],
    "grpo-oracle": ["--algo", "grpo", *ORACLE_BUDGET],
    "dupo-no-filter": ["--algo", "dupo", "--dual_selection", "none"],
    "dupo-offline-selection": ["--algo", "dupo", "--dual_selection", "offline"],
    "dupo-translation": ["--algo", "dupo", "--dual_task", "translation", "--dual_selection", "none",
                         "--dual_max_new_tokens", "18", "--dual_refresh_every", "5", *TRANSLATION],
    "grpo-oracle-translation": ["--algo", "grpo", *TRANSLATION],
}
"""Each arm's flags. The math DuPO arms run ``--algo dupo``'s shipped defaults (its answer budgets and snapshot
refresh are what this benchmark measured); the oracle gets DuPO's task, answer budget and steps. ``tests/unit/test_bench_dupo.py``
checks both."""
MATH_ARMS = ["dupo", "grpo-oracle", "dupo-no-filter", "dupo-offline-selection"]
TRANSLATION_ARMS = ["dupo-translation", "grpo-oracle-translation"]
COMMON = ["--prompts_per_step", "8", "--group_size", "8", "--micro_batch_size", "64", "--eval_every", "5",
          "--eval_examples", "128", "--pass_k", "1", "--save_every", "0", "--lr", "1e-4", "--progress", "false",
          "--num_threads", "1"]
"""Flags every arm gets: DuPO's default batch and learning rate (spelled out, so GRPO's arm gets the same), dense
evaluation, no checkpoints, one thread."""


CURVES = ("eval/accuracy", "train/accuracy", "reward/mean", "dupo/selection_pass_rate", "dupo/dual_accuracy",
          "dupo/dual_accuracy_right_answers", "dupo/dual_accuracy_wrong_answers", "dupo/filtered_fraction",
          "dupo/dual_distance")


def rerank_table(ns: list[int], k: int, examples: int, seeds: list[int]) -> dict[str, dict[str, float]]:
    """``posttrain dupo-rerank`` on the warm start, once per seed; the mean of every number per N."""
    from posttrain.algos.dupo.rerank_cli import build_engine, build_parser, run

    per_seed = []
    for seed in seeds:
        args = build_parser().parse_args(["--n", *map(str, ns), "--k", str(k), "--examples", str(examples),
                                          "--max_new_tokens", "6", "--dual_max_new_tokens", "4", "--seed", str(seed),
                                          "--device", "cpu"])
        per_seed.append(run(args, build_engine(args))["results"])
    return {n: {key: statistics.mean(r[n][key] for r in per_seed) for key in per_seed[0][n]} for n in per_seed[0]}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=MATH_ARMS, choices=list(ARMS),
                        help=f"default: the math arms; the translation dual's: {' '.join(TRANSLATION_ARMS)}")
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_dupo", help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "dupo",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("--rerank_n", type=int, nargs="*", default=[4, 8], help="N of the rerank table (none = skip)")
    parser.add_argument("--rerank_k", type=int, default=8, help="dual samples per (question, answer) when reranking")
    parser.add_argument("--rerank_examples", type=int, default=128, help="held-out questions reranked per seed")
    parser.add_argument("extra", nargs="*", help="extra trainer flags after --, e.g. -- --steps 15")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    runs: dict[str, dict[int, dict]] = {}
    for arm in args.arms:
        for seed in args.seeds:
            out = args.runs / arm / f"seed{seed}"
            run_training(ARMS[arm] + COMMON, seed, out, args.extra)
            runs.setdefault(arm, {})[seed] = metric_curves(out, CURVES)
    summary = {}
    for arm, per_seed in runs.items():
        start = [c["eval/accuracy"][0][1] for c in per_seed.values()]
        final = [c["eval/accuracy"][-1][1] for c in per_seed.values()]
        summary[arm] = {"start_mean": statistics.mean(start), "final_mean": statistics.mean(final),
                        "final_std": statistics.stdev(final) if len(final) > 1 else 0.0,
                        "per_seed_final": dict(zip(per_seed, final))}
    from posttrain.common.files import atomic_write_text

    report = {"command": " ".join([sys.executable, *sys.argv]), "summary": summary, "runs": runs}
    if args.rerank_n:
        report["rerank"] = rerank_table(args.rerank_n, args.rerank_k, args.rerank_examples, args.seeds)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    plot_seed_curves({arm: [c["eval/accuracy"] for c in per_seed.values()] for arm, per_seed in runs.items()},
                     args.out.with_suffix(".png"),
                     f"DuPO vs oracle GRPO on {'word-translation' if set(args.arms) <= set(TRANSLATION_ARMS) else 'word-arithmetic'} (tiny model)",
                     label="{arm} (mean of {n} seeds)")
    print(json.dumps({k: report[k] for k in ("summary", "rerank") if k in report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
