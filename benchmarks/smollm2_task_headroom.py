"""How much room ``multistep-word`` leaves RL on SmolLM2-135M-Instruct (issue 44, section 1): the base model's
held-out greedy accuracy, its unbiased pass@k over ``--samples`` sampled answers (``--temperature``), and its
greedy accuracy when the prompt also holds the worked solution (what GPO's guider sees, ``SOLUTION_TEMPLATE``).

    OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/smollm2_task_headroom.py --problems 256 \\
        --out benchmarks/results/smollm2_task_headroom.json

Prompts are the first ``--problems`` of the task's test split at its default difficulty unless the knobs say
otherwise (``--min_operations`` ...), through the chat template, no system prompt (``encode_prompts``); the
verifier is the task's (the last ``Answer:`` line, an integer literal). Generation is by the project's vLLM
engine (``--engine vllm``; ``hf`` also works), in bfloat16 where the CPU has AVX512-BF16, else float32. pass@k is
``posttrain.algos.core.pass_at_k`` for every k in ``--pass_k`` up to ``--samples``. The results file records
the command, the CPU model, the dtype, the task's knobs and one row per problem; it is rewritten after every
``--chunk`` problems, so ``problems`` (done) may be fewer than ``problems_asked`` when a run is stopped. No
timing is reported.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.matmul_peak import cpu_name
from posttrain.algos.core import pass_at_k
from posttrain.algos.gpo.hint import privileged_examples
from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.engines.build import build_engine
from posttrain.engines.spec import parse_engine_spec
from posttrain.tasks.base import Example
from posttrain.tasks.multistep_word import SOLUTION_TEMPLATE, MultistepWordTask
from posttrain.tasks.prompts import encode_prompts

MAX_PROMPT_TOKENS = 512
KNOBS = ("min_operations", "max_operations", "max_number", "max_factor", "max_value")
"""The task's difficulty knobs (``MultistepWordTask``'s constructor arguments)."""


def bf16_capable() -> bool:
    """Whether the CPU has AVX512-BF16 (bfloat16 matmuls at full speed)."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.is_file() and "avx512_bf16" in cpuinfo.read_text()


def correct_counts(engine: GenerationEngine, task: MultistepWordTask, examples: list[Example],
                   params: SamplingParams, samples: int) -> tuple[list[int], list[str]]:
    """How many of ``samples`` answers per example are right, and each example's first answer."""
    prompt_ids = encode_prompts(engine.tokenizer, examples, None, MAX_PROMPT_TOKENS)
    texts = engine.generate([ids for ids in prompt_ids for _ in range(samples)], params).texts
    counts, firsts = [], []
    for i, example in enumerate(examples):
        answers = texts[i * samples:(i + 1) * samples]
        counts.append(sum(task.is_correct(text, example) for text in answers))
        firsts.append(answers[0])
    return counts, firsts


def summary(rows: list[dict[str, Any]], samples: int, pass_k: list[int]) -> dict[str, Any]:
    """The measured rates over the problems done so far (``rows``), and whether every asked problem is done."""
    n = len(rows)
    return {"problems": n, "greedy_accuracy": sum(r["greedy_right"] for r in rows) / n,
            **{f"pass@{k}": sum(pass_at_k(samples, r["sampled_right"], k) for r in rows) / n for k in pass_k},
            "sampled_accuracy": sum(r["sampled_right"] for r in rows) / (n * samples),
            "greedy_accuracy_with_solution": sum(r["with_solution_right"] for r in rows) / n}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=256, help="held-out problems (the first of the test split)")
    parser.add_argument("--samples", type=int, default=16, help="sampled answers per problem for pass@k")
    parser.add_argument("--pass_k", type=int, nargs="+", default=[8, 16], help="the k of pass@k (<= --samples)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature of the pass@k answers")
    parser.add_argument("--max_new_tokens", type=int, default=64, help="answer budget (tokens)")
    parser.add_argument("--model", default="smollm2-135m",
                        help="the model measured: the packaged alias, or a trained run's checkpoint (RUN/checkpoints/"
                             "step_N/hf) to read what RL changed")
    parser.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="the project engine that generates")
    for knob in KNOBS:
        parser.add_argument(f"--{knob}", type=int, default=None, help="task difficulty knob (default: the task's)")
    parser.add_argument("--chunk", type=int, default=16,
                        help="problems generated at a time; the results file is rewritten after each chunk")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args(argv)
    if any(k > args.samples for k in args.pass_k):
        parser.error(f"--pass_k {args.pass_k} must not exceed --samples {args.samples}")

    knobs = {name: getattr(args, name) for name in KNOBS if getattr(args, name) is not None}
    task = MultistepWordTask(**knobs)
    examples = task.split("test")[: args.problems]
    dtype = "bfloat16" if bf16_capable() else "float32"
    engine = build_engine(parse_engine_spec(f"{args.engine}:{args.model}"), device="cpu", dtype=dtype, seed=args.seed,
                          max_batch_size=256)
    greedy = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    sampled = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)
    header: dict[str, Any] = {
        "command": " ".join([sys.executable, *sys.argv]), "cpu": cpu_name(), "dtype": dtype, "engine": args.engine,
        "model": ("smollm2-135m (SmolLM2-135M-Instruct)" if args.model == "smollm2-135m" else args.model),
        "task": task.name,
        "difficulty": {name: getattr(task, name) for name in KNOBS},
        "problems_asked": len(examples), "samples": args.samples, "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens, "privileged_template": SOLUTION_TEMPLATE,
    }
    rows: list[dict[str, Any]] = []
    for start in range(0, len(examples), args.chunk):
        chunk = examples[start:start + args.chunk]
        greedy_right, greedy_texts = correct_counts(engine, task, chunk, greedy, 1)
        guided_right, guided_texts = correct_counts(engine, task, privileged_examples(chunk, SOLUTION_TEMPLATE),
                                                    greedy, 1)
        sampled_right, sampled_texts = correct_counts(engine, task, chunk, sampled, args.samples)
        rows += [{"prompt": ex.prompt, "answer": ex.answer, "operations": ex.columns["operations"],
                  "greedy_right": bool(g), "sampled_right": s, "with_solution_right": bool(w),
                  "greedy_text": gt, "first_sample_text": st, "with_solution_text": wt}
                 for ex, g, s, w, gt, st, wt in zip(chunk, greedy_right, sampled_right, guided_right,
                                                    greedy_texts, sampled_texts, guided_texts, strict=True)]
        report = {**header, **summary(rows, args.samples, args.pass_k), "rows": rows}
        atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
        print(json.dumps({key: value for key, value in report.items() if key != "rows"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
