"""GRPO, DuPO and Prefix-RL learning on a real pretrained model: SmolLM2-135M-Instruct (``--model
smollm2-135m``) on the built-in ``arithmetic`` task, held-out greedy accuracy over training, per arm and seed.

    python benchmarks/bench_smollm2_learning.py --arms grpo-vllm grpo-hf --seeds 0

``--task multistep-word`` runs the arms of ``smollm2_word_arms.py`` instead (issue 44: that file says what they
share and how they differ); everything below about recording, resuming and equal compute holds for both tasks,
the rest of this docstring is about ``arithmetic``. ``--print_commands`` prints the ``posttrain/train.py``
command of every (arm, seed) and runs nothing; ``--train_flags`` appends flags to every run (e.g. a smoke's
``--eval_examples 16``; recorded in the JSON).

Every run is ``posttrain/train.py --model smollm2-135m --task arithmetic`` as a user would start it
(single-threaded, one process, offline); the arms differ only in the flags named in ``ARMS``:

- ``grpo-vllm``: rollouts and evaluation by the colocated vLLM engine (``--rollout vllm``);
- ``grpo-hf``: the same run with our Hugging Face engine (``--rollout hf``);
- ``grpo-vllm-lora``: ``grpo-vllm`` training a rank-8 LoRA adapter instead of every weight, at full
  fine-tuning's lr (2e-5);
- ``grpo-vllm-lora-lr2e-4``: the same adapter at ten times the lr, the usual LoRA setting (an adapter's
  low-rank update moves the weights far less per step than a full update at the same lr);
- ``dupo-vllm``: ``grpo-vllm`` with DuPO's label-free math-dual reward (``--algo dupo``) in place of the
  verifier's: each group's distinct answers are put into the problem's dual questions (``Vab+7= Given that the
  answer is 30, what is Vab?``, one per operand) and the live policy answers them greedily (``--dual_solver
  policy``, the paper's solver; the snapshot solver needs ``--rollout hf``). Same prompts, G, lengths and
  steps, so the same 16 policy samples per step as GRPO; the dual answers are extra generations on top (at
  most 2 questions x the group's distinct answers per problem, 16 tokens each, greedy), which the
  ``perf/step_seconds`` of the arm includes;
- ``prefix-rl``: Prefix-RL (``--algo prefix-rl``, the paper's self-prefix form): a trainable SmolLM2 copy, the
  adapter, writes the first k = ``PREFIX_TOKENS`` tokens of each answer and the frozen SmolLM2-135M-Instruct
  target (``--target_model`` unset: the ``--model`` checkpoint itself, its own Hugging Face engine, never
  synced) continues from the same token ids; the verifier scores the whole answer, and GRPO's group advantages
  and a KL (beta 0.001, the paper's) to the initial adapter train the k prefix tokens only. The answer's budget is
  GRPO's: ``--max_new_tokens 24`` is prefix and continuation together (8 + at most 16), sampled at the same
  temperature, and the held-out evaluation answers the same way (adapter prefix, then target), greedily.

Why k = 8 (``PREFIX_TOKENS``): the base model opens 112 of its 128 held-out greedy answers with ``The number``
(``results/smollm2_final_answers_fixed_verifier.json``); the 30 that go on as an equation (``The number 9 + 3
=`` or ``equals``, all of them additions) are right 14 times, the other 98 answers once. Whether it answers or
rambles is decided within the first few tokens: SmolLM2's tokenizer writes each digit as its own token, so
``The number 9 + 3 =`` is 8 tokens (``The``, `` number``, `` ``, ``9``, `` +``, `` ``, ``3``, `` =``) and is
followed by the answer (``The number 9 + 3 = 12.``, right), while the rambles part from it at the 5th or 6th
token (``The number 16 and 6 are both integers``, ``The number 15 is a classic example``). Eight tokens cover
that choice for every operand width and, in that form, stop before the result, which the frozen target then
writes; a shorter k leaves the choice to the target, a longer one lets the adapter write the result itself,
which turns the method into GRPO on the whole answer. The adapter can still state a result within 8 tokens in
other forms (``The answer is 4.`` is 6 tokens): nothing forbids it, as in the paper. The room this leaves
(``smollm2_prefix_ceiling.py``, ``results/smollm2_prefix_ceiling.json``): given the first 8 tokens of ``The
number a + b =`` (``a - b``) for each problem, the frozen model answers 36 of the 128 held-out problems greedily
within the 24 tokens (0.281: additions 0.460, subtractions 0.108), against 15 alone (0.117): about what an
adapter that learns that one opening can reach (one that picks its opening per problem is not bounded by it).
The same with k = 4 (``The number 16``) is 17 (0.133, ``_k4.json``): the choice comes after the 4th token; with
k = 10, the whole opening for every operand width, 39 (0.305, ``_k10.json``). k = 8 keeps most of that with
two fewer sampled tokens (operand digits the adapter would have to copy at temperature 0.7).

Equal compute: every arm has the same prompts (same seed, same sampler), prompts per step, group, steps,
answer budget and evaluation, so the same number of sampled answers per step. Training FLOPs per step differ
and are reported per run (``training_flops_per_step``, the dense-transformer count of
``bench_prefix_rl.training_flops``): 6 N T for the update of a fully trained model (4 N T + 6 N_lora T with
LoRA), plus 2 N T for a KL reference's forward when the run has one, summed over the step's sampled
sequences, where T is the prompt's tokens plus the trained model's own tokens (the mean
``completion/length_mean`` the run logged: the whole answer for GRPO, the k prefix tokens for Prefix-RL).
Generation is not counted: every arm decodes at most 24 tokens per answer (Prefix-RL's target also re-reads
prompt + prefix once), DuPO adds its dual answers.

The task's verifier is math-verify (``posttrain.tasks.verifiers.math_equal``): it extracts the value from
prose ("The number 9 + 3 = 12."), so the instruct model's chatty answers count when they state the right
number within ``--max_new_tokens``; what it cannot do at the start is subtract into negatives and stop
rambling before the answer.

Writes PREFIX.json (the command, the shared flags, per arm and seed: the eval curve, wall seconds, mean
seconds per step, peak RSS and its value after each step, training FLOPs per step; per arm: mean and std over
finished seeds) and PREFIX.png. A run that already finished under ``--runs`` is reused (its wall
time is read from the JSON written before, if any; two invocations running different arms at once each re-read
the JSON before recording a run, so neither drops the other's); an unfinished one resumes from its last checkpoint
(``--save_every 2 --resume auto``: on the shared development machine runs were killed by the kernel's OOM
killer when other jobs filled the memory), so rerunning the same command resumes where it stopped; a resumed
run records ``resumed: true`` and no ``wall_seconds`` (only ``wall_seconds_last_invocation``): its s/step is
what compares.
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import smollm2_word_arms
from benchmarks.bench_prefix_rl import parameter_counts
from benchmarks.matmul_peak import cpu_name
from benchmarks.seed_curves import (
    TRAINING_ENV,
    finished,
    metric_curves,
    plot_seed_curves,
    run_training,
    training_command,
)
from posttrain.common.cli_help import CommandParser
from posttrain.models.autocast import autocast_dtype
from posttrain.models.loading import load_tokenizer
from posttrain.models.pretrained import resolve_model_name
from posttrain.tasks import TASKS
from posttrain.tasks.prompts import encode_prompts

COMMON = ["--model", "smollm2-135m", "--task", "arithmetic", "--prompts_per_step", "4",
          "--group_size", "4", "--micro_batch_size", "8", "--max_new_tokens", "24", "--temperature", "0.7",
          "--lr", "2e-5", "--eval_every", "4", "--eval_examples", "128", "--pass_k", "1", "--save_every", "2",
          "--keep_last", "1", "--resume", "auto", "--progress", "false", "--num_threads", "1"]
PREFIX_TOKENS = 8
"""Prefix-RL's k on this task: the opening ``The number a + b =`` (see the module docstring)."""
ARMS: dict[str, list[str]] = {
    "grpo-vllm": ["--algo", "grpo", "--rollout", "vllm"],
    "grpo-hf": ["--algo", "grpo", "--rollout", "hf"],
    "grpo-vllm-lora": ["--algo", "grpo", "--rollout", "vllm", "--lora_r", "8"],
    "grpo-vllm-lora-lr2e-4": ["--algo", "grpo", "--rollout", "vllm", "--lora_r", "8", "--lr", "2e-4"],
    "dupo-vllm": ["--algo", "dupo", "--rollout", "vllm", "--dual_solver", "policy"],
    "prefix-rl": ["--algo", "prefix-rl", "--rollout", "hf", "--target_rollout", "hf", "--prefix_tokens",
                  str(PREFIX_TOKENS)],
}



