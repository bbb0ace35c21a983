"""The data backbone's scale-out: driver memory as the input grows, throughput on 1 and 2 workers, and the
cost over a direct call, with a cheap scorer (character statistics of each text), so the backbone itself is
what is measured.

Every measurement runs in a fresh driver subprocess (``--one``), joined to one local Ray the parent started
(so no Ray start-up is timed), so that its peak resident memory (``ru_maxrss``) is its own: the driver's
memory of one ``StageRunner`` run over a JSONL of ``n`` records of ``--chars``
characters, on 1 or 2 Ray workers. The parent writes the inputs, runs the subprocesses and checks that the 1-
and 2-worker merged outputs are byte-identical. ``--backbone_path`` runs the same subprocess against another
checkout (e.g. the backbone before the workers read and wrote their own blocks), for a before/after.

    python benchmarks/bench_data_backbone.py --records 20000 --out benchmarks/results/data_backbone.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parents[1]


def cheap_scorer(batch: list[dict]) -> list[dict]:
    """A stage that costs next to nothing: length, vowel and space counts of each text."""
    return [{"chars": len(r["text"]), "vowels": sum(r["text"].count(v) for v in "aeiou"),
             "spaces": r["text"].count(" ")} for r in batch]


def write_input(path: Path, n: int, chars: int) -> None:
    word = "lorem ipsum dolor sit amet "
    body = (word * (chars // len(word) + 1))[:chars]
    with open(path, "w") as handle:
        handle.writelines(json.dumps({"id": i, "text": f"{i} {body}"}) + "\n" for i in range(n))


def one(args: argparse.Namespace) -> None:
    """One measured run in this process; prints a JSON line."""
    from data_pipelines.common.ray_exec import init_ray
    from data_pipelines.common.runner import StageRunner

    init_ray(args.ray_address)
    start = time.perf_counter()
    runner = StageRunner(args.output, cheap_scorer, chunk_size=args.chunk_size, progress=False,
                         num_workers=args.workers, ray_address=args.ray_address)
    summary = runner.run(args.input)
    runner.merge(Path(args.output) / "merged.jsonl", args.records)
    seconds = time.perf_counter() - start
    print(json.dumps({"records": args.records, "workers": args.workers, "seconds": round(seconds, 2),
                      "records_out": summary.records_out,
                      "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


def direct(path: Path, chunk_size: int) -> float:
    """Read the JSONL and call the scorer block by block in this process, writing the outputs: no runner."""
    start = time.perf_counter()
    with open(path) as handle, tempfile.NamedTemporaryFile("w", suffix=".jsonl") as out:
        block: list[dict] = []
        for line in handle:
            block.append(json.loads(line))
            if len(block) == chunk_size:
                out.writelines(json.dumps(r) + "\n" for r in cheap_scorer(block))
                block = []
        out.writelines(json.dumps(r) + "\n" for r in cheap_scorer(block))
    return time.perf_counter() - start


def run_child(backbone: Path, input_path: Path, output: Path, records: int, workers: int, chunk_size: int,
              ray_address: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{backbone}:{REPO}", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--input", str(input_path), "--output",
           str(output), "--records", str(records), "--workers", str(workers), "--chunk_size", str(chunk_size),
           "--ray_address", ray_address]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)  # its output is the error
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]  # Ray may print after it
    if done.returncode or not lines:
        raise RuntimeError(f"{cmd}: no result line; stdout {done.stdout[-2000:]!r}, stderr {done.stderr[-2000:]!r}")
    return json.loads(lines[-1])


def main() -> None:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000, help="the small input; the large one is 10x")
    parser.add_argument("--chars", type=int, default=400, help="characters of each record's text")
    parser.add_argument("--chunk_size", type=int, default=2000)
    parser.add_argument("--backbone_path", default=None, help="also measure the backbone of this checkout")
    parser.add_argument("--out", default="benchmarks/results/data_backbone.json")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--ray_address", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args)
        return
    import ray

    from data_pipelines.common.ray_exec import init_ray

    init_ray(None, num_cpus=2)  # one local Ray that every measured driver joins (no start-up in the timings)
    address = ray.get_runtime_context().gcs_address
    result: dict = {"command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "chars": args.chars,
                    "chunk_size": args.chunk_size, "cpu_count": os.cpu_count(), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sizes = {"small": args.records, "large": 10 * args.records}
        for name, n in sizes.items():
            write_input(tmp_path / f"{name}.jsonl", n, args.chars)
            result[f"{name}_input_mb"] = round((tmp_path / f"{name}.jsonl").stat().st_size / 2**20, 1)
        result["direct_s_large"] = round(direct(tmp_path / "large.jsonl", args.chunk_size), 2)
        backbones = {"this": REPO, **({"other": Path(args.backbone_path)} if args.backbone_path else {})}
        for label, path in backbones.items():
            for name, n in sizes.items():
                result[f"{label}_{name}_1worker"] = run_child(path, tmp_path / f"{name}.jsonl",
                                                              tmp_path / f"{label}-{name}-1", n, 1, args.chunk_size,
                                                              address)
                print(label, name, result[f"{label}_{name}_1worker"], flush=True)
        result["this_large_2workers"] = run_child(REPO, tmp_path / "large.jsonl", tmp_path / "this-large-2",
                                                  sizes["large"], 2, args.chunk_size, address)
        print("2 workers", result["this_large_2workers"], flush=True)
        result["identical_1_and_2_workers"] = ((tmp_path / "this-large-1" / "merged.jsonl").read_bytes()
                                               == (tmp_path / "this-large-2" / "merged.jsonl").read_bytes())
    one_w, two_w = result["this_large_1worker"], result["this_large_2workers"]
    result["speedup_2_vs_1"] = round(one_w["seconds"] / two_w["seconds"], 2)
    result["cost_over_direct_1worker"] = round(one_w["seconds"] / result["direct_s_large"], 1)
    result["load_after"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
