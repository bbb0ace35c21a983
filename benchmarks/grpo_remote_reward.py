"""GRPO whose reward comes from the served reward model over HTTP.

1. Starts ``posttrain serve`` (``python -m rewards.server.cli``) on a free loopback port with the embedded
   tiny mR3 reward model (built and warm-started on first use).
2. Runs ``python posttrain/train.py --algo grpo --task arithmetic --reward rewards.remote:reward`` with
   ``POSTTRAIN_REWARD_URL`` pointing at it (binary mode: the judge decides whether each completion answers
   the problem correctly, working the problem out itself; ``--reference`` shows it the task's gold answer,
   ``POSTTRAIN_REWARD_REFERENCE=1``); the trainer's own verifier still measures accuracy
   (``train/accuracy``, ``eval/accuracy``), which the reward never reads. The other settings are the
   trainer's defaults, as in the verifier-rewarded demo (``benchmarks/bench_grpo_demo.py``), so the two
   runs compare directly.
3. Records the trainer's reward / accuracy curve, a summary, the server's request counts and the remote
   client's failures into ``benchmarks/results/grpo_remote_reward.json``.

    OMP_NUM_THREADS=1 python benchmarks/grpo_remote_reward.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posttrain.common.cli_help import CommandParser
from posttrain.engines.weight_sync import free_port


def summarize(curve: list[dict]) -> dict[str, float | None]:
    """Held-out accuracy at the first and last evaluation; the mean reward and verifier-checked train
    accuracy over the first and last tenth of the steps; and the mean per-step gap between the two (a
    lower bound on how often the judge disagreed with the verifier)."""
    evals = [r["eval/accuracy"] for r in curve if "eval/accuracy" in r]
    train = [r for r in curve if "reward/mean" in r]
    tenth = max(1, len(train) // 10)

    def mean(rows: list[dict], key: str) -> float | None:
        values = [r[key] for r in rows if key in r]
        return round(sum(values) / len(values), 4) if values else None

    gaps = [abs(r["reward/mean"] - r["train/accuracy"]) for r in train if "train/accuracy" in r]
    return {"eval_accuracy_first": evals[0] if evals else None, "eval_accuracy_last": evals[-1] if evals else None,
            "reward_mean_first_tenth": mean(train[:tenth], "reward/mean"),
            "reward_mean_last_tenth": mean(train[-tenth:], "reward/mean"),
            "train_accuracy_first_tenth": mean(train[:tenth], "train/accuracy"),
            "train_accuracy_last_tenth": mean(train[-tenth:], "train/accuracy"),
            "mean_abs_reward_minus_accuracy": round(sum(gaps) / len(gaps), 4) if gaps else None}


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """``posttrain serve`` with the embedded tiny reward model on a free loopback port, once healthy."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "rewards.server.cli", "--port", str(port), "--threads", "1",
                               "--log_level", "warning", "--max_batch_size", "64"], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900  # the first start may build and warm-start the model
    while True:
        if server.poll() is not None:
            raise RuntimeError(server.stderr.read().decode()[-3000:])
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("reward server did not start within 900 s")
        time.sleep(0.5)


def run_seed(args: argparse.Namespace, seed: int, url: str, env: dict[str, str]) -> dict:
    """One GRPO run rewarded by the server at ``url``; its command, curve and summary."""
    out_dir = tempfile.mkdtemp(prefix=f"grpo-remote-s{seed}-", dir=args.output_dir)
    cmd = [sys.executable, "posttrain/train.py", "--algo", "grpo", "--task", "arithmetic",
           "--reward", "rewards.remote:reward", "--seed", str(seed), "--steps", str(args.steps),
           "--prompts_per_step", str(args.prompts_per_step), "--group_size", str(args.group_size),
           "--micro_batch_size", str(args.prompts_per_step * args.group_size), "--eval_every", str(args.eval_every),
           "--eval_examples", str(args.eval_examples), "--save_every", "0", "--output_dir", out_dir,
           "--progress", "false", "--report_to", "jsonl", *args.extra]
    train_env = {**env, "POSTTRAIN_REWARD_URL": url, "POSTTRAIN_REWARD_MODE": args.mode,
                 "POSTTRAIN_REWARD_TIMEOUT": "120", "POSTTRAIN_REWARD_REFERENCE": "1" if args.reference else "0"}
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=train_env, capture_output=True, text=True, check=False)
    wall = time.time() - start
    metrics_path = Path(out_dir) / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines()] if metrics_path.exists() else []
    keys = ("step", "train/accuracy")
    curve = [{k: r[k] for k in r if k in keys or k.startswith(("reward/", "eval/"))} for r in rows]
    return {"seed": seed, "trainer_command": " ".join(cmd), "returncode": proc.returncode, "wall_s": round(wall, 1),
            "summary": summarize(curve), "curve": curve, "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    p = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--prompts_per_step", type=int, default=16)
    p.add_argument("--group_size", type=int, default=8)
    p.add_argument("--eval_every", type=int, default=50)
    p.add_argument("--eval_examples", type=int, default=128)
    p.add_argument("--mode", default="binary", choices=["binary", "pairwise", "pointwise"])
    p.add_argument("--reference", action="store_true",
                   help="show the judge the task's gold answer (reference-guided judging; default: it solves)")
    p.add_argument("--output_dir", default=None, help="parent of the runs' output directories (default: /tmp)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_remote_reward.json"))
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more trainer flags")
    args = p.parse_args(argv)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    server, url = start_server(env)
    try:
        runs = []
        for seed in args.seeds:
            runs.append(run_seed(args, seed, url, env))
            print(f"seed {seed}: returncode {runs[-1]['returncode']}, {runs[-1]['wall_s']} s, {runs[-1]['summary']}",
                  flush=True)
        server_metrics = httpx.get(f"{url}/metrics", params={"format": "json"}).json()
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    finals = [r["summary"]["eval_accuracy_last"] for r in runs if r["summary"]["eval_accuracy_last"] is not None]
    result = {"command": "python benchmarks/grpo_remote_reward.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "reward": {"mode": args.mode, "reference_shown_to_judge": args.reference},
              "eval_accuracy_last_mean": round(sum(finals) / len(finals), 4) if finals else None,
              "reward_server": {"requests": server_metrics["requests"], "batcher": server_metrics["batcher"]},
              "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {args.out}")
    failed = [r for r in runs if r["returncode"]]
    for run in failed:
        print(f"seed {run['seed']} failed:\n{run['stderr_tail']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
