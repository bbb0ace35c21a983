"""Load benchmark of the reward server: N concurrent clients for a bounded time, batching on vs off.

Starts ``posttrain serve`` (``python -m rewards.server.cli``) as a subprocess on a free loopback port,
then runs N asyncio httpx clients in a closed loop (each sends its next request when the last one is
answered) for ``--duration`` seconds, and records every request's status and latency. Reported per
setting: requests/s, p50/p99 latency, lost (exception, no HTTP answer) and failed (non-200) requests,
and the server's mean batch size (from ``/metrics?format=json``). Results go to
``benchmarks/results/server_load*.json`` with the command that made them.

Backends: ``fake`` (no model; each generate call costs ``base + per_item * batch``, an accelerator-
like cost model where batching pays) and ``transformers`` (the embedded tiny reward model, real
generation on CPU).

    python benchmarks/bench_server_load.py --backend fake --clients 32 --duration 10
    python benchmarks/bench_server_load.py --backend transformers --clients 16 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posttrain.common.cli_help import CommandParser
from posttrain.engines.weight_sync import free_port


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def start_server(args: argparse.Namespace, batching: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "rewards.server.cli", "--backend", args.backend, "--port", str(port),
           "--max_batch_size", str(args.max_batch_size), "--max_queue", str(args.max_queue),
           "--timeout", str(args.timeout), "--log_level", "warning", "--threads", str(args.threads)]
    if not batching:
        cmd.append("--no_batching")
    if args.backend == "fake":
        cmd += ["--fake_base_latency_ms", str(args.fake_base_ms), "--fake_per_item_ms", str(args.fake_item_ms)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + args.startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start in time")


def request_body(i: int, mode: str) -> dict:
    a, b = i % 50, (i * 7) % 50
    if mode == "pairwise":
        right, wrong = str(a + b), str(a + b + 1)
        responses = [right, wrong] if i % 2 else [wrong, right]
        return {"mode": "pairwise", "instruction": f"{a}+{b}=", "responses": responses, "max_tokens": 32}
    return {"mode": "binary", "instruction": f"{a}+{b}=", "responses": [str(a + b + (i % 2))], "max_tokens": 32}


async def client_loop(url: str, cid: int, stop_at: float, mode: str, log: list) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        i = cid * 100_000
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            try:
                resp = await client.post("/v1/rubric_score", json=request_body(i, mode))
                status = resp.status_code
                ok = status == 200 and "reward" in resp.json()
            except Exception as err:  # noqa: BLE001 - a lost request is a result, not a crash
                status, ok = f"lost:{type(err).__name__}", False
            log.append((start, time.perf_counter() - start, status, ok))
            i += 1


async def drive(url: str, clients: int, duration: float, mode: str) -> list:
    log: list = []
    stop_at = time.perf_counter() + duration
    await asyncio.gather(*(client_loop(url, c, stop_at, mode, log) for c in range(clients)))
    return log


def run_setting(args: argparse.Namespace, batching: bool) -> dict:
    proc, url = start_server(args, batching)
    try:
        asyncio.run(drive(url, min(args.clients, 4), args.warmup, args.mode))  # warm-up, not measured
        before = httpx.get(f"{url}/metrics", params={"format": "json"}).json()["batcher"]
        t0 = time.perf_counter()
        log = asyncio.run(drive(url, args.clients, args.duration, args.mode))
        wall = time.perf_counter() - t0
        after = httpx.get(f"{url}/metrics", params={"format": "json"}).json()["batcher"]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    latencies = [lat for _, lat, _, ok in log if ok]
    lost = sum(1 for *_, status, _ in log if isinstance(status, str))
    failed = sum(1 for *_, status, ok in log if not ok and not isinstance(status, str))
    batches = after["batches"] - before["batches"]
    prompts = after["prompts"] - before["prompts"]
    statuses: dict[str, int] = {}
    for *_, status, _ in log:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"batching": batching, "clients": args.clients, "duration_s": round(wall, 2), "requests": len(log),
            "ok": len(latencies), "failed": failed, "lost": lost, "statuses": statuses,
            "requests_per_s": round(len(latencies) / wall, 2),
            "p50_ms": round(1000 * percentile(latencies, 50), 1), "p99_ms": round(1000 * percentile(latencies, 99), 1),
            "mean_ms": round(1000 * statistics.fmean(latencies), 1) if latencies else None,
            "generate_calls": batches, "mean_batch_size": round(prompts / batches, 2) if batches else None,
            "max_batch_size_seen": after["max_batch"]}


def main(argv: list[str] | None = None) -> int:
    p = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="fake", choices=["fake", "transformers"])
    p.add_argument("--mode", default="pairwise", choices=["pairwise", "binary"])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per setting")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--max_batch_size", type=int, default=32)
    p.add_argument("--max_queue", type=int, default=512)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fake_base_ms", type=float, default=20.0)
    p.add_argument("--fake_item_ms", type=float, default=1.0)
    p.add_argument("--startup_timeout", type=float, default=300.0)
    p.add_argument("--out", default=None, help="default: benchmarks/results/server_load_<backend>.json")
    args = p.parse_args(argv)
    results = []
    for batching in (True, False):
        res = run_setting(args, batching)
        print(json.dumps(res), flush=True)
        results.append(res)
    on, off = results
    summary = {
        "command": "python benchmarks/bench_server_load.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "backend": args.backend, "mode": args.mode,
        "cost_model": (f"fake: {args.fake_base_ms} ms per generate call + {args.fake_item_ms} ms per prompt"
                       if args.backend == "fake" else "embedded tiny reward model (transformers, CPU)"),
        "machine": f"{os.cpu_count()} CPUs (shared, loaded); loopback",
        "results": results,
        "throughput_ratio_batching_on_vs_off": round(on["requests_per_s"] / off["requests_per_s"], 2)
        if off["requests_per_s"] else None,
        "p50_ratio_off_vs_on": round(off["p50_ms"] / on["p50_ms"], 2) if on["p50_ms"] else None,
        "zero_lost_or_failed": all(r["lost"] == 0 and r["failed"] == 0 for r in results),
    }
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"server_load_{args.backend}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}: batching on/off throughput x{summary['throughput_ratio_batching_on_vs_off']}, "
          f"zero lost/failed: {summary['zero_lost_or_failed']}")
    return 0 if summary["zero_lost_or_failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
