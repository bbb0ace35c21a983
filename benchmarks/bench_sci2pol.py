"""Sci2Pol-Bench on the embedded miniature items: the tiny corpus LM vs SmolLM2-135M-Instruct, side by side,
both judged by the same judge (SmolLM2-135M by default), with bootstrap SEs per task, stage and overall,
each under two judge arms: ``structured`` (the judge decodes under the rubric's JSON Schema, the default)
and ``free_text`` (``--no_structured_output``: free text after a prefilled first key, the ablation).

Each model and arm runs ``posttrain data sci2pol bench`` (``data_pipelines.sci2pol.run``) into
``WORK/<model>-<arm>`` with one shared result cache ``WORK/cache`` (keyed by task, id, model, prompt hash and
the judge's decoding settings, so the arms share the generations and a rerun of the script makes no model
call). Reported besides the scores: the judge's failure rate (items still invalid after the bounded retries)
and its attempts per call, i.e. how reliable the judge is.

    PYTHONPATH=. python benchmarks/bench_sci2pol.py --models tiny,vllm:smollm2-135m --judge vllm:smollm2-135m
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from data_pipelines.sci2pol.options import add_sci2pol_args
from data_pipelines.sci2pol.run import run_sci2pol
from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.common.jsonl import iter_jsonl

ARMS = {"structured": [], "free_text": ["--no_structured_output"]}


def bench_model(model: str, judge: str, work: Path, per_task: int, arm: str) -> dict:
    parser = CommandParser()
    add_sci2pol_args(parser)
    out = work / f"{model.replace('/', '_').replace(':', '_')}-{arm}"
    args = parser.parse_args(["bench", "--model", model, "--judge", judge, "--per_task", str(per_task),
                              "--judge_tokens", "48", "--judge_retries", "1", *ARMS[arm],
                              "--output", str(out), "--cache_dir", str(work / "cache"), "--no_progress"])
    run_sci2pol(args)
    report = json.loads((out / "results.json").read_text())
    judged = [t for t in report["tasks"].values() if t["metric"] == "judge"]
    calls = sum(t["judge_calls"] for t in judged)
    items = sum(t["n"] for t in judged)
    report["judge_reliability"] = {
        "items": items, "items_failed": sum(t["judge_failures"] for t in judged),
        "item_failure_rate": sum(t["judge_failures"] for t in judged) / items if items else None,
        "calls": calls, "attempts": sum(t["judge_attempts"] for t in judged)}
    report["judge_values"] = judge_value_counts(out / "responses.jsonl")
    return report


def judge_value_counts(responses: Path) -> dict[str, dict[str, int]]:
    """Per rubric, how often the judge gave each criterion value (over its validated judgements): how much
    of the range it uses."""
    counts: dict[str, Counter] = {}
    for _, row in iter_jsonl(responses):
        for rubric, values in (row.get("judgements") or {}).items():
            if values is not None:
                counts.setdefault(rubric, Counter()).update(f"{v:g}" for v in values.values())
    return {rubric: dict(sorted(c.items())) for rubric, c in counts.items()}


def main() -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,smollm2-135m", help="comma-separated models under test")
    parser.add_argument("--judge", default="smollm2-135m", help="the one judge of every model")
    parser.add_argument("--per_task", type=int, default=2, help="embedded items per task")
    parser.add_argument("--work_dir", default="/tmp/bench_sci2pol", help="run folders and the shared cache")
    parser.add_argument("--out", default="benchmarks/results/sci2pol.json", help="results JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    reports = {m: {arm: bench_model(m, args.judge, Path(args.work_dir), args.per_task, arm) for arm in ARMS}
               for m in args.models.split(",")}
    result = {"judge": args.judge, "per_task": args.per_task, "judge_tokens": 48, "judge_retries": 1,
              "command": "PYTHONPATH=. python benchmarks/bench_sci2pol.py " + " ".join(sys.argv[1:]),
              "machine": platform.processor() or platform.machine(),
              "seconds": round(time.perf_counter() - started, 1), "models": reports}
    atomic_write_text(Path(args.out), json.dumps(result, indent=2) + "\n")
    columns = [(m, arm) for m in reports for arm in ARMS]
    print("task      " + "".join(f"{m + ' ' + arm:>30}" for m, arm in columns))
    for task in reports[columns[0][0]][columns[0][1]]["tasks"]:
        cells = []
        for m, arm in columns:
            t = reports[m][arm]["tasks"][task]
            score = "n/a" if t["score"] is None else f"{t['score']:.1f} +- {t['se']:.1f}"
            cells.append(f"{score:>16} ({'strict ' + format(t['strict'], '.0f') if 'strict' in t else 'fail ' + str(t['judge_failures'])})")
        print(f"{task:<10}" + "".join(f"{c:>30}" for c in cells))
    for m, arm in columns:
        r = reports[m][arm]
        print(f"{m} [{arm}]: overall {r['overall']}, stages {r['stages']}, judge {r['judge_reliability']}")


if __name__ == "__main__":
    main()
