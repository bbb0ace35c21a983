"""Prefix-RL in miniature ("Parameter-Efficient Reinforcement Learning using Prefix Optimization", ICLR 2026):
the frozen target alone, Prefix Clustering, Prefix-RL for several k, full RL on the target (the upper bound)
and LoRA RL on the target, on the embedded answer-format task, over seeds.

    python benchmarks/bench_prefix_rl.py --seeds 0 1 2

Every trained arm runs ``posttrain/train.py`` exactly as a user would (single-threaded, one process), with the
same prompts per step, group size, steps and evaluation; only the trained model and its budget differ:

- ``prefix-rl-k{K}``: ``--algo prefix-rl --prefix_tokens K`` (the tiny adapter writes K tokens, the frozen
  target ``causal-answer-format`` continues);
- ``full-rl``: ``--algo grpo --task answer-format`` (every weight of the target trains; whole answers), and
  ``full-rl-4x`` the same for four times the steps;
- ``lora-rl``: the same with ``--lora_r 8`` (a LoRA on the target's projections).

``clustering`` is ``posttrain prefix-cluster`` (training-free) once per seed: prefixes sampled at the target's
temperature 0.7, held-out accuracy greedy (``--eval_temperature 0``) with a 40-token answer budget, prefix
included, for the target alone and for the prefixed target alike (the whole answer, as full RL gets), like
the trained arms' curves (step 0 of ``full-rl`` is the target alone, greedy).

Training FLOPs per step are counted, not timed (``training_flops``): the forward and backward of the update
from parameter and token counts, the usual dense-transformer estimate. The target's own inference, which every
arm pays, is left out.

``--no_training`` runs only the training-free rows: the clustering arm and ``format_ceiling``, the frozen
target's greedy held-out accuracy after each of the two 8-token openings a k = 8 adapter can write
(``Answer: `` and ``Answer b``), per problem, so the best any choice of opening per input can reach.

Writes PREFIX.json (command, the flags: ``common`` (COMMON), ``extra`` (the trainer flags after ``--``) and
``arms``; per-arm and per-seed curves, summary, FLOPs) and PREFIX.png (with ``--no_training``: PREFIX.json with
the clustering rows and the ceiling only). A finished run under ``--runs`` is reused, so an interrupted
benchmark resumes. ``--report_only`` starts no training and no clustering run: it writes the report from the
runs (and clustering files) already finished under ``--runs``, each arm over the seeds it has, and lists the
others under ``missing``.

``--reuse FILE`` takes the runs recorded in an earlier report of this script for the (arm, seed) pairs not
finished under ``--runs``, so runs whose directories are gone are not trained again; the summary is computed
over reused and new runs alike, and the report names the reused runs, the file and the command that made it
under ``reused``. A report that recorded other ``common``, ``extra`` or arm flags is refused, naming the arm;
a report made before the flags were recorded is taken as it is (``reused.unchecked_flags`` then says the
flags were not compared). The file's clustering rows (with ``--no_clustering``) and its ``ceiling`` (the k = 8
format ceiling, which only ``--no_training`` measures) carry over into the new report. To add runs to the
committed report without retraining the others:

    OMP_NUM_THREADS=1 python benchmarks/bench_prefix_rl.py --seeds 0 1 2 --no_clustering --reuse benchmarks/results/prefix_rl.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.seed_curves import (
    RecordedRuns,
    Runs,
    finished,
    metric_curves,
    plot_seed_curves,
    recorded_runs,
    run_training,
)
from posttrain.common.cli_help import CommandParser

PREFIX_KS = (1, 2, 4, 8, 16)
COMMON = ["--steps", "40", "--prompts_per_step", "16", "--group_size", "8", "--micro_batch_size", "128",
          "--eval_every", "10", "--eval_examples", "128", "--pass_k", "1", "--save_every", "0", "--lr", "1e-3",
          "--temperature", "0.7", "--progress", "false", "--num_threads", "1"]
# The target's answers are at most 17 marker tokens + 5 + 6 + 6 characters ("Answer by steps: 40871+1 so 40872"):
# 40 new tokens is the whole answer with room to spare, the same room as prefix-rl's k + 32 (its --max_new_tokens
# is the whole answer's budget, prefix included: k, then 32 for the target, as in the results).
TARGET_RL = ["--algo", "grpo", "--task", "answer-format", "--max_new_tokens", "40", "--kl_coef", "0.001"]
# Learning rates of the target arms from a sweep on seed 0 (benchmarks/prefix_rl.md): full RL collapses at the
# adapter's 1e-3 (0.60 -> 0.00) and is best at 1e-4 of {3e-5, 1e-4, 3e-4}; LoRA is best at 1e-3 of {3e-4, 1e-3,
# 3e-3}. ``full-rl-4x`` gives full RL four times the steps, since 40 are not enough for it to converge.
ARMS: dict[str, list[str]] = {
    **{f"prefix-rl-k{k}": ["--algo", "prefix-rl", "--prefix_tokens", str(k), "--max_new_tokens", str(k + 32)]
       for k in PREFIX_KS},
    "full-rl": [*TARGET_RL, "--lr", "1e-4"],
    "full-rl-4x": [*TARGET_RL, "--lr", "1e-4", "--steps", "160", "--eval_every", "20"],
    "lora-rl": [*TARGET_RL, "--lora_r", "8", "--lora_alpha", "16"],
}


def run_clustering(seed: int, path: Path) -> dict:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "posttrain.cli", "prefix-cluster", "--seed", str(seed), "--no_progress",
               "--device", "cpu", "--eval_temperature", "0", "--max_new_tokens", "40", "--output", str(path)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        subprocess.run(cmd, cwd=REPO, check=True, env=env, stdout=subprocess.DEVNULL)
    return json.loads(path.read_text())


CURVES = ("eval/accuracy", "train/accuracy", "reward/mean")
K8_OPENINGS = {"direct": "Answer: ", "worked": "Answer b"}
"""The two 8-token openings that pick a format (character tokens; the formats part at the 7th)."""


def format_ceiling(answer_tokens: int = 40) -> dict:
    """The frozen embedded target's greedy accuracy on the held-out problems after each opening of
    ``K8_OPENINGS`` and after none (``answer_tokens`` in all, opening included), per kind; the best fixed
    opening per kind, and the per-problem oracle (right after at least one opening)."""
    from posttrain.algos.prefix_rl.cluster_cli import build_engine, build_parser, prefixed_correct
    from posttrain.engines.base import SamplingParams
    from posttrain.tasks import TASKS
    from posttrain.tasks.prompts import encode_prompts

    args = build_parser().parse_args(["--device", "cpu", "--max_new_tokens", str(answer_tokens)])
    engine = build_engine(args)
    task = TASKS.get("answer-format")()
    test = task.split("test")
    prompt_ids = encode_prompts(engine.tokenizer, test, None, args.max_prompt_tokens)
    greedy = SamplingParams(max_new_tokens=answer_tokens, temperature=0.0)
    correct = {name: prefixed_correct(engine, task, test, prompt_ids,
                                      engine.tokenizer(text, add_special_tokens=False)["input_ids"], greedy)
               for name, text in {"none": "", **K8_OPENINGS}.items()}
    kinds = sorted({ex.columns["kind"] for ex in test})

    def accuracy(flags: list[bool], kind: str | None = None) -> float:
        picked = [f for f, ex in zip(flags, test) if kind is None or ex.columns["kind"] == kind]
        return sum(picked) / len(picked)

    openings = {name: {"accuracy": accuracy(flags), "by_kind": {k: accuracy(flags, k) for k in kinds}}
                for name, flags in correct.items()}
    best_by_kind = {k: max(K8_OPENINGS, key=lambda name: openings[name]["by_kind"][k]) for k in kinds}
    per_kind = sum(openings[best_by_kind[ex.columns["kind"]]]["by_kind"][ex.columns["kind"]] for ex in test) / len(test)
    oracle = [any(correct[name][i] for name in K8_OPENINGS) for i in range(len(test))]
    return {"answer_tokens": answer_tokens, "examples": len(test), "openings": openings,
            "best_opening_by_kind": best_by_kind, "ceiling_opening_by_kind": per_kind,
            "ceiling_opening_by_problem": accuracy(oracle),
            "ceiling_opening_by_problem_by_kind": {k: accuracy(oracle, k) for k in kinds}}


def parameter_counts(model: str, lora_r: int) -> tuple[int, int]:
    """(all parameters of the model, parameters the update trains: all, or the LoRA matrices ``apply_lora``
    adds)."""
    from transformers import AutoModelForCausalLM

    network = AutoModelForCausalLM.from_pretrained(model)
    total = sum(p.numel() for p in network.parameters())
    if not lora_r:
        return total, total
    from posttrain.config import TrainConfig
    from posttrain.trainer_parts import apply_lora

    network = apply_lora(network, TrainConfig(lora_r=lora_r))
    return total, sum(p.numel() for p in network.parameters() if p.requires_grad)


def training_flops(arm: str, prompts_per_step: int = 16, group_size: int = 8) -> dict[str, float]:
    """The update's FLOPs per step, from parameter and token counts (dense-transformer estimate, T tokens per
    sequence in the loss pass: prompt + the trained model's own tokens):

    - full fine-tuning (full RL, Prefix-RL's adapter): 6 N T (forward 2 N T, backward 4 N T);
    - LoRA: the frozen base still runs forward and passes activation gradients back, 4 N_base T, plus
      6 N_lora T for the adapters' own forward and weight gradients.

    Prefix-RL's adapter reads prompt + k tokens; full and LoRA RL read prompt + the whole answer. Lengths are
    the means over the task's train split, answers in the mean of its two formats (the warm start writes both
    about equally often), so the count is per average step, not of one run.
    """
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.answer_format import direct_answer, worked_answer
    from posttrain.tasks.base import TASKS

    examples = TASKS.get("answer-format")().split("train")
    prompt = statistics.mean(len(e.prompt) for e in examples) + 1  # character tokens + BOS
    answer = statistics.mean((len(direct_answer(int(e.answer))) + len(worked_answer(int(e.answer) - 1, int(e.answer))))
                             / 2 for e in examples) + 1  # + EOS
    if arm.startswith("prefix-rl"):
        model, lora_r, tokens = str(build_tiny("causal-answer-format-adapter")), 0, prompt + int(arm.rsplit("k", 1)[1])
    else:
        model, lora_r, tokens = str(build_tiny("causal-answer-format")), 8 if arm == "lora-rl" else 0, prompt + answer
    total, trained = parameter_counts(model, lora_r)
    per_token = 6.0 * trained if trained == total else 4.0 * total + 6.0 * trained
    return {"model_parameters": float(total), "trained_parameters": float(trained), "tokens_per_sequence": tokens,
            "flops_per_step": per_token * tokens * prompts_per_step * group_size}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--no_clustering", action="store_true", help="skip the Prefix Clustering rows")
    parser.add_argument("--no_training", action="store_true", help="only the clustering rows and the k = 8 "
                        "format ceiling (format_ceiling), into PREFIX.json")
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_prefix_rl", help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "prefix_rl",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("--report_only", action="store_true",
                        help="start no run: write the report from the runs and clustering files already finished "
                             "under --runs (the others listed as missing)")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier report of this script (PREFIX.json): its recorded runs stand for the (arm, "
                             "seed) pairs not finished under --runs instead of training them again; refused if it "
                             "recorded other flags; its clustering rows (with --no_clustering) and ceiling carry over")
    parser.add_argument("extra", nargs="*", help="extra trainer flags after --, e.g. -- --steps 10")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    if args.no_training:
        return training_free(args)
    recorded = (recorded_runs(args.reuse, {"common": COMMON, "extra": args.extra}, ARMS, unrecorded_ok=True)
                if args.reuse else RecordedRuns())
    runs: Runs = {}
    missing: list[str] = []
    for seed in args.seeds:
        for arm in args.arms:
            out = args.runs / arm / f"seed{seed}"
            reused = recorded.take(arm, seed, out)
            if reused is not None:
                runs.setdefault(arm, {})[seed] = reused
                continue
            if args.report_only and not finished(out):
                missing.append(f"{arm} seed {seed}")
                continue
            run_training(COMMON + ARMS[arm], seed, out, args.extra)
            runs.setdefault(arm, {})[seed] = metric_curves(out, CURVES)
    summary = {arm: {"seeds": list(per_seed), **summarise([c["eval/accuracy"] for c in per_seed.values()])}
               for arm, per_seed in runs.items()}
    for arm, numbers in summary.items():
        numbers.update(training_flops(arm))
    report: dict = {"command": " ".join([sys.executable, *sys.argv]), "report_only": args.report_only,
                    "common": COMMON, "extra": args.extra, "arms": ARMS, "missing": missing,
                    "reused": recorded.report(), "summary": summary, "runs": runs}
    if not args.no_clustering:
        seeds = [s for s in args.seeds if not args.report_only or clustering_path(args.runs, s).exists()]
        missing.extend(f"clustering seed {s}" for s in args.seeds if s not in seeds)
        if seeds:
            report["clustering"] = clustering_rows(seeds, args.runs)
    if args.reuse:
        report.update(carried_rows(args.reuse, ["ceiling", *(["clustering"] if args.no_clustering else [])]))
    for upper in ("full-rl", "full-rl-4x"):
        if upper in summary:
            gain = summary[upper]["final_mean"] - summary[upper]["start_mean"]
            for numbers in summary.values():  # each arm's gain from its own start (k = 8's adapter starts higher)
                own = numbers["final_mean"] - numbers["start_mean"]
                numbers[f"fraction_of_{upper}_gain"] = own / gain if gain else None
    if "full-rl" in summary:
        for numbers in summary.values():
            numbers["flops_vs_full_rl"] = numbers["flops_per_step"] / summary["full-rl"]["flops_per_step"]
    from posttrain.common.files import atomic_write_text

    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    plot(runs, report.get("clustering"), args.out.with_suffix(".png"))
    print(json.dumps({k: report[k] for k in ("summary", "clustering") if k in report}, indent=2))
    return 0


def carried_rows(path: Path, keys: list[str]) -> dict:
    """The rows ``keys`` of the earlier report at ``path`` that it has (the training-free rows a training run
    does not compute: ``ceiling``, and ``clustering`` under ``--no_clustering``), with ``carried`` naming them
    and the file; nothing when it has none."""
    earlier = json.loads(path.read_text())
    rows = {key: earlier[key] for key in keys if key in earlier}
    return {**rows, "carried": {"file": str(path), "rows": list(rows)}} if rows else {}


def clustering_path(runs: Path, seed: int) -> Path:
    """Where ``run_clustering`` writes (and finds) the clustering run of ``seed`` under ``--runs``."""
    return runs / "clustering" / f"seed{seed}.json"


def clustering_rows(seeds: list[int], runs: Path) -> dict:
    """``posttrain prefix-cluster`` per seed (``run_clustering``): mean held-out accuracies and the per-seed rows."""
    clusters = [run_clustering(seed, clustering_path(runs, seed)) for seed in seeds]
    return {"target_alone": statistics.mean(c["heldout"]["target_alone"]["accuracy"] for c in clusters),
            "with_prefix": statistics.mean(c["heldout"]["with_chosen_prefix"]["accuracy"] for c in clusters),
            "per_seed": [{"chosen_prefix": c["chosen_prefix"], "clusters_chosen": c["clusters_chosen"],
                          **c["heldout"]} for c in clusters]}


def training_free(args: argparse.Namespace) -> int:
    """``--no_training``: the clustering rows and the k = 8 format ceiling, into ``--out``.json."""
    from posttrain.common.files import atomic_write_text

    report = {"command": " ".join([sys.executable, *sys.argv]), "ceiling": format_ceiling(),
              "clustering": clustering_rows(args.seeds, args.runs)}
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


def summarise(series: list[list[tuple[int, float]]]) -> dict:
    start = [c[0][1] for c in series]
    final = [c[-1][1] for c in series]
    return {"start_mean": statistics.mean(start), "final_mean": statistics.mean(final),
            "final_std": statistics.stdev(final) if len(final) > 1 else 0.0, "per_seed_final": final}


def plot(runs: Runs, clustering: dict | None, path: Path) -> None:
    """Held-out accuracy per arm (``seed_curves.plot_seed_curves``) with Prefix Clustering's two levels."""

    def clustering_lines(ax) -> None:
        if clustering:
            ax.axhline(clustering["with_prefix"], color="k", linestyle="--", label="Prefix Clustering")
            ax.axhline(clustering["target_alone"], color="grey", linestyle=":", label="target alone")

    plot_seed_curves({arm: [c["eval/accuracy"] for c in per_seed.values()] for arm, per_seed in runs.items()}, path,
                     "Prefix-RL vs full and LoRA RL on answer-format (tiny models)", figsize=(7.5, 4.5), alpha=0.2,
                     legend={"fontsize": 7, "ncol": 2}, decorate=clustering_lines)


if __name__ == "__main__":
    sys.exit(main())
