"""mR3 judge -> GRPO: a served rubric judge is the reward of a GRPO run.

    python examples/workflows/mr3_grpo.py [--out DIR] [--judge MODEL] [--reference]

1. ``posttrain serve`` on a free loopback port, with the embedded tiny mR3 judge (built and warm-started on
   first use; ``--judge MODEL`` serves another, e.g. an mR3 checkpoint on a GPU).
2. ``posttrain train --algo grpo --task arithmetic --reward rewards.remote:reward``: every completion goes to
   the judge (binary mode: "is this answer correct?"; the judge works the problem out itself unless
   ``--reference`` shows it the gold answer) and its verdict is the reward. The trainer's own verifier only
   measures accuracy (``train/accuracy``, ``eval/accuracy``), which the reward never reads.
3. ``OUT/summary.json``: reward and accuracy curves, held-out accuracy at the first and last evaluation, and
   the mean gap between the judge's reward and the verifier's accuracy per step.

The defaults are the trainer's (200 steps, 16 prompts x 8, lr 1e-4, the embedded warm-started policy), as in
``benchmarks/grpo_remote_reward.py``, which runs the same two commands over three seeds (its results are this
workflow's numbers: ``benchmarks/workflows.md``). ``--train_args`` / ``--serve_args`` (one quoted string each)
go to those commands and override the defaults; the tests run this in miniature that way.
"""

from __future__ import annotations

from workflow_steps import Workflow, curve, first_and_last, remote_reward_env, workflow_parser

TRAIN_DEFAULTS = ["--steps", "200", "--prompts_per_step", "16", "--group_size", "8", "--micro_batch_size", "128",
                  "--eval_every", "50", "--eval_examples", "128"]
"""The trainer's defaults, spelled out as ``benchmarks/grpo_remote_reward.py`` passes them (one micro-batch a step)."""


def main(argv: list[str] | None = None) -> int:
    p = workflow_parser(__doc__, "mr3-grpo", "serve", "train")
    p.add_argument("--judge", default=None, help="the served judge's --model (default: the embedded tiny mR3 judge)")
    p.add_argument("--reference", action="store_true", help="show the judge the gold answer")
    args = p.parse_args(argv)
    flow = Workflow("mr3-grpo", args.out)
    serve = [*(["--model", args.judge] if args.judge else []), "--threads", "1", "--log_level", "warning",
             "--max_batch_size", "64", *args.serve_args]
    with flow.served("judge", serve) as url:
        metrics = flow.train("train", ["--algo", "grpo", "--task", "arithmetic", "--reward", "rewards.remote:reward",
                                       *TRAIN_DEFAULTS, "--save_every", "0"], args.out / "train", args.train_args,
                             env=remote_reward_env(url, args.reference, timeout_s=120))
    first, last = first_and_last(metrics, "eval/accuracy")
    gaps = [abs(r["reward/mean"] - r["train/accuracy"]) for r in metrics if "reward/mean" in r and "train/accuracy" in r]
    flow.write_summary({
        "judge": args.judge or "embedded tiny mR3 judge", "reference_shown_to_judge": args.reference,
        "eval_accuracy_first": first, "eval_accuracy_last": last,
        "mean_abs_reward_minus_accuracy": round(sum(gaps) / len(gaps), 4) if gaps else None,
        "curve": curve(metrics, "reward/", "train/accuracy", "eval/"),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