@dataclass(frozen=True)
class TaskSetup:
    """One task's benchmark: the flags every arm shares, the arms' own flags, the default steps and where its
    runs and results go."""

    common: list[str]
    arms: dict[str, list[str]]
    steps: int
    runs: Path
    out: Path
    title: str


TASK_SETUPS = {
    "arithmetic": TaskSetup(COMMON, ARMS, 12, REPO / "outputs" / "bench_smollm2_learning",
                            REPO / "benchmarks" / "results" / "smollm2_learning",
                            "SmolLM2-135M-Instruct on arithmetic (held-out greedy)"),
    "multistep-word": TaskSetup(smollm2_word_arms.COMMON, smollm2_word_arms.ARMS, smollm2_word_arms.STEPS,
                                REPO / "outputs" / "bench_smollm2_word", REPO / "benchmarks" / "results" / "smollm2_word",
                                "SmolLM2-135M-Instruct on multistep-word (held-out greedy)"),
}


def flag_value(flags: list[str], name: str, default: str) -> str:
    """The value of ``--name`` in ``flags`` (the last one wins, as in ``posttrain/train.py``), else ``default``."""
    values = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == f"--{name}"]
    return values[-1] if values else default


def precision_record(flags: list[str]) -> dict[str, str]:
    """What precision the runs' flags resolve to on this CPU: ``--precision``, ``--autocast`` and the autocast
    dtype ``posttrain.models.autocast`` picks for them here (``none`` without autocast), and the CPU's name."""
    precision, autocast = flag_value(flags, "precision", "fp32"), flag_value(flags, "autocast", "off")
    dtype = autocast_dtype(autocast, precision, "cpu")
    return {"cpu": cpu_name(), "precision": precision, "autocast": autocast,
            "autocast_dtype": str(dtype).removeprefix("torch.") if dtype is not None else "none"}


