"""LLM benchmark for ``--algo gpo``: held-out greedy accuracy of the *learner* (the unhinted prompt; the
trainer's usual evaluation) against ``--algo grpo`` from the same warm start and the same budget (steps,
prompts per step, group size, learning rate: the trainer defaults), over several seeds, plus the
guider-learner KL that GPO logs (``gpo/kl_guider_learner``: per-token KL(mu || pi) over the
vocabulary, mean over the step's micro-batches), the guider's accuracy and the share of GPO's groups
whose rewards are all equal (``gpo/zero_advantage_groups``: no RL signal).

    OMP_NUM_THREADS=1 python benchmarks/bench_gpo_llm.py --seeds 0 1 2

The warm start is the tiny recipe ``--recipe`` (default ``causal-arithmetic-hint``: the arithmetic
policy whose SFT also showed GPO's hinted prompts, so the guider starts stronger than the learner; it is
also ``--algo gpo``'s embedded default, so a GPO run here is the default ``--algo gpo`` run). It is
built once (cached) and passed as ``--model`` to every run. The hint is the arithmetic task's ``hint``
column, a compensation step that never states the answer (``posttrain.tasks.arithmetic``). Each (algo, seed) runs
``python posttrain/train.py --algo ALGO --seed S --model WARM_START --output_dir RUNS/ALGO/seedS
--progress false --eval_every 25`` as a subprocess; GPO uses its default settings (clip variant, the hint
template of ``posttrain.algos.gpo.hint``). A run that already finished under ``--runs`` is reused, so an
interrupted benchmark resumes; the default ``--runs`` folder is named after the recipe's fingerprint, so a
changed warm start never reuses stale runs. Extra trainer flags after ``--`` go to every run.

The guider is measured with the trainer's evaluation on the same held-out prompts rendered through the
hint template: greedy accuracy of the warm start (step 0) and of every run's final checkpoint; during
GPO's training ``train/guider_accuracy`` is the accuracy of the rollouts, which come from the guider.
Writes PREFIX.json (commands, warm start, per-seed curves, final mean +- std per algo, KL curves) and
PREFIX.png (learner accuracy, guider-learner KL, rollout accuracy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parents[1]
ALGOS = ("grpo", "gpo")
KL_KEY = "gpo/kl_guider_learner"
ZERO_ADVANTAGE_KEY = "gpo/zero_advantage_groups"
# Rollout accuracy per step: GPO's rollouts come from the guider (hinted), GRPO's from the policy itself.
ROLLOUT_ACCURACY_KEY = {"grpo": "train/accuracy", "gpo": "train/guider_accuracy"}
COMMON_FLAGS = ["--progress", "false", "--eval_every", "25"]


def _rows(output_dir: Path) -> list[dict]:
    path = output_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def finished(output_dir: Path) -> bool:
    rows = _rows(output_dir)
    done = (output_dir / "checkpoints").is_dir() and any((output_dir / "checkpoints").glob("step_*/COMPLETE"))
    return done and bool(rows) and rows[-1].get("eval/accuracy") is not None


def run(algo: str, seed: int, model: Path, output_dir: Path, extra: list[str]) -> tuple[list[str], float]:
    cmd = [sys.executable, str(REPO / "posttrain" / "train.py"), "--algo", algo, "--seed", str(seed),
           "--model", str(model), "--output_dir", str(output_dir), *COMMON_FLAGS, *extra]
    if finished(output_dir):
        return cmd, float("nan")  # reused: no wall time measured
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    print(f"[bench_gpo_llm] {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=REPO, check=True, env=env)
    return cmd, time.perf_counter() - start


def curve(output_dir: Path, key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in _rows(output_dir) if key in r]


def final_checkpoint(output_dir: Path) -> Path:
    """The exported model of the run's last complete checkpoint."""
    steps = [int(p.parent.name.split("_")[1]) for p in (output_dir / "checkpoints").glob("step_*/COMPLETE")]
    if not steps:
        raise FileNotFoundError(f"{output_dir} has no complete checkpoint")
    return output_dir / "checkpoints" / f"step_{max(steps)}" / "hf"


