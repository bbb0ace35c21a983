"""Learning benchmark in miniature: the ESPO paper's ablation (Fig. 1: action space x likelihood; Fig. 2:
KL estimator) on 4x4 Sudoku, from the same warm-started tiny diffusion model, over several seeds.

Variants (each a preset of ``posttrain/algos/espo.py``; every run shares the embedded default's batch
shape, step count, learning rate and mu, so the budget is identical):

- ``espo``        sequence-level ratio on the coupled ELBO, k2 KL (the method);
- ``espo-k1``     the same with k1 (plus ESPO's stop-gradient correction);
- ``espo-k3``     the same with k3;
- ``token-elbo``  token-level ratios on the per-token ELBO terms (the paper's "token + ELBO");
- ``diffu-grpo``  d1: mean-field likelihood, token-level ratios, k3, clip 0.5, beta 0.04.

Each run is ``python posttrain/train.py --algo ALGO --seed S [--kl_estimator K]`` with every other
setting at the ``espo`` default (the embedded default job), so the curves are what a user of the README's
main command would see. Runs go ``--jobs`` at a time (one CPU thread each); finished runs are kept, so a
killed benchmark resumes where it stopped, and a rerun with every run finished only re-summarises.
Results: a JSON summary (commands, per-run curves, final accuracies, mean and std per variant) and a PNG
(held-out solve rate, train reward, KL to the reference).

    OMP_NUM_THREADS=1 python benchmarks/bench_diffusion_learning.py --seeds 0 1 2 --jobs 2 \\
        --out benchmarks/results/diffusion_learning.json
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
from typing import IO

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parents[1]

VARIANTS: dict[str, list[str]] = {
    "espo": ["--algo", "espo"],
    "espo-k1": ["--algo", "espo", "--kl_estimator", "k1"],
    "espo-k3": ["--algo", "espo", "--kl_estimator", "k3"],
    "token-elbo": ["--algo", "token-elbo"],
    "diffu-grpo": ["--algo", "diffu-grpo"],
}


def run_command(variant: str, seed: int, out: Path, shared: list[str]) -> list[str]:
    return [sys.executable, str(REPO / "posttrain" / "train.py"), *VARIANTS[variant], "--seed", str(seed),
            "--output_dir", str(out), "--progress", "false", "--report_to", "jsonl", "--num_threads", "1",
            "--save_every", "0", *shared]


def read_rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def finished(run_dir: Path, steps: int) -> bool:
    rows = read_rows(run_dir)
    return bool(rows) and rows[-1]["step"] == steps and "eval/accuracy" in rows[-1]


def run_all(runs: list[tuple[str, int]], runs_dir: Path, shared: list[str], steps: int, jobs: int) -> dict[str, str]:
    """Run every (variant, seed) not finished yet, ``jobs`` at a time; returns each run's command line."""
    commands = {f"{v}-s{s}": run_command(v, s, runs_dir / f"{v}-s{s}", shared) for v, s in runs}
    pending = [name for name in commands if not finished(runs_dir / name, steps)]
    active: dict[str, tuple[subprocess.Popen, float, IO[str]]] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    while pending or active:
        while pending and len(active) < jobs:
            name = pending.pop(0)
            (runs_dir / name).mkdir(parents=True, exist_ok=True)
            log = open(runs_dir / f"{name}.log", "w")  # noqa: SIM115  (closed when the run ends)
            active[name] = (subprocess.Popen(commands[name], cwd=REPO, env=env, stdout=log, stderr=log),
                            time.perf_counter(), log)
        time.sleep(2)
        for name, (proc, start, log) in list(active.items()):
            if proc.poll() is not None:
                del active[name]
                log.close()
                print(f"{name}: exit {proc.returncode} after {time.perf_counter() - start:.0f} s", flush=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"run {name} failed; see {runs_dir / (name + '.log')}")
    return {name: " ".join(cmd) for name, cmd in commands.items()}


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0


