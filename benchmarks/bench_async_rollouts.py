"""GRPO step time with synchronous vs asynchronous rollouts (``--async_rollouts``), same run otherwise.

One `posttrain rollout-worker` (vLLM's CPU build) serves the rollouts of both runs (``--rollout
vllm-remote``); the trainer is one process. Synchronous: each step generates, then trains, then syncs.
Asynchronous (``--max_staleness 1``): step t+1's generation runs in the worker while step t trains, so
the step costs about max(generate, train) + sync instead of their sum. The model is the tiny arithmetic
policy with 3 heads (head size 32, which vLLM's CPU attention serves), randomly initialised: every
completion runs to ``--max_new_tokens``, so both runs generate the same number of tokens per step.
Reported: the mean ``perf/step_seconds`` over steps 2..N (step 1 has nothing to overlap), the async
run's mean wait for its rollouts, and the ratio sync / async. The two runs go one after the other on
the same worker, so load from other processes on the machine shows up as noise in the ratio.

    PYTHONPATH=. python benchmarks/bench_async_rollouts.py --out benchmarks/results/async_rollouts.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.engines.worker import (
    cpu_affinity_prefix,
    spawn_rollout_worker,
    start_on_a_free_port,
    stop_rollout_worker,
)

REPO = Path(__file__).resolve().parents[1]


def build_model(cache_dir: Path) -> Path:
    """The tiny arithmetic policy's vLLM twin (head size 32) with random weights, built into ``cache_dir``."""
    from posttrain.models.tiny import RECIPES, build_recipe, vllm_variant

    recipe = dataclasses.replace(RECIPES.get(vllm_variant("causal-arithmetic")), warm_start_steps=0)
    return build_recipe(recipe, cache_dir=cache_dir)


def train_args(model: Path, url: str, out: Path, args: argparse.Namespace, asynchronous: bool) -> list[str]:
    return [sys.executable, str(REPO / "posttrain" / "train.py"), "--algo", "grpo", "--model", str(model),
            "--rollout", "vllm-remote", "--rollout_workers", url, "--async_rollouts", str(asynchronous).lower(),
            "--max_staleness", "1", "--steps", str(args.steps), "--prompts_per_step", str(args.prompts),
            "--group_size", str(args.group_size), "--micro_batch_size", str(args.prompts * args.group_size),
            "--max_new_tokens", str(args.max_new_tokens), "--eval_every", "0", "--save_every", "0",
            "--progress", "false", "--report_to", "jsonl", "--num_threads", "1", "--seed", "0",
            "--output_dir", str(out)]


def run(command: list[str], out: Path, cpus: list[int] | None) -> dict[str, float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([*cpu_affinity_prefix(cpus), *command], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"training run failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][1:]  # step 1 excluded
    result = {"mean_step_seconds": statistics.mean(r["perf/step_seconds"] for r in rows),
              "steps_measured": len(rows)}
    if "time/async_rollout_wait" in rows[0]:
        result["mean_wait_for_rollouts_seconds"] = statistics.mean(r["time/async_rollout_wait"] for r in rows)
    result["mean_phase_seconds"] = {key.removeprefix("time/"): statistics.mean(r[key] for r in rows)
                                    for key in sorted(rows[0]) if key.startswith("time/")}
    return result


def main() -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--group_size", type=int, default=4)
    parser.add_argument("--max_new_tokens", type=int, default=24)
    parser.add_argument("--pin", action="store_true",
                        help="confine the rollout worker (all its processes) to CPU 0 and the trainer to CPU 1, "
                             "so generation has a core of its own, as a GPU worker has its own device")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "async_rollouts.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = build_model(root / "model")
        log = root / "worker.log"
        url, worker = start_on_a_free_port(
            lambda port, log_path: spawn_rollout_worker(str(model), port, log_path, extra_args=["--max-model-len", "256"],
                                                        env={"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
                                                        cpus=[0] if args.pin else None),
            log, 600)
        try:
            started = time.time()
            results = {}
            for name, asynchronous in (("sync", False), ("async", True)):
                out = root / name
                results[name] = run(train_args(model, url, out, args, asynchronous), out, [1] if args.pin else None)
            elapsed = time.time() - started
        finally:
            stop_rollout_worker(worker)
    report = {
        "benchmark": "GRPO step time, synchronous vs asynchronous rollouts (one vLLM CPU rollout worker)",
        "command": "PYTHONPATH=. python benchmarks/bench_async_rollouts.py " + " ".join(sys.argv[1:]),
        "settings": {"pinned": args.pin, "steps": args.steps, "prompts_per_step": args.prompts, "group_size": args.group_size,
                     "max_new_tokens": args.max_new_tokens, "max_staleness": 1, "threads_per_process": 1},
        "sync": results["sync"],
        "async": results["async"],
        "speedup_sync_over_async": results["sync"]["mean_step_seconds"] / results["async"]["mean_step_seconds"],
        "wall_seconds_both_runs": elapsed,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
    }
    atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
