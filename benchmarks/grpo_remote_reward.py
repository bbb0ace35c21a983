"""GRPO whose reward comes from the served reward model over HTTP.

1. Starts ``posttrain serve`` (``python -m rewards.server.cli``) on a free loopback port with the embedded
   tiny mR3 reward model (built and warm-started on first use).
2. Runs ``python posttrain/train.py --algo grpo --task arithmetic --reward rewards.remote:reward`` with
   ``POSTTRAIN_REWARD_URL`` pointing at it (binary mode: the judge decides whether each completion answers
   the problem correctly; by default it is shown the task's gold answer as a reference,
   ``POSTTRAIN_REWARD_REFERENCE=1``); the trainer's own verifier still measures accuracy
   (``eval/accuracy``), which the reward never reads.
3. Records the trainer's reward / accuracy curve, the server's request counts and the remote client's
   failures into ``benchmarks/results/grpo_remote_reward.json``.

    python benchmarks/grpo_remote_reward.py --steps 10
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

from rewards.server.local import free_port


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--prompts-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--mode", default="binary", choices=["binary", "pairwise", "pointwise"])
    p.add_argument("--no-reference", action="store_true",
                   help="do not show the judge the task's gold answer (default: reference-guided judging)")
    p.add_argument("--output-dir", default=None)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_remote_reward.json"))
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more trainer flags")
    args = p.parse_args(argv)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "rewards.server.cli", "--port", str(port), "--threads", "1",
                               "--log-level", "warning", "--max-batch-size", "64"], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            if server.poll() is not None:
                raise RuntimeError(server.stderr.read().decode()[-3000:])
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("reward server did not start")
            time.sleep(0.5)
        out_dir = args.output_dir or tempfile.mkdtemp(prefix="grpo-remote-")
        cmd = [sys.executable, "posttrain/train.py", "--algo", "grpo", "--task", "arithmetic",
               "--reward", "rewards.remote:reward", "--steps", str(args.steps),
               "--prompts_per_step", str(args.prompts_per_step), "--group_size", str(args.group_size),
               "--micro_batch_size", str(args.prompts_per_step * args.group_size), "--eval_every", "5",
               "--eval_examples", "64", "--save_every", "0", "--output_dir", out_dir, "--progress", "false",
               "--report_to", "jsonl", *args.extra]
        train_env = {**env, "POSTTRAIN_REWARD_URL": url, "POSTTRAIN_REWARD_MODE": args.mode,
                     "POSTTRAIN_REWARD_TIMEOUT": "120",
                     "POSTTRAIN_REWARD_REFERENCE": "0" if args.no_reference else "1"}
        start = time.time()
        proc = subprocess.run(cmd, cwd=ROOT, env=train_env, capture_output=True, text=True, check=False)
        wall = time.time() - start
        metrics_path = Path(out_dir) / "metrics.jsonl"
        rows = [json.loads(line) for line in metrics_path.read_text().splitlines()] if metrics_path.exists() else []
        server_metrics = httpx.get(f"{url}/metrics", params={"format": "json"}).json()
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    keys = ("step", "reward/mean", "reward/valid_fraction", "train/accuracy", "eval/accuracy", "reward/none")
    curve = [{k: r[k] for k in r if k in keys or k.startswith(("reward/", "eval/"))} for r in rows]
    result = {"command": "python benchmarks/grpo_remote_reward.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "trainer_command": " ".join(cmd), "returncode": proc.returncode, "wall_s": round(wall, 1),
              "reward": {"mode": args.mode, "reference_shown_to_judge": not args.no_reference},
              "reward_server": {"requests": server_metrics["requests"], "batcher": server_metrics["batcher"]},
              "curve": curve, "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("returncode", "wall_s")}), f"-> {args.out}")
    for row in curve:
        print(row)
    if proc.returncode:
        print(proc.stderr[-3000:])
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
