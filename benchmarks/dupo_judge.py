"""How well a word-arithmetic model judges answers as DuPO's dual solver (She et al. 2025, arXiv 2508.14460).

    python benchmarks/dupo_judge.py --models PATH [PATH ...] --out benchmarks/results/dupo_judge.json

DuPO rewards an answer when the dual solver, told that answer, recovers a hidden operand of the problem. So
the reward separates right answers from wrong ones only as far as the solver recovers the operand under a
right answer and fails under a wrong one. For each model (default: the embedded ``causal-word-arithmetic``
warm start) and each split this measures, greedy, every operand of every problem hidden in turn:

- ``primal_accuracy``: the problem answered right; ``primal_forgotten``: answered with the warm start's taught
  mistake (the last operation forgotten, ``WordProblem.forgotten_last_step``);
- ``recovery_right``: the operand recovered when the dual question states the true answer;
- ``recovery_forgotten``: recovered when it states the taught mistake (problems where that differs);
- ``recovery_nearby``: recovered when it states the true answer plus a nonzero offset of at most 3.

The ``train`` split is the one DuPO trains on (and the warm start saw); ``test`` is held out.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from posttrain.algos.dupo.dual import equality_distance
from posttrain.algos.dupo.dual_solve import backward_accuracy, solve_duals
from posttrain.common.cli_help import CommandParser
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.engines.cli import command_engine
from posttrain.tasks.base import Example
from posttrain.tasks.dual_questions import dual_prompt, masked_problems
from posttrain.tasks.prompts import encode_prompts
from posttrain.tasks.word_arithmetic import WordArithmeticTask, WordProblem

MAX_PROMPT_TOKENS = 256
PRIMAL = SamplingParams(max_new_tokens=6, temperature=0.0, seed=0)
DUAL = SamplingParams(max_new_tokens=4, temperature=0.0, seed=0)
"""DuPO's default answer budgets (``DuPOConfig``: 6 primal tokens, 4 dual), greedy."""


def primal_rates(engine: GenerationEngine, problems: list[WordProblem]) -> dict[str, float]:
    """Greedy primal answers: the fractions right and equal to the taught mistake."""
    ids = encode_prompts(engine.tokenizer, [Example(prompt=p.text(), answer="") for p in problems], None,
                         MAX_PROMPT_TOKENS)
    answers = [text.strip() for text in engine.generate(ids, PRIMAL).texts]
    return {"primal_accuracy": sum(a == str(p.value()) for a, p in zip(answers, problems)) / len(problems),
            "primal_forgotten": sum(a == str(p.forgotten_last_step()) for a, p in zip(answers, problems)) / len(problems)}


def recovery(engine: GenerationEngine, problems: list[WordProblem], stated: list[int | None]) -> tuple[float, int]:
    """The fraction of dual questions (every operand of every problem whose ``stated`` answer is not None) whose
    greedy answer is the hidden operand, and how many questions that is."""
    questions, hidden = [], []
    for problem, answer in zip(problems, stated):
        if answer is None:
            continue
        for masked in masked_problems(problem.text()):
            questions.append(dual_prompt(masked, str(answer)))
            hidden.append(masked.hidden)
    distances = solve_duals(engine, questions, hidden, equality_distance, 1, DUAL, None, MAX_PROMPT_TOKENS)
    return backward_accuracy([row[0] for row in distances]), len(questions)


def probe(engine: GenerationEngine, problems: list[WordProblem], seed: int) -> dict[str, Any]:
    """Every rate of the module docstring for ``problems``, plus the number of dual questions behind each."""
    rng = random.Random(seed)
    stated = {
        "right": [p.value() for p in problems],
        "forgotten": [p.forgotten_last_step() if p.forgotten_last_step() != p.value() else None for p in problems],
        "nearby": [p.value() + rng.choice((-3, -2, -1, 1, 2, 3)) for p in problems],
    }
    report: dict[str, Any] = {"problems": len(problems), **primal_rates(engine, problems)}
    for name, answers in stated.items():
        report[f"recovery_{name}"], report[f"questions_{name}"] = recovery(engine, problems, answers)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=[None],
                        help="model folders (default: the embedded causal-word-arithmetic warm start)")
    parser.add_argument("--splits", nargs="+", default=["train", "test"], choices=["train", "test"])
    parser.add_argument("--problems", type=int, default=400, help="first N problems of each split (0 = all)")
    parser.add_argument("--seed", type=int, default=0, help="draws the nearby wrong answers")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    args = parser.parse_args(argv)
    if args.problems < 0:
        parser.error(f"--problems must be >= 0, got {args.problems}")
    task = WordArithmeticTask()
    report: dict[str, Any] = {"command": " ".join([sys.executable, *sys.argv]), "models": {}}
    for model in args.models:
        engine = command_engine(argparse.Namespace(engine="hf", device="cpu", batch_size=512, trust_remote_code=False,
                                                   seed=args.seed), model, task.name)
        name = str(model) if model else "embedded causal-word-arithmetic"
        report["models"][name] = {split: probe(engine, task.problems(split)[: args.problems or None], args.seed)
                                  for split in args.splits}
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        from posttrain.common.files import atomic_write_text

        atomic_write_text(args.out, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
