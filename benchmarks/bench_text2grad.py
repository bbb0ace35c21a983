"""Text2Grad in miniature (Wang et al. 2025, "Text2Grad: Reinforcement Learning from Natural Language
Feedback", arXiv 2505.22338): span-level rewards through PPO vs PPO on the same feedback's scalar verdict vs GRPO
on the task's verifier, plus the paper's "spans without critique" ablation, from the same warm start on
``step-arithmetic``, over seeds.

    python benchmarks/bench_text2grad.py --seeds 0 1 2

Every arm runs ``posttrain/train.py`` as a user would (one process, one thread) on the embedded default
(``causal-step-arithmetic``) with the same budget (``BUDGET``: steps, samples per step, learning rate, sampling
temperature, evaluation); only the reward path differs:

- ``text2grad``: the embedded learned span reward model (recipe ``reward-text2grad``: critique, then good and
  poor steps) as token rewards, with text2grad's defaults (spelled out in ``T2G``): the paper's GAE lambda 0.95
  with its trainer's punctuation mask, the per-step KL controller;
- ``text2grad-oracle``: ``--span_oracle true``: the program's spans (good steps +1, wrong ones -1, a cut-short
  answer -1 on its EOS), so the arm measures the RL side of the method with a perfect critique; this is what a
  plain ``--algo text2grad`` runs on its embedded task;
- ``text2grad-nocritique``: ``--span_recipe reward-text2grad-nocritique``: the same reward model trained on the
  same feedback without its critique (the paper's ablation);
- ``ppo-verdict`` / ``ppo-verdict-oracle``: the learned / the program's feedback reduced to one scalar (+1 when
  no poor span is located and nothing is missing, else -1) on the last token (the paper's "PPO with a scalar
  reward model" baseline; its PPO mask keeps punctuation);
- ``grpo``: ``--algo grpo`` with the task's verifier (correct final answer), the same samples per step as
  ``PPO_SAMPLES`` prompts x ``GRPO_GROUP``;
- ``text2grad-oracle-td0``: ``text2grad-oracle`` with GAE lambda 0: TD(0) with the learned critic, whitened
  (each token's own span reward plus the critic's one-step error; not the paper's form).

The PPO arms share ``PPO`` (64 prompts a step, one completion each, the critic's learning rate 1e-3, beta
adapted every step).

Writes PREFIX.json (command, budget, arms, per-arm and per-seed curves of held-out accuracy and of the
``DIAGNOSTICS``: sequence KL, beta, completion length, truncated and unparsable fractions, sampled accuracy;
summary: start, final mean and sd, best, steps to reach ``--gain`` over the common start, the diagnostics over the
first and last ``WINDOW`` steps) and PREFIX.png (held-out greedy accuracy per step, every seed faint, the mean over
seeds bold), after every finished run, with ``missing`` naming the runs still to come. A run that already
finished under ``--runs`` is reused, so an interrupted benchmark resumes where it stopped; ``--report_only``
writes the report from the finished runs without starting any (runs stopped midway go to ``partial_runs``).
``--reuse FILE`` takes the runs recorded in an earlier report of this script (same ``BUDGET``, same arm flags, or
it refuses) for the (arm, seed) pairs not finished under ``--runs``, so runs whose directories are gone are not
trained again; the report names them under ``reused``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.seed_curves import (
    Curve,
    RecordedRuns,
    Runs,
    finished,
    metric_curves,
    plot_seed_curves,
    recorded_runs,
    run_training,
)
from posttrain.common.cli_help import CommandParser

PPO_SAMPLES = 64
"""Samples per training step of every arm: PPO's prompts (one completion each), GRPO's prompts x group."""
GRPO_GROUP = 4
BUDGET = ["--steps", "150", "--lr", "3e-5", "--temperature", "0.7", "--max_new_tokens", "32",
          "--micro_batch_size", str(PPO_SAMPLES), "--eval_every", "10", "--eval_examples", "256", "--pass_k", "1",
          "--save_every", "0", "--progress", "false", "--num_threads", "1"]
# text2grad's defaults (64 prompts a step, the critic at 1e-3, GAE lambda 0.95 with the punctuation mask, beta
# 0.05 adapted toward 6 with a floor at 0.05) spelled out, so the arms do not move when a default does. The KL
# horizon is one step's samples (beta moves by up to 20% a step), as these runs were made; text2grad's default is
# now a tenth of the run's. It makes no difference where the KL stays below its target, as in every arm but
# text2grad-oracle-kl1: beta sits on its floor either way.
PPO = ["--algo", "text2grad", "--prompts_per_step", str(PPO_SAMPLES), "--critic_lr", "1e-3", "--kl_target", "6",
       "--kl_horizon", str(PPO_SAMPLES), "--kl_floor", "0.05"]
T2G = [*PPO, "--lam", "0.95", "--mask_punctuation", "true"]
LEARNED, ORACLE = ["--span_oracle", "false"], ["--span_oracle", "true"]
# In run order (seed-major): the arms without a reward model to run (minutes each) first, the learned reward
# models' arms (their feedback generation makes a step about 3x slower) last.
ARMS: dict[str, list[str]] = {
    "text2grad-oracle": [*T2G, *ORACLE],  # = a plain `--algo text2grad` at this budget
    "ppo-verdict-oracle": [*PPO, "--lam", "0.95", *ORACLE, "--span_reward", "verdict"],
    "grpo": ["--algo", "grpo", "--task", "step-arithmetic", "--group_size", str(GRPO_GROUP),
             "--prompts_per_step", str(PPO_SAMPLES // GRPO_GROUP)],
    # GAE lambda 0 is TD(0) with the learned critic, whitened: each token's own span reward plus the critic's
    # one-step error (not the paper's form; its code's lambda is 0.95).
    "text2grad-oracle-td0": [*T2G, "--lam", "0", *ORACLE],
    "text2grad": [*T2G, *LEARNED],
    "ppo-verdict": [*PPO, "--lam", "0.95", *LEARNED, "--span_reward", "verdict"],
    "text2grad-nocritique": [*T2G, *LEARNED, "--span_recipe", "reward-text2grad-nocritique"],
    # Two probes of the default's settings, seed 0 only: a KL target of 1 (the per-step controller then runs
    # away), and lr 1e-5.
    "text2grad-oracle-kl1": [*T2G, *ORACLE, "--kl_target", "1"],
    "text2grad-oracle-lr1e-5": [*T2G, *ORACLE, "--lr", "1e-5"],
}
DIAGNOSTICS = {"kl": "ppo/sequence_kl", "kl_coef": "ppo/kl_coef", "length": "completion/length_mean",
               "truncated": "completion/truncated_fraction", "unparsable": "span_rm/unparsable_fraction",
               "train_accuracy": "train/accuracy", "span_reward": "span_rm/token_reward_mean",
               "verdict": "span_rm/verdict_mean"}
"""Per-step training metrics kept per run (``runs[arm][seed]["diagnostics"]``) and averaged per arm over the first
and the last ``WINDOW`` steps (``summary[arm]["diagnostics"]``); GRPO logs no PPO KL nor span metrics, the verdict
arms no span reward. ``span_reward`` (the critic's mean token reward over parsed samples) and ``verdict`` (its mean
verdict, +1 all good, -1 something poor or missing) show whether the critic still tells the policy anything: a
verdict near +1 while the sampled accuracy falls is a critic that calls wrong answers right. Runs recorded before
they were logged (``--reuse``) have no points for them (None in the summary)."""
WINDOW = 10


def steps_to(curve: Curve, level: float) -> int | None:
    """The first evaluated step whose accuracy reaches ``level`` (None if never): the convergence speed."""
    return next((step for step, acc in curve if acc >= level), None)


def window_means(curves: list[Curve], first: bool) -> float | None:
    """The mean over seeds of each run's mean over its first (or last) ``WINDOW`` logged steps; None when no
    run logs the metric."""
    picked = [curve[:WINDOW] if first else curve[-WINDOW:] for curve in curves if curve]
    return statistics.mean(statistics.mean(v for _, v in c) for c in picked) if picked else None


def summarise(runs: Runs, gain: float) -> dict[str, dict]:
    """Per arm: start, final (mean, sd, per seed), best, the steps each seed took to reach the common start
    (the mean over every run's step 0: one warm start) plus ``gain``, and the ``DIAGNOSTICS`` over the first and
    the last ``WINDOW`` steps."""
    accuracy = {arm: {seed: run["eval/accuracy"] for seed, run in per_seed.items()} for arm, per_seed in runs.items()}
    start = statistics.mean(curve[0][1] for per_seed in accuracy.values() for curve in per_seed.values())
    level = start + gain
    summary: dict[str, dict] = {"threshold": {"common_start": start, "gain": gain, "level": level}}
    for arm, per_seed in accuracy.items():
        finals = [curve[-1][1] for curve in per_seed.values()]
        reached = {seed: steps_to(curve, level) for seed, curve in per_seed.items()}
        hits = [s for s in reached.values() if s is not None]
        diagnostics = {name: {f"first_{WINDOW}": window_means([runs[arm][s].get(key, []) for s in per_seed], True),
                              f"last_{WINDOW}": window_means([runs[arm][s].get(key, []) for s in per_seed], False)}
                       for name, key in DIAGNOSTICS.items()}
        summary[arm] = {"seeds": list(per_seed), "start_mean": statistics.mean(c[0][1] for c in per_seed.values()),
                        "final_mean": statistics.mean(finals),
                        "final_std": statistics.stdev(finals) if len(finals) > 1 else 0.0,
                        "best_mean": statistics.mean(max(a for _, a in curve) for curve in per_seed.values()),
                        "mean_over_evals": statistics.mean(a for curve in per_seed.values() for _, a in curve[1:]),
                        "per_seed_final": dict(zip(per_seed, finals)), "steps_to_threshold": reached,
                        "seeds_reaching_threshold": len(hits),
                        "steps_to_threshold_mean": statistics.mean(hits) if hits else None,
                        "diagnostics": diagnostics}
    return summary


def write_report(args: argparse.Namespace, runs: Runs, partial: Runs, recorded: RecordedRuns) -> dict[str, dict]:
    """PREFIX.json (and PREFIX.png) from the runs finished so far; ``missing`` lists the (arm, seed) runs still
    to come, so a partial file says what it lacks, ``partial_runs`` holds the curves of runs that were started
    but stopped before their end (``--report_only``; they are in ``missing`` too and in no summary), and
    ``reused`` names the runs taken from ``--reuse``'s file and the command that made them."""
    from posttrain.common.files import atomic_write_text

    summary = summarise(runs, args.gain)
    missing = [f"{arm} seed {seed}" for seed in args.seeds for arm in args.arms if seed not in runs.get(arm, {})]
    report = {"command": " ".join([sys.executable, *sys.argv]), "report_only": args.report_only, "budget": BUDGET,
              "arms": ARMS,
              "diagnostics": DIAGNOSTICS, "missing": missing,
              "reused": recorded.report(),
              "summary": summary, "runs": runs, "partial_runs": partial}
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
    plot_seed_curves({arm: [run["eval/accuracy"] for run in per_seed.values()] for arm, per_seed in runs.items()},
                     args.out.with_suffix(".png"), "Text2Grad vs scalar-verdict PPO vs GRPO on step-arithmetic",
                     figsize=(10, 5), alpha=0.2, mean_width=2.2,
                     legend={"fontsize": 8, "loc": "center left", "bbox_to_anchor": (1.0, 0.5)})
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds per arm")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="arms to run")
    parser.add_argument("--gain", type=float, default=0.05, help="steps-to-threshold level: common start + GAIN")
    parser.add_argument("--runs", type=Path, default=REPO / "outputs" / "bench_text2grad", help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "text2grad",
                        help="output prefix: writes PREFIX.json and PREFIX.png")
    parser.add_argument("--report_only", action="store_true",
                        help="start no run: write the report from the runs already finished under --runs (the "
                             "others listed as missing)")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier report of this script (PREFIX.json): its recorded runs stand for the (arm, "
                             "seed) pairs not finished under --runs instead of training them again")
    parser.add_argument("extra", nargs="*", help="trainer flags for every arm after --, e.g. -- --steps 40")
    args = parser.parse_args(argv)

    runs: Runs = {}
    partial: Runs = {}
    recorded = recorded_runs(args.reuse, {"budget": BUDGET}, ARMS) if args.reuse else RecordedRuns()
    for seed in args.seeds:  # seed-major: an interrupted benchmark has every arm on its first seeds
        for arm in args.arms:
            out = args.runs / arm / f"seed{seed}"
            reused = recorded.take(arm, seed, out)
            if reused is not None:
                runs.setdefault(arm, {})[seed] = reused
                continue
            if args.report_only and not finished(out):
                if (out / "metrics.jsonl").exists():  # started, not finished: kept apart, never summarised
                    partial.setdefault(arm, {})[seed] = metric_curves(out, ["eval/accuracy", *DIAGNOSTICS.values()])
                continue
            run_training([*BUDGET, *ARMS[arm]], seed, out, args.extra)  # an arm's flags win over the budget's
            runs.setdefault(arm, {})[seed] = metric_curves(out, ["eval/accuracy", *DIAGNOSTICS.values()])
            # after every run: a stopped benchmark leaves what it finished
            write_report(args, runs, partial, recorded)
    print(json.dumps(write_report(args, runs, partial, recorded), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
