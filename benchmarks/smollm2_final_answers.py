"""What a trained SmolLM2 checkpoint answers: greedy completions of the first held-out ``arithmetic`` problems,
the final answer DuPO's dual is given (``posttrain.algos.dupo.dual.final_answer``), and how many are right, how
many final answers merely repeat one of the problem's operands (DuPO's math dual rewards an answer that repeats
the hidden operand, which the dual solver then "recovers" by copying it) and how many right ones only restate
the problem ("The answer is: 4-15.", which math-verify evaluates to the answer); benchmarks/smollm2.md.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/smollm2_final_answers.py --out RESULTS.json \\
        ARM=RUN_DIR/checkpoints/step_12/hf [...]

Generation is Hugging Face ``generate`` (greedy, ``--max_new_tokens``) on the prompts as training encodes them
(``encode_prompts``, chat template, no system prompt), one problem at a time.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

from posttrain.algos.dupo.dual import final_answer
from posttrain.common.cli_help import CommandParser
from posttrain.models.loading import load_causal_lm, load_tokenizer, resolve_model_name
from posttrain.tasks.arithmetic import ArithmeticTask
from posttrain.tasks.prompts import encode_prompts
from posttrain.tasks.verifiers import math_equal


def operands(prompt: str) -> list[str]:
    """The two operands of an ``a+b=`` / ``a-b=`` prompt, as written."""
    return prompt.rstrip("=").replace("-", "+").split("+")


def restates_the_problem(completion: str, prompt: str, answer: str) -> bool:
    """Whether the completion writes the problem's expression (``a+b``, spaces ignored) and never states the
    answer as a number: math-verify evaluates such an expression, so the verifier scores it right."""
    numbers = re.findall(r"-?\d+", completion.replace(" ", ""))
    return prompt.rstrip("=") in completion.replace(" ", "") and answer not in numbers


def final_answers(checkpoint: Path, problems: int, max_new_tokens: int) -> dict:
    """Per problem: prompt, answer, completion and final answer; the counts right and operand-repeating."""
    path = resolve_model_name(str(checkpoint))  # a checkpoint's folder, or a model alias (the base model)
    tokenizer = load_tokenizer(path)
    model = load_causal_lm(path)
    rows = []
    for example in ArithmeticTask().split("test")[:problems]:
        ids = torch.tensor(encode_prompts(tokenizer, [example], None, 256))
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
        completion = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        answer = final_answer(completion)
        rows.append({"prompt": example.prompt, "answer": example.answer, "completion": completion,
                     "final_answer": answer, "right": math_equal(completion, example.answer),
                     "repeats_an_operand": answer in operands(example.prompt),
                     "restates_the_problem": restates_the_problem(completion, example.prompt, example.answer)})
    return {"checkpoint": str(checkpoint), "problems": len(rows), "right": sum(r["right"] for r in rows),
            "repeats_an_operand": sum(r["repeats_an_operand"] for r in rows),
            "right_by_restating_the_problem": sum(r["right"] and r["restates_the_problem"] for r in rows), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="ARM=PATH of a checkpoint's hf/ folder, or ARM=ALIAS (smollm2-135m: the base model)")
    parser.add_argument("--problems", type=int, default=32, help="held-out problems answered per checkpoint")
    parser.add_argument("--max_new_tokens", type=int, default=24, help="greedy tokens per answer")
    parser.add_argument("--out", type=Path, required=True, help="results JSON to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report = {"command": " ".join([sys.executable, *sys.argv]), "arms": {}}
    for spec in args.checkpoints:
        arm, sep, path = spec.partition("=")
        if not sep:
            raise ValueError(f"checkpoint {spec!r}: expected ARM=PATH")
        report["arms"][arm] = final_answers(Path(path), args.problems, args.max_new_tokens)
        print(arm, {k: v for k, v in report["arms"][arm].items() if k != "rows"})
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
