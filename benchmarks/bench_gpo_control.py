"""GPO control benchmark (GPO, arXiv 2505.15418): the paper's comparison in miniature.

Every method x seed x noise level on TigerDoor and noisy position-only CartPole; learner evaluated alone.
Writes ``benchmarks/results/gpo_control.json`` (every run's curve and final learner return, plus a
summary) and one PNG of learning curves per environment (``gpo_control_<env>.png``). Resumable: runs
already in the JSON are skipped. Teacher-student reuses the same seed's oracle as its frozen teacher.

    nice -n 10 python benchmarks/bench_gpo_control.py --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from posttrain.common.cli_help import CommandParser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_NOISE = {"tiger-door": [0.0, 0.2], "cartpole": [0.0, 0.05, 0.1]}
ORDER = ["oracle", "ppo", "ppo-asym", "ppo-bc", "teacher-student", "gpo-naive", "gpo-penalty", "gpo-clip"]


def _key(env: str, noise: float, method: str, seed: int) -> str:
    return f"{env}|{noise}|{method}|{seed}"


def _run(job: dict) -> tuple[str, dict, float]:
    import torch

    from posttrain.standalone.gpo_control.methods import ControlConfig, train

    torch.set_num_threads(1)
    t0 = time.process_time()
    teacher = None
    if job["method"] == "teacher-student" and Path(job["teacher"]).exists():
        teacher = torch.load(job["teacher"], weights_only=False)
    cfg = ControlConfig(env=job["env"], method=job["method"], noise=job["noise"], seed=job["seed"], steps=job["steps"])
    result, state = train(cfg, teacher=teacher)
    if job["method"] == "oracle":
        Path(job["teacher"]).parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, job["teacher"])
    return job["key"], result, time.process_time() - t0


def _save(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def summarise(runs: dict) -> dict:
    """Per env / noise / method: final learner return (mean, std over seeds, values) and the mean over the
    curve's evaluations ("curve_mean", an area-under-curve measure of speed)."""
    table: dict = {}
    for key, r in runs.items():
        env, noise, method, _ = key.split("|")
        auc = float(np.mean([p["eval_return"] for p in r["history"]]))
        table.setdefault(env, {}).setdefault(noise, {}).setdefault(method, []).append((r["final_return"], auc))
    return {env: {noise: {m: {"mean": float(np.mean([f for f, _ in v])), "std": float(np.std([f for f, _ in v])),
                              "n": len(v), "values": [f for f, _ in v],
                              "curve_mean": float(np.mean([a for _, a in v])), "curve_mean_std": float(np.std([a for _, a in v]))}
                          for m, v in ms.items()} for noise, ms in ns.items()} for env, ns in table.items()}


def plot(runs: dict, env: str, noises: list[float], path: Path) -> None:
    """Row 1: learner return per method (mean +- std over seeds). Row 2: KL(mu || pi) of the co-trained
    methods, the guider-learner gap that GPO's backtracking keeps small."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(noises), figsize=(6 * len(noises), 7.5), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.6]})
    for col, noise in enumerate(noises):
        ax, kl_ax = axes[0][col], axes[1][col]
        for i, method in enumerate(ORDER):
            curves = [r["history"] for k, r in runs.items() if k.startswith(f"{env}|{noise}|{method}|")]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            x = np.array([p["env_steps"] for p in curves[0][:n]])
            y = np.array([[p["eval_return"] for p in c[:n]] for c in curves])
            style = "--" if method == "oracle" else "-"
            ax.plot(x, y.mean(0), style, color=f"C{i}", label=f"{method} (n={len(curves)})", lw=2 if "gpo" in method else 1.3)
            ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), color=f"C{i}", alpha=0.12)
            if curves[0][0].get("kl_guider_learner") is not None:
                kl = np.array([[p["kl_guider_learner"] for p in c[:n]] for c in curves])
                kl_ax.plot(x, kl.mean(0), color=f"C{i}", label=method)
        label = "mishear prob." if env == "tiger-door" else "obs. noise std"
        ax.set_title(f"{env}, {label} {noise}")
        ax.set_ylabel("learner return (oracle: full-state guider)")
        ax.grid(alpha=0.3)
        kl_ax.set_yscale("log")
        kl_ax.set_ylabel("KL(mu || pi)")
        kl_ax.set_xlabel("env steps (teacher-student: student steps; teacher = the oracle run)")
        kl_ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    axes[1][0].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="+", default=list(DEFAULT_NOISE))
    p.add_argument("--methods", nargs="+", default=ORDER)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None, help="Override every env's default steps.")
    p.add_argument("--jobs", type=int, default=1, help="Parallel worker processes.")
    p.add_argument("--out", default=str(RESULTS / "gpo_control.json"))
    p.add_argument("--work_dir", default="/tmp/gpo_control_bench", help="Where oracle teachers are kept.")
    p.add_argument("--report_only", action="store_true", help="Only re-plot and print the table from --out.")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    if args.report_only:
        for env in args.envs:
            plot(data["runs"], env, DEFAULT_NOISE[env], out.parent / f"{out.stem}_{env}.png")
        data["summary"] = summarise(data["runs"])
        _save(out, data)
        print(markdown_table(data["summary"]))
        return 0
    data["command"] = "python benchmarks/bench_gpo_control.py " + " ".join(sys.argv[1:] if argv is None else argv)
    jobs = []
    for env in args.envs:
        for noise in DEFAULT_NOISE[env]:
            for seed in range(args.seeds):
                for method in args.methods:
                    key = _key(env, noise, method, seed)
                    if key not in data["runs"]:
                        teacher = f"{args.work_dir}/{env}_{noise}_s{seed}_oracle.pt"
                        jobs.append({"key": key, "env": env, "noise": noise, "seed": seed, "method": method,
                                     "steps": args.steps, "teacher": teacher})
    stages = [[j for j in jobs if j["method"] != "teacher-student"], [j for j in jobs if j["method"] == "teacher-student"]]
    data.setdefault("cpu_seconds", {})
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for stage in stages:
            for key, result, cpu in pool.map(_run, stage):
                data["runs"][key] = result
                data["cpu_seconds"][key] = round(cpu, 1)
                print(f"{key}: final {result['final_return']:.3f} ({cpu:.0f} s CPU)", flush=True)
                data["summary"] = summarise(data["runs"])
                _save(out, data)
    data["summary"] = summarise(data["runs"])
    _save(out, data)
    for env in args.envs:
        plot(data["runs"], env, DEFAULT_NOISE[env], out.parent / f"{out.stem}_{env}.png")
    print(markdown_table(data["summary"]))
    return 0


def markdown_table(summary: dict) -> str:
    """Final learner return, mean +- std over seeds [mean over the curve], one row per method, one column
    per env / noise level."""
    cols = [(env, noise) for env, ns in summary.items() for noise in sorted(ns, key=float)]
    lines = ["| method | " + " | ".join(f"{e} {n}" for e, n in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for m in ORDER:
        cells = []
        for env, noise in cols:
            s = summary[env][noise].get(m)
            cells.append(f"{s['mean']:.2f} ± {s['std']:.2f} [{s['curve_mean']:.2f}]" if s else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