def learner_and_guider_accuracy(model_dir: Path, tokenizer_dir: Path) -> dict[str, float]:
    """Greedy held-out accuracy of ``model_dir`` with the trainer's evaluation (default task, the same
    ``eval_examples`` prompts): on the plain prompts (the learner) and on the hinted ones (the guider)."""
    import torch

    from posttrain.algos.gpo.hint import privileged_examples
    from posttrain.algos.gpo.llm import GPOConfig
    from posttrain.dist import DistInfo
    from posttrain.engines.build import build_engine
    from posttrain.evaluation import evaluate
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.tasks import load_task

    config = GPOConfig(algo="gpo", pass_k=1)
    task = load_task(config)
    examples = task.split("test")[: config.eval_examples]
    tokenizer = load_tokenizer(str(tokenizer_dir))
    device = torch.device("cpu")
    engine = build_engine(config.rollout, model=load_causal_lm(str(model_dir)), tokenizer=tokenizer, device=device,
                          max_batch_size=len(examples))
    info = DistInfo(rank=0, world_size=1, local_rank=0, device=device)
    hinted = privileged_examples(examples, config.privileged_template)
    return {role: evaluate(engine, tokenizer, task, exs, config, info, step=0)["eval/accuracy"]
            for role, exs in (("learner", examples), ("guider", hinted))}


