"""The README's main job over several seeds: held-out accuracy of the embedded tiny model before and
after GRPO, with the curves as a PNG.

    python benchmarks/bench_grpo_demo.py --seeds 0 1 2 --out benchmarks/results/grpo_demo_arithmetic

Each seed runs ``deepspeed posttrain/train.py --algo grpo --seed S`` exactly as a user would (same
cached warm start for every seed; only sampling and data order change). A seed whose run already
finished under ``--runs`` is reused, so an interrupted benchmark resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parents[1]


def run_seed(seed: int, output_dir: Path, extra: list[str]) -> float:
    metrics = output_dir / "metrics.jsonl"
    if (output_dir / "checkpoints").is_dir() and any((output_dir / "checkpoints").glob("step_*/COMPLETE")):
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        if rows and rows[-1].get("eval/accuracy") is not None:
            return float("nan")  # reused: no wall time measured
    cmd = ["deepspeed", str(REPO / "posttrain" / "train.py"), "--algo", "grpo", "--seed", str(seed),
           "--output_dir", str(output_dir), "--progress", "false", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - start


def eval_curve(output_dir: Path) -> list[tuple[int, float, float]]:
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["eval/accuracy"], r.get("eval/pass@4", float("nan"))) for r in rows if "eval/accuracy" in r]


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_grpo_demo", help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "grpo_demo_arithmetic",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("extra", nargs="*", help="extra trainer flags after --, e.g. -- --steps 50")
    args = parser.parse_args(argv)

    runs = {}
    for seed in args.seeds:
        wall = run_seed(seed, args.runs / f"seed{seed}", args.extra)
        runs[seed] = {"wall_seconds": wall, "curve": eval_curve(args.runs / f"seed{seed}")}
    start = [r["curve"][0][1] for r in runs.values()]
    final = [r["curve"][-1][1] for r in runs.values()]
    summary = {
        "warm_start_accuracy_mean": statistics.mean(start),
        "final_accuracy_mean": statistics.mean(final),
        "final_accuracy_std": statistics.stdev(final) if len(final) > 1 else 0.0,
        "per_seed": {s: {"start": r["curve"][0][1], "final": r["curve"][-1][1]} for s, r in runs.items()},
    }
    report = {"command": " ".join([sys.executable, *sys.argv]), "summary": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, r in runs.items():
        steps, acc, _ = zip(*r["curve"])
        ax.plot(steps, acc, marker="o", label=f"seed {seed}")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("held-out greedy accuracy")
    ax.set_title("GRPO on the embedded tiny model (arithmetic)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