def shell_line(command: list[str]) -> str:
    """``command`` as one bash line: ``shlex.quote`` per word, bash's ``$'...'`` for a word holding a newline
    (GPO's ``--privileged_template``), so every printed command is one pasteable line."""
    def word(arg: str) -> str:
        if "\n" not in arg:
            return shlex.quote(arg)
        return "$'" + arg.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"

    return " ".join(word(arg) for arg in command)


def run_summary(output_dir: Path) -> dict[str, float | None]:
    """Mean ``perf/step_seconds`` (a training step: rollouts, reward, update, weight sync; evaluations not
    included) and the largest ``perf/peak_memory_mb`` (peak RSS on CPU) the run logged; None for a run that
    has not finished a step yet."""
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [row["perf/step_seconds"] for row in rows if "perf/step_seconds" in row]
    peaks = [row["perf/peak_memory_mb"] for row in rows if "perf/peak_memory_mb" in row]
    if not (steps or peaks) and len(rows) > 1:
        raise ValueError(f"{output_dir}/metrics.jsonl logs no perf/step_seconds or perf/peak_memory_mb")
    return {"seconds_per_step_mean": statistics.mean(steps) if steps else None,
            "peak_memory_mb": max(peaks) if peaks else None, "steps_done": len(steps),
            "peak_memory_mb_by_step": [(row["step"], row["perf/peak_memory_mb"]) for row in rows
                                       if "perf/peak_memory_mb" in row]}


