"""Sci2Pol-Bench on the embedded miniature items: the tiny corpus LM vs SmolLM2-135M-Instruct, side by side,
both judged by the same judge (SmolLM2-135M by default), with bootstrap SEs per task, stage and overall.

Each model runs ``posttrain data sci2pol bench`` (``data_pipelines.sci2pol.run``) into ``WORK/<model>``
with one shared result cache ``WORK/cache`` (keyed by task, id, model and prompt hash, so a rerun of the
script makes no model call). Reported besides the scores: the judge's JSON failure rate (invalid after
the bounded retries) and its first-attempt failure rate, i.e. how reliable the judge is.

    PYTHONPATH=. python benchmarks/bench_sci2pol.py --out benchmarks/results/sci2pol.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from data_pipelines.common.io import atomic_write_text
from data_pipelines.sci2pol.run import add_sci2pol_args, run_sci2pol


def bench_model(model: str, judge: str, work: Path, per_task: int) -> dict:
    parser = argparse.ArgumentParser()
    add_sci2pol_args(parser)
    out = work / model.replace("/", "_").replace(":", "_")
    args = parser.parse_args(["bench", "--model", model, "--judge", judge, "--per-task", str(per_task),
                              "--judge-tokens", "48", "--judge-retries", "1",
                              "--output", str(out), "--cache-dir", str(work / "cache"), "--no-progress"])
    run_sci2pol(args)
    report = json.loads((out / "results.json").read_text())
    judged = [t for t in report["tasks"].values() if t["metric"] == "judge"]
    calls = sum(t["judge_calls"] for t in judged)
    items = sum(t["n"] for t in judged)
    report["judge_reliability"] = {
        "items": items, "items_failed": sum(t["judge_failures"] for t in judged),
        "item_failure_rate": sum(t["judge_failures"] for t in judged) / items if items else None,
        "calls": calls, "attempts": sum(t["judge_attempts"] for t in judged)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,smollm2-135m", help="comma-separated models under test")
    parser.add_argument("--judge", default="smollm2-135m", help="the one judge of every model")
    parser.add_argument("--per-task", type=int, default=2, help="embedded items per task")
    parser.add_argument("--work-dir", default="/tmp/bench_sci2pol", help="run folders and the shared cache")
    parser.add_argument("--out", default="benchmarks/results/sci2pol.json", help="results JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    reports = {m: bench_model(m, args.judge, Path(args.work_dir), args.per_task) for m in args.models.split(",")}
    result = {"judge": args.judge, "per_task": args.per_task, "machine": platform.processor() or platform.machine(),
              "seconds": round(time.perf_counter() - started, 1), "models": reports}
    atomic_write_text(Path(args.out), json.dumps(result, indent=2) + "\n")
    names = list(reports)
    print("task      " + "".join(f"{m:>26}" for m in names))
    for task in reports[names[0]]["tasks"]:
        cells = []
        for m in names:
            t = reports[m]["tasks"][task]
            score = "n/a" if t["score"] is None else f"{t['score']:.1f} +- {t['se']:.1f}"
            cells.append(f"{score:>16} ({'strict ' + format(t['strict'], '.0f') if 'strict' in t else 'fail ' + str(t['judge_failures'])})")
        print(f"{task:<10}" + "".join(f"{c:>26}" for c in cells))
    for m in names:
        r = reports[m]
        print(f"{m}: overall {r['overall']}, stages {r['stages']}, judge {r['judge_reliability']}")


if __name__ == "__main__":
    main()
