"""LLM benchmark for ``--algo gpo``: held-out greedy accuracy of the *learner* (the unhinted prompt; the
trainer's usual evaluation) against ``--algo grpo`` from the same cached warm start and the same budget
(steps, prompts per step, group size: the trainer defaults), over several seeds, plus the guider-learner
KL that GPO logs (``train/gpo/kl_guider_learner``: per-token KL(mu || pi) over the vocabulary, mean over
the step's micro-batches).

    python benchmarks/bench_gpo_llm.py --seeds 0 1 2 --out benchmarks/results/gpo_llm

Each (algo, seed) runs ``python posttrain/train.py --algo ALGO --seed S --output_dir RUNS/ALGO/seedS
--progress false`` as a subprocess; GPO uses its default settings (clip variant, hint template
"{prompt}\\nHint: the answer is {answer}."). A run that already finished under ``--runs`` is reused, so an
interrupted benchmark resumes. Extra trainer flags after ``--`` go to every run.
Writes PREFIX.json (command, per-seed curves, final mean +- std per algo, KL curves) and PREFIX.png.
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

REPO = Path(__file__).resolve().parents[1]
ALGOS = ("grpo", "gpo")
KL_KEY = "train/gpo/kl_guider_learner"


def _rows(output_dir: Path) -> list[dict]:
    path = output_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def finished(output_dir: Path) -> bool:
    rows = _rows(output_dir)
    done = (output_dir / "checkpoints").is_dir() and any((output_dir / "checkpoints").glob("step_*/COMPLETE"))
    return done and bool(rows) and rows[-1].get("eval/accuracy") is not None


def run(algo: str, seed: int, output_dir: Path, extra: list[str]) -> tuple[list[str], float]:
    cmd = [sys.executable, str(REPO / "posttrain" / "train.py"), "--algo", algo, "--seed", str(seed),
           "--output_dir", str(output_dir), "--progress", "false", *extra]
    if finished(output_dir):
        return cmd, float("nan")  # reused: no wall time measured
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    print(f"[bench_gpo_llm] {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=REPO, check=True, env=env)
    return cmd, time.perf_counter() - start


def accuracy_curve(output_dir: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["eval/accuracy"]) for r in _rows(output_dir) if "eval/accuracy" in r]


def kl_curve(output_dir: Path) -> list[tuple[int, float]]:
    return [(r["step"], r[KL_KEY]) for r in _rows(output_dir) if KL_KEY in r]


def _mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def _smooth(ys: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y - (ys[i - window] if i >= window else 0.0)
        out.append(acc / min(i + 1, window))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_gpo_llm",
                        help="run directories (RUNS/ALGO/seedS)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "gpo_llm",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("extra", nargs="*", help="extra trainer flags for every run, after --, e.g. -- --steps 50")
    args = parser.parse_args(argv)

    runs: dict[str, dict[int, dict]] = {algo: {} for algo in ALGOS}
    for seed in args.seeds:
        for algo in ALGOS:
            out = args.runs / algo / f"seed{seed}"
            cmd, wall = run(algo, seed, out, args.extra)
            entry = {"command": " ".join(cmd), "wall_seconds": None if math.isnan(wall) else wall,
                     "accuracy": accuracy_curve(out)}
            if algo == "gpo":
                entry["kl_guider_learner"] = kl_curve(out)
                entry["guider_accuracy"] = [(r["step"], r["train/guider_accuracy"]) for r in _rows(out)
                                            if "train/guider_accuracy" in r]
            runs[algo][seed] = entry

    summary: dict[str, dict] = {}
    for algo in ALGOS:
        start = [r["accuracy"][0][1] for r in runs[algo].values()]
        final = [r["accuracy"][-1][1] for r in runs[algo].values()]
        m, s = _mean_std(final)
        summary[algo] = {"start_accuracy_mean": statistics.mean(start), "final_accuracy_mean": m,
                         "final_accuracy_std": s,
                         "per_seed": {seed: {"start": r["accuracy"][0][1], "final": r["accuracy"][-1][1]}
                                      for seed, r in runs[algo].items()}}
    # KL over training: mean over seeds at each logged step, and early / late averages.
    kl_by_step: dict[int, list[float]] = {}
    for r in runs["gpo"].values():
        for step, kl in r["kl_guider_learner"]:
            kl_by_step.setdefault(step, []).append(kl)
    kl_steps = sorted(kl_by_step)
    kl_mean = [statistics.mean(kl_by_step[s]) for s in kl_steps]
    if kl_mean:
        tenth = max(1, len(kl_mean) // 10)
        summary["gpo_kl_guider_learner"] = {"first_step": kl_mean[0], "first_10pct_mean": statistics.mean(kl_mean[:tenth]),
                                            "last_10pct_mean": statistics.mean(kl_mean[-tenth:]),
                                            "max": max(kl_mean), "min": min(kl_mean)}
    report = {"command": " ".join([sys.executable, *sys.argv]), "extra_trainer_flags": args.extra,
              "kl_metric": KL_KEY, "summary": summary, "runs": runs,
              "kl_mean_over_seeds": list(zip(kl_steps, kl_mean))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_acc, ax_kl) = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"grpo": "tab:blue", "gpo": "tab:orange"}
    for algo in ALGOS:
        for i, (seed, r) in enumerate(runs[algo].items()):
            steps, acc = zip(*r["accuracy"])
            ax_acc.plot(steps, acc, marker="o", color=colors[algo], alpha=0.35 + 0.2 * i,
                        label=f"{algo} (learner)" if algo == "gpo" and i == 0 else (algo if i == 0 else None))
    ax_acc.set_xlabel("step")
    ax_acc.set_ylabel("held-out greedy accuracy")
    ax_acc.set_title("accuracy, seeds " + ", ".join(map(str, args.seeds)))
    ax_acc.grid(alpha=0.3)
    ax_acc.legend()
    for seed, r in runs["gpo"].items():
        if r["kl_guider_learner"]:
            steps, kl = zip(*r["kl_guider_learner"])
            ax_kl.plot(steps, kl, color=colors["gpo"], alpha=0.25, lw=0.8)
    if kl_mean:
        ax_kl.plot(kl_steps, _smooth(kl_mean, 10), color="black", lw=1.5, label="mean over seeds (10-step avg)")
        ax_kl.legend()
    ax_kl.set_xlabel("step")
    ax_kl.set_ylabel("KL(guider || learner) per token")
    ax_kl.set_title("GPO guider-learner KL")
    ax_kl.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