@functools.cache
def update_flops_per_token(model: str, lora_r: int, kl_coef: float) -> float:
    """Training FLOPs per token of the loss pass (``bench_prefix_rl.training_flops``' count): 6 N for a fully
    trained model, 4 N + 6 N_lora with LoRA, plus 2 N for the KL reference's forward when ``kl_coef`` > 0."""
    total, trained = parameter_counts(resolve_model_name(model), lora_r)
    update = 6.0 * trained if trained == total else 4.0 * total + 6.0 * trained
    return update + (2.0 * total if kl_coef > 0 else 0.0)


@functools.cache
def mean_prompt_tokens(model: str, task: str, system_prompt: str | None, max_prompt_tokens: int) -> float:
    """Mean prompt length in tokens over the task's train split, encoded as the trainer encodes it."""
    prompts = encode_prompts(load_tokenizer(resolve_model_name(model)), TASKS.get(task)().split("train"),
                             system_prompt, max_prompt_tokens)
    return statistics.mean(len(ids) for ids in prompts)


def training_flops_per_step(output_dir: Path) -> float | None:
    """The run's training FLOPs per step (module docstring, "Equal compute"): ``update_flops_per_token`` x (mean
    prompt tokens + the mean ``completion/length_mean`` it logged: the trained model's own tokens) x the step's
    sequences, from its saved ``config.yaml``; None before its first step."""
    config = yaml.safe_load((output_dir / "config.yaml").read_text())
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    lengths = [row["completion/length_mean"] for row in rows if "completion/length_mean" in row]
    if not lengths:
        return None
    prompt = mean_prompt_tokens(config["model"], config["task"], config["system_prompt"],
                                config["max_prompt_tokens"])
    per_token = update_flops_per_token(config["model"], config["lora_r"], config["kl_coef"])
    return per_token * (prompt + statistics.mean(lengths)) * config["prompts_per_step"] * config["group_size"]


def mean_std(values: list[float]) -> dict[str, float | int | None]:
    """Mean, sample standard deviation (None for one value) and count."""
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values)}


def arm_summaries(runs: dict[str, dict]) -> dict[str, dict]:
    """Per arm, over its finished seeds: held-out accuracy at each evaluated step, mean s/step, peak RSS, wall
    seconds and training FLOPs per step, each as ``mean_std`` (the write-up's table)."""
    by_arm: dict[str, list[dict]] = {}
    for key, run in runs.items():
        if run["finished"]:
            by_arm.setdefault(key.split("/")[0], []).append(run)
    summaries = {}
    for arm, arm_runs in by_arm.items():
        steps = sorted({step for run in arm_runs for step, _ in run["curve"]})
        accuracy = {str(step): mean_std([value for run in arm_runs for s, value in run["curve"] if s == step])
                    for step in steps}
        measured = {name: [run[name] for run in arm_runs if run.get(name) is not None]
                    for name in ("seconds_per_step_mean", "peak_memory_mb", "wall_seconds",
                                 "training_flops_per_step")}
        summaries[arm] = {"seeds": len(arm_runs), "accuracy_by_step": accuracy,
                          **{name: mean_std(values) if values else None for name, values in measured.items()}}
    return summaries


