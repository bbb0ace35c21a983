"""DESIGNER -> GRPO: synthesize questions with reference answers, then train a policy on them with RL.

    python examples/workflows/designer_grpo.py [--out DIR] [--reward verifier|judge]

1. ``posttrain data designer`` writes ``OUT/data/designer.jsonl`` (question + reference answer per record; the
   embedded default runs every LLM stage through smollm2-135m on the built-in bank and sources).
2. ``posttrain train --algo grpo --task dataset --prompt_column question --answer_column reference_answer``
   trains smollm2-135m on those questions (the run's held-out split is 10% of them), rewarded by
   - ``--reward verifier`` (default): the dataset task's own check, 1 when ``math_equal`` accepts the
     completion against the reference answer;
   - ``--reward judge``: an mR3 rubric judge served by ``posttrain serve --model JUDGE`` (default smollm2-135m),
     through ``--reward rewards.remote:reward`` in binary mode, shown the reference answer.
3. ``OUT/summary.json``: how many questions came out, the reward and accuracy curves, held-out accuracy at
   the first and last evaluation.

``--algo dupo`` trains on the same file the same way (pass it in ``--train_args``). Flags after
``--designer_args`` / ``--train_args`` (one quoted string each) go to that command and override the defaults
below; the tests run this in miniature that way.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from workflow_steps import Workflow, curve, training_metrics

from posttrain.common.cli_help import CommandParser

TRAIN_DEFAULTS = ["--model", "smollm2-135m", "--steps", "8", "--prompts_per_step", "4", "--group_size", "4",
                  "--micro_batch_size", "16", "--max_new_tokens", "64", "--max_prompt_tokens", "512", "--lr", "1e-6",
                  "--eval_every", "8", "--eval_examples", "0", "--save_every", "0"]


def main(argv: list[str] | None = None) -> int:
    p = CommandParser(description=__doc__)
    p.add_argument("--out", type=Path, default=Path("outputs/workflow-designer-grpo"))
    p.add_argument("--reward", choices=["verifier", "judge"], default="verifier")
    p.add_argument("--judge", default="smollm2-135m", help="--reward judge: the served judge's --model")
    p.add_argument("--designer_args", default="", help="more `posttrain data designer` flags, one string")
    p.add_argument("--train_args", default="", help="more `posttrain train` flags, one string (override the defaults)")
    args = p.parse_args(argv)
    flow = Workflow("designer-grpo", args.out)
    data = args.out / "data"
    flow.run("designer", ["posttrain", "data", "designer", "--output", str(data), "--no_progress",
                          *shlex.split(args.designer_args)])
    rows = [json.loads(line) for line in (data / "designer.jsonl").read_text().splitlines() if line.strip()]
    if len(rows) < 2:
        raise SystemExit(f"DESIGNER wrote {len(rows)} question(s) to {data / 'designer.jsonl'}; training needs at least 2 "
                         f"(see {data / 'report.json'} for the rejects)")
    train_dir = args.out / "train"
    train = ["posttrain", "train", "--algo", "grpo", "--task", "dataset", "--dataset", str(data / "designer.jsonl"),
             "--prompt_column", "question", "--answer_column", "reference_answer", *TRAIN_DEFAULTS,
             "--output_dir", str(train_dir), "--report_to", "jsonl", "--progress", "false",
             *shlex.split(args.train_args)]
    if args.reward == "judge":
        with flow.served("judge", ["--model", args.judge, "--threads", "1", "--log_level", "warning"]) as url:
            env = {"POSTTRAIN_REWARD_URL": url, "POSTTRAIN_REWARD_MODE": "binary", "POSTTRAIN_REWARD_REFERENCE": "1",
                   "POSTTRAIN_REWARD_TIMEOUT": "300"}
            flow.run("train", [*train, "--reward", "rewards.remote:reward"], env=env)
    else:
        flow.run("train", train)
    metrics = training_metrics(train_dir)
    evals = [r["eval/accuracy"] for r in metrics if "eval/accuracy" in r]
    flow.write_summary({
        "reward": args.reward if args.reward == "verifier" else f"judge ({args.judge}, binary, reference shown)",
        "questions": len(rows),
        "eval_accuracy_first": evals[0] if evals else None, "eval_accuracy_last": evals[-1] if evals else None,
        "curve": curve(metrics, "reward/", "train/accuracy", "eval/"),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
