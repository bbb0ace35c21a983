"""Sci2Pol corpus -> SFT -> Sci2Pol bench: mine (paper, policy brief) pairs, fine-tune on them, score before and after.

    python examples/workflows/sci2pol_sft.py [--out DIR] [--model MODEL] [--judge JUDGE]

1. ``posttrain data sci2pol corpus --judge JUDGE`` mines citation-linked pairs into ``OUT/corpus/pairs.jsonl``
   ({prompt: instruction + paper, answer: polished brief}); the embedded default mines the built-in documents.
2. ``posttrain data sci2pol bench --model MODEL --judge JUDGE``: the model before fine-tuning, on the built-in
   miniature items of the 18 tasks (tasks 7-15 scored by the judge).
3. ``posttrain train --algo sft --task dataset --dataset OUT/corpus/pairs.jsonl --model MODEL``: fine-tune on
   the pairs (prompt tokens never trained on); the run ends with a Hugging Face export of the weights.
4. The same bench command on the fine-tuned weights, with the same judge: scores are comparable only under
   one judge.
5. ``OUT/summary.json``: the pairs mined, each task's score and the stage / overall scores before and after.

``--model`` and ``--judge`` default to smollm2-135m. ``--corpus_args``, ``--bench_args``, ``--train_args`` (one
quoted string each) go to those commands; the tests run this in miniature that way.
"""

from __future__ import annotations

import json
from pathlib import Path

from workflow_steps import Workflow, curve, final_checkpoint, workflow_parser

TRAIN_DEFAULTS = ["--steps", "12", "--prompts_per_step", "2", "--micro_batch_size", "1", "--lr", "1e-5",
                  "--max_prompt_tokens", "4096", "--max_target_tokens", "1024", "--eval_every", "0", "--save_every", "0"]


def bench_scores(results: Path) -> dict:
    """Per-task scores, stage means and the overall score of a bench ``results.json``."""
    report = json.loads(results.read_text())
    return {"overall": report["overall"], "stages": report["stages"],
            "tasks": {name: task["score"] for name, task in report["tasks"].items()}}


def main(argv: list[str] | None = None) -> int:
    p = workflow_parser(__doc__, "sci2pol-sft", "corpus", "bench", "train")
    p.add_argument("--model", default="smollm2-135m", help="the model fine-tuned and benched")
    p.add_argument("--judge", default="smollm2-135m", help="the corpus miner's and the bench's judge")
    args = p.parse_args(argv)
    flow = Workflow("sci2pol-sft", args.out)
    corpus = args.out / "corpus"
    flow.run("corpus", ["posttrain", "data", "sci2pol", "corpus", "--judge", args.judge, "--output", str(corpus),
                        "--no_progress", *args.corpus_args])
    pairs = [line for line in (corpus / "pairs.jsonl").read_text().splitlines() if line.strip()]
    if len(pairs) < 2:
        raise SystemExit(f"the corpus miner wrote {len(pairs)} pair(s) to {corpus / 'pairs.jsonl'}; SFT needs at least 2 "
                         f"(see {corpus / 'rejects.jsonl'})")

    def bench(step: str, model: str) -> dict:
        out = args.out / step
        flow.run(step, ["posttrain", "data", "sci2pol", "bench", "--model", model, "--judge", args.judge,
                        "--output", str(out), "--no_progress", *args.bench_args])
        return bench_scores(out / "results.json")

    before = bench("bench-before", args.model)
    train_dir = args.out / "train"
    metrics = flow.train("train", ["--algo", "sft", "--task", "dataset", "--dataset", str(corpus / "pairs.jsonl"),
                                   "--model", args.model, *TRAIN_DEFAULTS], train_dir, args.train_args)
    tuned = final_checkpoint(train_dir)
    after = bench("bench-after", str(tuned))
    flow.write_summary({"model": args.model, "judge": args.judge, "pairs": len(pairs), "fine_tuned": str(tuned),
                        "bench_before": before, "bench_after": after,
                        "overall_change": None if None in (before["overall"], after["overall"])
                        else round(after["overall"] - before["overall"], 3),
                        "sft_curve": curve(metrics, "loss", "train/")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
