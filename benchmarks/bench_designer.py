"""DESIGNER on the built-in bank with ``smollm2-135m``: yields of every stage, and the diversity of the
questions it writes against the input bank's and against the "w/o design logic" (exemplar) ablation's.

Runs ``posttrain data designer``'s body on the same built-in bank and source texts in ``--mode logic``
(the paper's design-logic retrieval) and ``--mode exemplar`` (seed questions retrieved instead), each
under two arms: ``structured`` (the JSON steps, annotation and generation, decode under their schema: the
default) and ``free_text`` (``--no_structured_output``: free text after a prefilled first key). Diversity
(``data_pipelines.common.diversity``, packaged MiniLM embeddings): mean pairwise cosine and L2 distance,
mean 1-NN cosine distance, k-means inertia per point and radius, of the bank's questions and of each
run's output questions. Sets of different sizes: the pairwise means and radius do not depend on n by
construction, the 1-NN distance and inertia do (fewer points are farther apart), so read those with the
sizes in mind. Every reject is counted in the stage entries.

    PYTHONPATH=. python benchmarks/bench_designer.py --designer_args "--model vllm:smollm2-135m"
"""

from __future__ import annotations

import json
import platform
import shlex
import sys
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text

ARMS = {"structured": [], "free_text": ["--no_structured_output"]}


def run_mode(mode: str, arm: str, work: Path, extra: list[str]) -> dict:
    from data_pipelines.common.embed import load_embedder
    from data_pipelines.designer.options import DesignerConfig, add_designer_args
    from data_pipelines.designer.run import run_pipeline

    parser = CommandParser()
    add_designer_args(parser)
    config = DesignerConfig.from_args(parser.parse_args(["--mode", mode, "--output", str(work / f"{mode}-{arm}"),
                                                         "--no_progress", *ARMS[arm], *extra]))
    started = time.perf_counter()
    report = run_pipeline(config, config.model, load_embedder(config.embedder))
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    return report


def main() -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/designer.json", help="JSON results file")
    parser.add_argument("--work", default="designer_bench", help="folder for the four runs' stage outputs")
    parser.add_argument("--designer_args", default="", help="extra flags for both runs, space-separated")
    args = parser.parse_args()
    work = Path(args.work)
    extra = args.designer_args.split()
    results = {"command": "PYTHONPATH=. python benchmarks/bench_designer.py " + shlex.join(sys.argv[1:]),
               "designer_args": extra, "machine": platform.processor() or platform.machine(),
               "runs": {arm: {mode: run_mode(mode, arm, work, extra) for mode in ("logic", "exemplar")}
                        for arm in ARMS}}
    logic, exemplar = results["runs"]["structured"]["logic"], results["runs"]["structured"]["exemplar"]
    results["diversity"] = {"bank": logic["diversity"]["bank"], "designer_logic": logic["diversity"]["output"],
                            "exemplar_ablation": exemplar["diversity"]["output"],
                            **{f"free_text_{mode}": results["runs"]["free_text"][mode]["diversity"]["output"]
                               for mode in ("logic", "exemplar")}}
    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    keys = ("n", "mean_pairwise_cosine_distance", "mean_pairwise_l2", "mean_1nn_cosine_distance",
            "kmeans_inertia_per_point", "radius")
    print("set                 " + "  ".join(f"{k[:14]:>14}" for k in keys))
    for name, row in results["diversity"].items():
        cells = "  ".join(f"{row[k]:>14.4f}" if row and k != "n" else f"{(row or {}).get(k, 'n/a')!s:>14}"
                          for k in keys)
        print(f"{name:<20}{cells}")
    for arm, runs in results["runs"].items():
        for mode, report in runs.items():
            yields = {name: f"{s['out']}/{s.get('in', s.get('sources'))}" for name, s in report["stages"].items()}
            print(f"[{mode}, {arm}] {yields}; {report['records']} records in {report['wall_seconds']}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
