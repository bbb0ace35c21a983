"""Learning benchmark in miniature (ESPO Fig. 1 / Table 5 shape): espo vs token-elbo vs diffu-grpo on
4x4 Sudoku from the same warm-started tiny diffusion model, same batch shape, mu and learning rate.

Each run goes through the real trainer (``posttrain.train.main``); eval accuracy (greedy, held-out
puzzles) and train reward are read from each run's ``metrics.jsonl``; a PNG of the curves and a JSON
summary are written.

    PYTHONPATH=. python benchmarks/bench_diffusion_learning.py --warm-steps 400 --steps 40 --lr 1e-3 \
        --seeds 0 --out benchmarks/results/diffusion_learning_sudoku.json
    # summarise finished runs only:
    PYTHONPATH=. python benchmarks/bench_diffusion_learning.py --runs-dir DIR --summarise-only --out ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ALGOS = ("espo", "token-elbo", "diffu-grpo")


def sudoku_cell_reward(prompts: list[str], completions: list[str], **columns: Any) -> list[float | None]:
    """ESPO's Sudoku reward: the fraction of the puzzle's empty cells that the completion fills correctly
    (dense partial credit; the completion's first 16 non-space characters are read as the grid)."""
    rewards: list[float | None] = []
    for completion, answer, puzzle in zip(completions, columns["answer"], columns["puzzle"]):
        grid = "".join(completion.split())[:16]
        empty = [i for i, ch in enumerate(puzzle) if ch == "."]
        rewards.append(sum(i < len(grid) and grid[i] == answer[i] for i in empty) / max(1, len(empty)))
    return rewards


def run_args(algo: str, model: str, steps: int, seed: int, out: Path, lr: float, reward: str | None) -> list[str]:
    extra = ["--reward", reward] if reward else []
    return ["--algo", algo, "--model", model, "--task", "sudoku", "--steps", str(steps), "--seed", str(seed),
            "--lr", str(lr), *extra,
            "--prompts_per_step", "8", "--group_size", "6", "--micro_batch_size", "24", "--mu", "2",
            "--max_new_tokens", "24", "--block_length", "24", "--eval_every", "10", "--eval_examples", "64",
            "--pass_k", "1", "--progress", "false", "--output_dir", str(out), "--report_to", "jsonl",
            "--save_every", "0", "--num_threads", "1"]


def read(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def summarise(runs_dir: Path, out: Path | None, command: str) -> dict:
    summary: dict = {"command": command, "runs": {}}
    curves = {}
    for run in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        rows = read(run)
        if not rows:
            continue
        evals = [(r["step"], r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
        rewards = [(r["step"], r["reward/mean"]) for r in rows if "reward/mean" in r]
        summary["runs"][run.name] = {
            "eval_accuracy": evals,
            "train_reward": rewards,
            "final_eval_accuracy": evals[-1][1] if evals else None,
            "start_eval_accuracy": evals[0][1] if evals else None,
            "last_kl": next((r.get("train/kl") for r in reversed(rows) if "train/kl" in r), None),
        }
        curves[run.name] = (evals, rewards)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as handle:
            json.dump(summary, handle, indent=2)
        os.replace(handle.name, out)
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
            for name, (evals, rewards) in curves.items():
                if evals:
                    axes[0].plot(*zip(*evals), marker="o", label=name)
                if rewards:
                    axes[1].plot(*zip(*rewards), label=name)
            axes[0].set_title("held-out solve rate (greedy)")
            axes[1].set_title("train reward (T=1)")
            for ax in axes:
                ax.set_xlabel("step")
                ax.legend()
            fig.tight_layout()
            fig.savefig(out.with_suffix(".png"))
        except ImportError:
            pass
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None,
                        help="Warm-started diffusion model directory (default: build diffusion-sudoku with --warm-steps).")
    parser.add_argument("--warm-steps", type=int, default=400, help="Warm-start steps when --model is not given.")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--lr", type=float, default=1e-4, help="Learning rate for every algorithm.")
    parser.add_argument("--reward", default=None, help="Reward 'module:function' (default: the task's strict 0/1); "
                        "ESPO's dense one is benchmarks.bench_diffusion_learning:sudoku_cell_reward.")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS))
    parser.add_argument("--runs-dir", type=Path, default=Path("outputs/bench_diffusion_learning"))
    parser.add_argument("--summarise-only", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    command = " ".join([sys.executable, *sys.argv])
    if not args.summarise_only:
        import posttrain.algos.espo  # noqa: F401  (registers the diffusion algorithms)
        from posttrain.train import main as train_main

        if not args.model:
            import dataclasses

            from posttrain.models.tiny import RECIPES, build_recipe

            recipe = dataclasses.replace(RECIPES.get("diffusion-sudoku"), warm_start_steps=args.warm_steps)
            args.model = str(build_recipe(recipe))
        for seed in args.seeds:
            for algo in args.algos:
                start = time.perf_counter()
                rc = train_main(run_args(algo, args.model, args.steps, seed, args.runs_dir / f"{algo}-s{seed}", args.lr,
                                         args.reward))
                print(f"{algo} seed {seed}: rc {rc}, {time.perf_counter() - start:.0f} s", flush=True)
    summary = summarise(args.runs_dir, args.out, command)
    print(json.dumps({k: {"start": v["start_eval_accuracy"], "final": v["final_eval_accuracy"]}
                      for k, v in summary["runs"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