def summarise(runs_dir: Path, variants: list[str], seeds: list[int], commands: dict[str, str], command: str) -> dict:
    summary: dict = {"command": command, "runs": {}, "variants": {}}
    for variant in variants:
        finals, starts = [], []
        for seed in seeds:
            name = f"{variant}-s{seed}"
            rows = read_rows(runs_dir / name)
            evals = [(r["step"], r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
            summary["runs"][name] = {
                "command": commands.get(name),
                "eval_accuracy": evals,
                "train_reward": [(r["step"], r["reward/mean"]) for r in rows if "reward/mean" in r],
                "train_kl": [(r["step"], r["train/kl"]) for r in rows if "train/kl" in r],
                "seconds": sum(r.get("perf/step_seconds", 0.0) for r in rows),
            }
            if evals:
                starts.append(evals[0][1])
                finals.append(evals[-1][1])
        if finals:
            mean, std = _mean_std(finals)
            summary["variants"][variant] = {"start_accuracy": starts, "final_accuracy": finals,
                                            "final_mean": mean, "final_std": std}
    return summary


def merge_summaries(paths: list[Path], command: str) -> dict:
    """One summary from several of this script's result files (a variant found twice is an error)."""
    merged: dict = {"command": command, "merged_from": [str(p) for p in paths], "runs": {}, "variants": {}}
    for path in paths:
        part = json.loads(path.read_text())
        for variant, stats in part["variants"].items():
            if variant in merged["variants"]:
                raise ValueError(f"{path}: variant {variant!r} is already in an earlier file")
            merged["variants"][variant] = stats
        merged["runs"].update(part["runs"])
    return merged


def _smooth(points: list[tuple[int, float]], window: int = 10) -> tuple[list[int], list[float]]:
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    out = [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]
    return steps, out


def plot(summary: dict, variants: list[str], seeds: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for index, variant in enumerate(variants):
        color = f"C{index}"
        runs = [summary["runs"][f"{variant}-s{s}"] for s in seeds if f"{variant}-s{s}" in summary["runs"]]
        curves = [r["eval_accuracy"] for r in runs if r["eval_accuracy"]]
        if curves and all(len(c) == len(curves[0]) for c in curves):
            steps = [s for s, _ in curves[0]]
            stats = [_mean_std([c[i][1] for c in curves]) for i in range(len(steps))]
            means = [m for m, _ in stats]
            axes[0].plot(steps, means, marker="o", color=color, label=f"{variant} (n={len(curves)})")
            axes[0].fill_between(steps, [m - s for m, s in stats], [m + s for m, s in stats], color=color, alpha=0.15)
        for key, ax in (("train_reward", axes[1]), ("train_kl", axes[2])):
            for k, run in enumerate(runs):
                if run[key]:
                    ax.plot(*_smooth(run[key]), color=color, alpha=0.7, label=variant if k == 0 else None)
    axes[0].set_title("held-out solve rate (greedy, mean ± std over seeds)")
    axes[1].set_title("train reward (dense cell reward, T=1; 10-step mean)")
    axes[2].set_title("KL to the reference (estimator of each run; 10-step mean)")
    axes[2].set_yscale("symlog", linthresh=1e-3)  # k1 estimates can be negative
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=None, help="Steps per run (default: the espo default).")
    parser.add_argument("--jobs", type=int, default=2, help="Runs at a time (each uses one CPU thread).")
    parser.add_argument("--runs_dir", type=Path, default=Path("outputs/bench_diffusion_learning"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/diffusion_learning.json"))
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="Run nothing: merge these result files of this script (runs done apart, same "
                        "steps) into --out and its plot.")
    parser.add_argument("extra", nargs=argparse.REMAINDER,
                        help="After '--': options passed to every run (e.g. -- --lr 3e-4).")
    args = parser.parse_args(argv)
    from posttrain.common.files import atomic_write_text

    if args.merge:
        summary = merge_summaries(args.merge, " ".join([sys.executable, *sys.argv]))
        atomic_write_text(args.out, json.dumps(summary, indent=2) + "\n")
        seeds = sorted({int(name.rsplit("-s", 1)[1]) for name in summary["runs"]})
        plot(summary, list(summary["variants"]), seeds, args.out.with_suffix(".png"))
        print({v: round(summary["variants"][v]["final_mean"], 3) for v in summary["variants"]})
        return 0
    from posttrain.algos import get_algorithm
    from posttrain.config import build_config, resolve_model_path

    extra = [a for a in args.extra if a != "--"]
    defaults = build_config(get_algorithm("espo").config_class, ["--algo", "espo", *extra])
    steps = args.steps or defaults.steps
    shared = ["--steps", str(steps), *extra]
    # Build (or reuse) the cached warm start once, before runs start side by side.
    print(f"warm start: {resolve_model_path(defaults, kind=defaults.model_kind)}", flush=True)
    runs = [(v, s) for s in args.seeds for v in args.variants]
    commands = run_all(runs, args.runs_dir, shared, steps, args.jobs)
    summary = summarise(args.runs_dir, args.variants, args.seeds, commands, " ".join([sys.executable, *sys.argv]))
    atomic_write_text(args.out, json.dumps(summary, indent=2) + "\n")
    plot(summary, args.variants, args.seeds, args.out.with_suffix(".png"))
    print(json.dumps({v: {k: summary["variants"][v][k] for k in ("start_accuracy", "final_accuracy", "final_mean",
                                                                  "final_std")} for v in summary["variants"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