def _mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def _smooth(ys: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y - (ys[i - window] if i >= window else 0.0)
        out.append(acc / min(i + 1, window))
    return out


def _mean_over_seeds(curves: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
    by_step: dict[int, list[float]] = {}
    for points in curves:
        for step, value in points:
            by_step.setdefault(step, []).append(value)
    return [(step, statistics.mean(by_step[step])) for step in sorted(by_step)]


def summarise(runs: dict[str, dict[int, dict]]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for algo in ALGOS:
        final = [r["accuracy"][-1][1] for r in runs[algo].values()]
        guider = [r["final_guider_accuracy"] for r in runs[algo].values()]
        rollout = [statistics.mean(v for _, v in r["rollout_accuracy"][-20:]) for r in runs[algo].values()]
        m, s = _mean_std(final)
        summary[algo] = {"start_accuracy_mean": statistics.mean(r["accuracy"][0][1] for r in runs[algo].values()),
                         "final_accuracy_mean": m, "final_accuracy_std": s,
                         "final_guider_accuracy_mean": statistics.mean(guider),
                         "rollout_accuracy_last20_mean": statistics.mean(rollout),
                         "per_seed": {seed: {"start": r["accuracy"][0][1], "final": r["accuracy"][-1][1],
                                             "final_guider": r["final_guider_accuracy"]}
                                      for seed, r in runs[algo].items()}}
    kl_mean = [kl for _, kl in _mean_over_seeds([r["kl_guider_learner"] for r in runs["gpo"].values()])]
    zero = [v for r in runs["gpo"].values() for _, v in r["zero_advantage_groups"]]
    if zero:
        summary["gpo_zero_advantage_groups_mean"] = statistics.mean(zero)
    if kl_mean:
        tenth = max(1, len(kl_mean) // 10)
        summary["gpo_kl_guider_learner"] = {"first_step": kl_mean[0], "first_10pct_mean": statistics.mean(kl_mean[:tenth]),
                                            "last_10pct_mean": statistics.mean(kl_mean[-tenth:]),
                                            "max": max(kl_mean), "min": min(kl_mean)}
    return summary


def plot(runs: dict[str, dict[int, dict]], seeds: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_acc, ax_kl, ax_roll) = plt.subplots(1, 3, figsize=(16, 4))
    colors = {"grpo": "tab:blue", "gpo": "tab:orange"}
    for algo in ALGOS:
        for i, r in enumerate(runs[algo].values()):
            steps, acc = zip(*r["accuracy"])
            ax_acc.plot(steps, acc, marker="o", color=colors[algo], alpha=0.35 + 0.2 * i,
                        label=(f"{algo} (learner)" if algo == "gpo" else algo) if i == 0 else None)
        mean = _mean_over_seeds([r["rollout_accuracy"] for r in runs[algo].values()])
        if mean:
            steps, values = zip(*mean)
            label = "gpo rollouts (= guider)" if algo == "gpo" else "grpo rollouts (= policy)"
            ax_roll.plot(steps, _smooth(list(values), 10), color=colors[algo], label=label)
    ax_acc.set(xlabel="step", ylabel="held-out greedy accuracy (plain prompts)",
               title="learner accuracy, seeds " + ", ".join(map(str, seeds)))
    ax_roll.set(xlabel="step", ylabel="rollout accuracy (10-step avg, mean over seeds)",
                title="training rollouts (sampled)")
    for r in runs["gpo"].values():
        if r["kl_guider_learner"]:
            steps, kl = zip(*r["kl_guider_learner"])
            ax_kl.plot(steps, kl, color=colors["gpo"], alpha=0.25, lw=0.8)
    kl_mean = _mean_over_seeds([r["kl_guider_learner"] for r in runs["gpo"].values()])
    if kl_mean:
        steps, kl = zip(*kl_mean)
        ax_kl.plot(steps, _smooth(list(kl), 10), color="black", lw=1.5, label="mean over seeds (10-step avg)")
    ax_kl.set(xlabel="step", ylabel="KL(guider || learner) per token", title="GPO guider-learner KL", yscale="log")
    for ax in (ax_acc, ax_kl, ax_roll):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    from posttrain.common.files import atomic_write_text
    from posttrain.models.tiny import RECIPES, build_tiny

    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipe", default="causal-arithmetic-hint", choices=RECIPES.names(),
                        help="tiny recipe of the shared warm start")
    parser.add_argument("--runs", type=Path, default=None,
                        help="run directories RUNS/ALGO/seedS (default: outputs/bench_gpo_llm/RECIPE-FINGERPRINT)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "gpo_llm",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("extra", nargs="*", help="extra trainer flags for every run, after --, e.g. -- --steps 50")
    args = parser.parse_args(argv)

    recipe = RECIPES.get(args.recipe)
    warm_start = build_tiny(args.recipe)
    runs_dir = args.runs or REPO / "outputs" / "bench_gpo_llm" / f"{recipe.name}-{recipe.fingerprint()}"
    start_accuracy = learner_and_guider_accuracy(warm_start, warm_start)
    print(f"[bench_gpo_llm] warm start {warm_start}: {start_accuracy}", flush=True)

    runs: dict[str, dict[int, dict]] = {algo: {} for algo in ALGOS}
    for seed in args.seeds:
        for algo in ALGOS:
            out = runs_dir / algo / f"seed{seed}"
            cmd, wall = run(algo, seed, warm_start, out, args.extra)
            entry = {"command": " ".join(cmd), "wall_seconds": None if math.isnan(wall) else wall,
                     "accuracy": curve(out, "eval/accuracy"),
                     "final_guider_accuracy": learner_and_guider_accuracy(final_checkpoint(out), warm_start)["guider"],
                     "rollout_accuracy": curve(out, ROLLOUT_ACCURACY_KEY[algo]),
                     "completion_length": curve(out, "completion/length_mean")}
            if algo == "gpo":
                entry["kl_guider_learner"] = curve(out, KL_KEY)
                entry["backtrack_fraction"] = curve(out, "gpo/backtrack_fraction")
                entry["zero_advantage_groups"] = curve(out, ZERO_ADVANTAGE_KEY)
            runs[algo][seed] = entry

    summary = summarise(runs)
    report = {"command": " ".join([sys.executable, *sys.argv]), "extra_trainer_flags": args.extra,
              "warm_start": {"recipe": recipe.name, "fingerprint": recipe.fingerprint(), "path": str(warm_start),
                             "greedy_accuracy": start_accuracy},
              "kl_metric": KL_KEY, "summary": summary, "runs": runs,
              "kl_mean_over_seeds": _mean_over_seeds([r["kl_guider_learner"] for r in runs["gpo"].values()])}
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    plot(runs, args.seeds, args.out.with_suffix(".png"))
    print(json.dumps({"warm_start": start_accuracy, **summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
