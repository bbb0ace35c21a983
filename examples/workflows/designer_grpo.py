"""DESIGNER -> GRPO: synthesize questions with reference answers, then train a policy on them with RL.

    python examples/workflows/designer_grpo.py [--out DIR] [--reward verifier|judge] [--judge MODEL]

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

``--algo dupo`` trains on the same file the same way (pass it in ``--train_args``). ``--designer_args``,
``--serve_args`` (the judge's server) and ``--train_args`` (one quoted string each) go to that command and
override the defaults below; the tests run this in miniature that way (DESIGNER's LLM stages served by a
scripted OpenAI-compatible stand-in, the judge by ``--backend fake``, GRPO on a tiny model for two steps).
"""

from __future__ import annotations

import json

from workflow_steps import Workflow, curve, first_and_last, remote_reward_env, workflow_parser

TRAIN_DEFAULTS = ["--model", "smollm2-135m", "--steps", "8", "--prompts_per_step", "4", "--group_size", "4",
                  "--micro_batch_size", "16", "--max_new_tokens", "64", "--max_prompt_tokens", "512", "--lr", "1e-6",
                  "--eval_every", "8", "--eval_examples", "0", "--save_every", "0"]


def main(argv: list[str] | None = None) -> int:
    p = workflow_parser(__doc__, "designer-grpo", "designer", "serve", "train")
    p.add_argument("--reward", choices=["verifier", "judge"], default="verifier")
    p.add_argument("--judge", default="smollm2-135m", help="--reward judge: the served judge's --model ('' for none: the "
                   "server's embedded judge, or a --serve_args backend that serves no model, e.g. --backend fake)")
    args = p.parse_args(argv)
    flow = Workflow("designer-grpo", args.out)
    data = args.out / "data"
    flow.run("designer", ["posttrain", "data", "designer", "--output", str(data), "--no_progress", *args.designer_args])
    rows = [json.loads(line) for line in (data / "designer.jsonl").read_text().splitlines() if line.strip()]
    if len(rows) < 2:
        raise SystemExit(f"DESIGNER wrote {len(rows)} question(s) to {data / 'designer.jsonl'}; training needs at least 2 "
                         f"(see {data / 'report.json'} for the rejects)")
    train = ["--algo", "grpo", "--task", "dataset", "--dataset", str(data / "designer.jsonl"),
             "--prompt_column", "question", "--answer_column", "reference_answer", *TRAIN_DEFAULTS]
    if args.reward == "judge":
        serve = [*(["--model", args.judge] if args.judge else []), "--threads", "1", "--log_level", "warning",
                 *args.serve_args]
        with flow.served("judge", serve) as url:
            metrics = flow.train("train", [*train, "--reward", "rewards.remote:reward"], args.out / "train",
                                 args.train_args, env=remote_reward_env(url, reference=True, timeout_s=300))
    else:
        metrics = flow.train("train", train, args.out / "train", args.train_args)
    first, last = first_and_last(metrics, "eval/accuracy")
    report = json.loads((data / "report.json").read_text())
    flow.write_summary({
        "reward": args.reward if args.reward == "verifier" else f"judge ({args.judge or 'the server default'}, binary, reference shown)",
        "questions": len(rows), "designer_stages": report["stages"],
        "eval_accuracy_first": first, "eval_accuracy_last": last,
        "curve": curve(metrics, "reward/", "train/accuracy", "eval/"),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
