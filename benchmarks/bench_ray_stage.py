"""Throughput of one realistic stage on the Ray data backbone: DMAP scoring with SmolLM2-135M.

Three ways over the same texts (built-in corpus documents of several seeds), same blocks:

- ``direct``: the stage function (``make_dmap_stage``) called on each block in this process, no runner
  (its one-off build, model load included, is timed apart as ``build_s``), once with torch's default thread
  count (every core) and once with one thread (``direct_1thread``), which is what each Ray actor gets: Ray
  sets ``OMP_NUM_THREADS`` to an actor's ``num_cpus`` (1), so ``ray1`` compares with ``direct_1thread``;
- ``ray1`` / ``ray2``: ``StageRunner`` with an ``ActorStage`` of 1 and 2 Ray actors (local in-process Ray,
  started before the clock; each timed run includes its actors' start-up and the part-file writes).

Prints records/s of each, the ray2/ray1 ratio and the runner's overhead over ``direct``, checks that the
1- and 2-worker merged outputs are byte-identical, and writes the numbers (with the load average before
and after, since the machine may be shared) to ``--out``.

    python benchmarks/bench_ray_stage.py --num_texts 160 --out benchmarks/results/ray_stage.json
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from data_pipelines.common.corpus import make_corpus
from data_pipelines.common.ray_exec import init_ray
from data_pipelines.common.runner import ActorStage, StageRunner
from data_pipelines.dmap.pipeline import make_dmap_stage
from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.models.pretrained import resolve_model_name


def texts(n: int) -> list[dict]:
    out: list[dict] = []
    seed = 0
    while len(out) < n:
        out.extend({"text": d["text"]} for d in make_corpus(seed=seed).documents)
        seed += 1
    return out[:n]


def main() -> None:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="scorer (alias, path, or 'corpus-lm')")
    parser.add_argument("--num_texts", type=int, default=160)
    parser.add_argument("--chunk_size", type=int, default=16)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--out", default="benchmarks/results/ray_stage.json")
    args = parser.parse_args()
    records = texts(args.num_texts)
    model = None if args.model == "corpus-lm" else resolve_model_name(args.model)
    factory = functools.partial(make_dmap_stage, model, "cpu", args.batch_size, 20, None, 2000, "text")
    load_before = os.getloadavg()
    init_ray(None, num_cpus=2)
    start = time.perf_counter()
    process = factory()
    build = time.perf_counter() - start
    process(records[: args.chunk_size])  # warm-up: first forward pays lazy initialisation

    def time_direct() -> float:
        start = time.perf_counter()
        for b in range(0, len(records), args.chunk_size):
            process(records[b:b + args.chunk_size])
        return time.perf_counter() - start

    default_threads = torch.get_num_threads()
    direct = time_direct()
    torch.set_num_threads(1)
    direct_1thread = time_direct()
    torch.set_num_threads(default_threads)
    result = {"stage": f"dmap scoring, {args.model}", "build_s": round(build, 2), "num_texts": len(records),
              "chunk_size": args.chunk_size, "batch_size": args.batch_size, "cpu_count": os.cpu_count(),
              "direct_threads": default_threads, "direct_s": round(direct, 2),
              "direct_records_per_s": round(len(records) / direct, 2), "direct_1thread_s": round(direct_1thread, 2),
              "direct_1thread_records_per_s": round(len(records) / direct_1thread, 2)}
    merged = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2):
            runner = StageRunner(Path(tmp) / f"w{workers}", ActorStage(factory, num_actors=workers),
                                 chunk_size=args.chunk_size, batch_size=args.batch_size, desc=f"ray{workers}",
                                 progress=False)
            start = time.perf_counter()
            summary = runner.run(records)
            seconds = time.perf_counter() - start
            if summary.records_out != len(records):
                raise RuntimeError(f"ray{workers}: {summary.records_out} outputs, {summary.records_rejected} rejects")
            runner.merge(Path(tmp) / f"w{workers}.jsonl", len(records))
            merged[workers] = (Path(tmp) / f"w{workers}.jsonl").read_bytes()
            result[f"ray{workers}_s"] = round(seconds, 2)
            result[f"ray{workers}_records_per_s"] = round(len(records) / seconds, 2)
            print(f"ray{workers}: {seconds:.1f}s {len(records) / seconds:.1f} records/s", flush=True)
    result["outputs_identical_1_vs_2"] = merged[1] == merged[2]
    result["speedup_2_vs_1"] = round(result["ray1_s"] / result["ray2_s"], 3)
    result["overhead_ray1_vs_direct"] = round(result["ray1_s"] / direct, 3)
    result["overhead_ray1_vs_direct_1thread"] = round(result["ray1_s"] / direct_1thread, 3)
    result["ray2_vs_direct"] = round(direct / result["ray2_s"], 3)
    result["loadavg_before"] = [round(x, 2) for x in load_before]
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"direct ({default_threads} threads): {direct:.1f}s {len(records) / direct:.1f} records/s; "
          f"1 thread: {direct_1thread:.1f}s {len(records) / direct_1thread:.1f} records/s")
    print(json.dumps(result, indent=2))
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
