"""How far steering SmolLM2-135M-Instruct's opening can take it on ``arithmetic``: the frozen model's greedy
held-out accuracy after the first k tokens of the opening ``The number a + b =`` (``a - b`` for subtractions)
written for each problem, against the model alone; the room ``bench_smollm2_learning.py``'s ``prefix-rl`` arm
(k = ``PREFIX_TOKENS``, 24-token answers) has, if its adapter learned that one opening.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/smollm2_prefix_ceiling.py \\
        --out benchmarks/results/smollm2_prefix_ceiling.json

The prompts are the training run's held-out problems (the first ``--problems`` of the test split, chat
template, no system prompt, ``encode_prompts``); the answer budget is the whole answer's, prefix included
(``prefixed_correct`` of ``posttrain prefix-cluster``, one problem's own opening at a time); the verifier is the
task's (``math_equal``). Accuracy is reported overall and for additions and subtractions apart. No timing is
reported.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_smollm2_learning import PREFIX_TOKENS
from posttrain.algos.prefix_rl.cluster_cli import build_engine, build_parser, prefixed_correct
from posttrain.common.cli_help import CommandParser
from posttrain.engines.base import SamplingParams
from posttrain.tasks import TASKS
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts


def opening(example: Example) -> str:
    """``The number a + b =`` for the problem ``a+b=`` (``-`` for subtractions), as the base model writes it when
    it answers right."""
    match = re.fullmatch(r"(\d+)([+-])(\d+)=", example.prompt)
    if match is None:
        raise ValueError(f"arithmetic problem {example.prompt!r} is not of the form a+b= or a-b=")
    a, op, b = match.groups()
    return f"The number {a} {op} {b} ="


def accuracy_by_op(correct: list[bool], examples: list[Example]) -> dict[str, float | int]:
    """Accuracy overall, on additions and on subtractions, with the counts."""
    out: dict[str, float | int] = {"accuracy": sum(correct) / len(correct), "right": sum(correct)}
    for name, op in (("addition", "+"), ("subtraction", "-")):
        picked = [c for c, ex in zip(correct, examples, strict=True) if op in ex.prompt]
        out[f"{name}_accuracy"], out[f"{name}_problems"] = sum(picked) / len(picked), len(picked)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=128, help="held-out problems (the first of the test split)")
    parser.add_argument("--prefix_tokens", type=int, default=PREFIX_TOKENS, help="k: opening tokens kept")
    parser.add_argument("--max_new_tokens", type=int, default=24, help="the whole answer's budget, prefix included")
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args(argv)

    engine_args = build_parser().parse_args(["--target_model", "smollm2-135m", "--task", "arithmetic", "--device",
                                             "cpu", "--max_new_tokens", str(args.max_new_tokens)])
    engine = build_engine(engine_args)
    task = TASKS.get("arithmetic")()
    examples = task.split("test")[: args.problems]
    prompt_ids = encode_prompts(engine.tokenizer, examples, None, engine_args.max_prompt_tokens)
    greedy = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    alone = prefixed_correct(engine, task, examples, prompt_ids, [], greedy)
    prefixes = [engine.tokenizer(opening(ex), add_special_tokens=False)["input_ids"][: args.prefix_tokens]
                for ex in examples]
    steered = [prefixed_correct(engine, task, [ex], [ids], prefix, greedy)[0]
               for ex, ids, prefix in zip(examples, prompt_ids, prefixes, strict=True)]
    report = {"command": " ".join([sys.executable, *sys.argv]), "problems": len(examples),
              "prefix_tokens": args.prefix_tokens, "max_new_tokens": args.max_new_tokens,
              "target_alone": accuracy_by_op(alone, examples),
              "after_the_opening": accuracy_by_op(steered, examples),
              "rows": [{"prompt": ex.prompt, "answer": ex.answer,
                        "prefix": engine.tokenizer.decode(prefix), "alone_right": a, "steered_right": s}
                       for ex, prefix, a, s in zip(examples, prefixes, alone, steered, strict=True)]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({key: report[key] for key in ("target_alone", "after_the_opening")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
