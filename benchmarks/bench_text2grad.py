"""Text2Grad in miniature (Wang et al. 2025, "Text2Grad: Reinforcement Learning from Natural Language
Feedback"): span-level rewards through PPO vs PPO on the same feedback's scalar verdict vs GRPO on the task's
verifier, from the same warm start on ``step-arithmetic``, over seeds.

    python benchmarks/bench_text2grad.py --seeds 0 1 2 -- --steps 40 --lr 1e-5

Every arm runs ``posttrain/train.py`` as a user would (one process, one thread) on the embedded default
(``causal-step-arithmetic``); only the reward path differs:

- ``text2grad-oracle``: ``--algo text2grad --span_oracle true``: the program's spans as token rewards (good
  steps +1, the wrong ones -1), so the arm measures the RL side of the method with a perfect critique;
- ``ppo-verdict-oracle``: the same feedback reduced to one scalar (+1 / -1) on the last token (the paper's
  "PPO with a scalar reward model" baseline);
- ``grpo``: ``--algo grpo`` with the task's verifier (correct final answer);
- ``text2grad``: the embedded learned span reward model (recipe ``reward-text2grad``).

Writes PREFIX.json (command, per-arm and per-seed curves, summary) and PREFIX.png (held-out greedy accuracy per
step, the mean over seeds bold, each seed faint). A run that already finished under ``--runs`` is reused, so an
interrupted benchmark resumes.
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

ARMS: dict[str, list[str]] = {
    "text2grad-oracle": ["--algo", "text2grad", "--span_oracle", "true"],
    "ppo-verdict-oracle": ["--algo", "text2grad", "--span_oracle", "true", "--span_reward", "verdict"],
    "grpo": ["--algo", "grpo", "--task", "step-arithmetic", "--group_size", "4", "--prompts_per_step", "4",
             "--max_new_tokens", "32"],
    "text2grad": ["--algo", "text2grad"],
}
COMMON = ["--eval_every", "5", "--eval_examples", "128", "--save_every", "0", "--progress", "false",
          "--num_threads", "1"]


def run_arm(arm: str, seed: int, output_dir: Path, extra: list[str]) -> None:
    """One training run (skipped when its final checkpoint and metrics exist)."""
    metrics = output_dir / "metrics.jsonl"
    if any(output_dir.glob("checkpoints/step_*/COMPLETE")) and metrics.exists():
        return
    cmd = [sys.executable, str(REPO / "posttrain" / "train.py"), *ARMS[arm], *COMMON, "--seed", str(seed),
           "--output_dir", str(output_dir), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=REPO, check=True, env=env)


def accuracy_curve(output_dir: Path) -> list[tuple[int, float]]:
    """(step, held-out greedy accuracy) of one run's metrics log."""
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [(r["step"], r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]


def steps_to(curve: list[tuple[int, float]], level: float) -> int | None:
    """The first evaluated step whose accuracy reaches ``level`` (None if never): the convergence speed."""
    return next((step for step, acc in curve if acc >= level), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds per arm")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="arms to run")
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_text2grad", help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "text2grad",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("extra", nargs="*", help="trainer flags for every arm after --, e.g. -- --steps 40")
    args = parser.parse_args(argv)

    runs: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for arm in args.arms:
        for seed in args.seeds:
            out = args.runs / arm / f"seed{seed}"
            run_arm(arm, seed, out, args.extra)
            runs.setdefault(arm, {})[seed] = accuracy_curve(out)
    summary = {}
    for arm, per_seed in runs.items():
        start = statistics.mean(c[0][1] for c in per_seed.values())
        finals = [c[-1][1] for c in per_seed.values()]
        best = [max(a for _, a in c) for c in per_seed.values()]
        summary[arm] = {"start_mean": start, "final_mean": statistics.mean(finals),
                        "final_std": statistics.stdev(finals) if len(finals) > 1 else 0.0,
                        "best_mean": statistics.mean(best), "per_seed_final": dict(zip(per_seed, finals)),
                        "steps_to_start_plus_0.1": {s: steps_to(c, start + 0.1) for s, c in per_seed.items()}}
    from data_pipelines.common.io import atomic_write_text

    report = {"command": " ".join([sys.executable, *sys.argv]), "summary": summary, "runs": runs}
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    plot(runs, args.out.with_suffix(".png"))
    print(json.dumps(summary, indent=2))
    return 0


def plot(runs: dict[str, dict[int, list[tuple[int, float]]]], path: Path) -> None:
    """Held-out accuracy per step: each seed faint, the mean over seeds bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for color, (arm, per_seed) in zip(("C0", "C1", "C2", "C3"), runs.items()):
        series = list(per_seed.values())
        for curve in series:
            ax.plot(*zip(*curve), color=color, alpha=0.25)
        length = min(len(c) for c in series)
        steps = [s for s, _ in series[0][:length]]
        mean = [statistics.mean(c[i][1] for c in series) for i in range(length)]
        ax.plot(steps, mean, color=color, marker="o", label=f"{arm} ({len(series)} seeds)")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out greedy accuracy")
    ax.set_title("Text2Grad vs scalar-verdict PPO vs GRPO on step-arithmetic")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