def lora_against_full(summaries: dict[str, dict], lora: str = "grpo-vllm-lora", full: str = "grpo-vllm"
                      ) -> dict[str, float] | None:
    """The LoRA arm's mean s/step and mean peak RSS as fractions of the full fine-tuning arm's (same engine,
    same samples); None until both arms have finished seeds that logged them."""
    if lora not in summaries or full not in summaries:
        return None
    ratios = {}
    for name in ("seconds_per_step_mean", "peak_memory_mb"):
        measured = summaries[lora][name], summaries[full][name]
        if None in measured:
            return None
        ratios[f"{name}_lora_over_full"] = measured[0]["mean"] / measured[1]["mean"]
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="arithmetic", choices=list(TASK_SETUPS))
    parser.add_argument("--arms", nargs="+", default=None,
                        help="arms of --task (default: all of them; arithmetic: grpo-vllm grpo-hf)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=None, help="default: the task's (arithmetic 12, multistep-word 100)")
    parser.add_argument("--train_flags", default="",
                        help="flags appended to every run's command (one shell-quoted string), e.g. a smoke's "
                             "'--eval_examples 16 --eval_every 2'")
    parser.add_argument("--print_commands", "--dry_run", action="store_true",
                        help="print the posttrain/train.py command of every (arm, seed) and run nothing")
    parser.add_argument("--runs", type=Path, default=None,
                        help="run directories (ARM/seedS); default outputs/bench_smollm2_learning (arithmetic), "
                             "outputs/bench_smollm2_word (multistep-word)")
    parser.add_argument("--collect_only", action="store_true",
                        help="start no run: record what the run directories hold so far (an unfinished run's curve "
                             "is marked finished: false), e.g. at a session's end; rerun without it to resume")
    parser.add_argument("--out", type=Path, default=None,
                        help="output prefix: writes PREFIX.json and PREFIX.png; default benchmarks/results/"
                             "smollm2_learning (arithmetic), benchmarks/results/smollm2_word (multistep-word)")
    args = parser.parse_args(argv)
    setup = TASK_SETUPS[args.task]
    arms = args.arms or (["grpo-vllm", "grpo-hf"] if args.task == "arithmetic" else list(setup.arms))
    unknown = [arm for arm in arms if arm not in setup.arms]
    if unknown:
        parser.error(f"--arms {unknown} are not arms of --task {args.task}: choose from {list(setup.arms)}")
    steps = args.steps if args.steps is not None else setup.steps
    runs, out = args.runs or setup.runs, args.out or setup.out
    common = setup.common + ["--steps", str(steps)] + shlex.split(args.train_flags)
    if args.print_commands:
        env = " ".join(f"{name}={value}" for name, value in TRAINING_ENV.items())
        for arm in arms:
            for seed in args.seeds:
                print(env, shell_line(training_command([*common, *setup.arms[arm]], seed, runs / arm / f"seed{seed}")))
        return 0

    out_json = out.with_suffix(".json")
    report = json.loads(out_json.read_text()) if out_json.exists() else {"runs": {}}
    invocation = " ".join([sys.executable, *sys.argv])
    report.update({"collect_command" if args.collect_only else "command": invocation, "task": args.task,
                   "common_flags": common, **precision_record(common)})
    for arm in arms:
        for seed in args.seeds:
            output_dir = runs / arm / f"seed{seed}"
            key = f"{arm}/seed{seed}"
            wall = None
            if args.collect_only and not (output_dir / "metrics.jsonl").exists():
                continue
            done = finished(output_dir, steps)
            resumed = None
            if not args.collect_only and not done:
                resumed = (output_dir / "metrics.jsonl").exists()
                start = time.perf_counter()
                run_training([*common, *setup.arms[arm]], seed, output_dir, final_step=steps)
                wall = time.perf_counter() - start
            if out_json.exists():  # another invocation (another arm, run at the same time) may have written since
                report["runs"] = json.loads(out_json.read_text())["runs"]
            previous = report["runs"].get(key, {})
            timing = ({"wall_seconds": None if resumed else wall, "resumed": resumed,
                       "wall_seconds_last_invocation": wall} if wall is not None else
                      {name: previous.get(name) for name in ("wall_seconds", "resumed", "wall_seconds_last_invocation")})
            report["runs"][key] = {
                "flags": setup.arms[arm], "finished": finished(output_dir, steps), **timing,
                "curve": metric_curves(output_dir, ["eval/accuracy"])["eval/accuracy"], **run_summary(output_dir),
                "training_flops_per_step": training_flops_per_step(output_dir),
            }
            out.parent.mkdir(parents=True, exist_ok=True)
            out_json.write_text(json.dumps(report, indent=2))
    report["summary"] = arm_summaries(report["runs"])
    report["lora_against_full"] = lora_against_full(report["summary"])
    out_json.write_text(json.dumps(report, indent=2))
    curves: dict[str, list] = {}
    for key, run in report["runs"].items():
        if run["finished"]:  # an unfinished run's shorter curve would cut its arm's mean curve short
            curves.setdefault(key.split("/")[0], []).append(run["curve"])
    if curves:
        plot_seed_curves(curves, out.with_suffix(".png"), setup.title, sd_band=args.task != "arithmetic")
    print(json.dumps({key: (run["curve"][0][1], run["curve"][-1][1]) for key, run in report["runs"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
