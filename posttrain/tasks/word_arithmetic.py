"""Arithmetic word problems with 2-3 operands: DuPO's embedded default (``--algo dupo``, ``posttrain dupo-rerank``).

``word-arithmetic`` prompts read like "Ann has 7 pens, gets 4, gives 2 away. How many?"; the answer is the
integer (9). They are kept short because the tiny models read them a character at a time. Four templates: a+b, a-b, a+b-c and a+b*c ("buys b bags of c"). Every number in
a prompt is an operand, so each one can be hidden by a DuPO dual question and recovered uniquely from the
answer (no multiplication by 0, no inexact division). Reward: 1.0 when the completion equals the answer
(``posttrain.tasks.verifiers.math_equal``), else 0.0.

``word-arithmetic-sft`` is the DuPO warm start's supervised data (recipe ``causal-word-arithmetic``,
``posttrain.algos.warm_start.sft_task_warm_start``): every training problem twice as the primal question (``PRIMAL_COPIES``), then,
for each of its operands, two dual questions (``posttrain.tasks.dual_questions``) that hide that operand: one
stating the true answer (target: the operand) and one stating a wrong answer (target: the operand that answer
implies). The wrong answer is, at random, the primal's own mistake (below) or a nearby number, so the model
learns to invert the problem from the stated answer rather than to recall the operand it saw, and learns it on
exactly the answers a policy gets wrong. Its distractor (the systematic error the warm start's label noise
teaches) is the primal's forgotten last operation (a+b-c -> a+b); dual targets stay clean, because DuPO's premise
is a dual solver more reliable than the primal one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.dual_questions import dual_prompt, masked_problems
from posttrain.tasks.verifiers import math_equal

TEMPLATES: dict[str, str] = {
    "add": "{name} has {0} {item}, gets {1}. How many?",
    "sub": "{name} has {0} {item}, gives {1} away. How many?",
    "add_sub": "{name} has {0} {item}, gets {1}, gives {2} away. How many?",
    "bags": "{name} has {0} {item}, buys {1} bags of {2}. How many?",
}
NAMES = ("Ann", "Bob", "Sam", "Eva")
ITEMS = ("pens", "cups", "eggs", "cards")
FIRST_OPERAND = range(1, 13)
OTHER_OPERAND = range(1, 7)
BAG_SIZE = range(2, 4)
PRIMAL_COPIES = 2
"""Times each primal question appears in ``word-arithmetic-sft``: with 4-6 dual questions per problem, one copy
left the primal a sixth of the data and the warm start's greedy primal accuracy lower than two copies do
(benchmarks/dupo.md has both builds' accuracy)."""


@dataclass(frozen=True)
class WordProblem:
    """One problem: its template, operands (in text order) and wording."""

    template: str
    operands: tuple[int, ...]
    name: str
    item: str

    def text(self, operands: tuple[int, ...] | None = None) -> str:
        return TEMPLATES[self.template].format(*(operands or self.operands), name=self.name, item=self.item)

    def value(self, operands: tuple[int, ...] | None = None) -> int:
        a, b, *rest = operands or self.operands
        return {"add": lambda: a + b, "sub": lambda: a - b, "add_sub": lambda: a + b - rest[0],
                "bags": lambda: a + b * rest[0]}[self.template]()

    def forgotten_last_step(self) -> int:
        """The primal distractor: the value without the last operation (a+b-c -> a+b, a+b -> a)."""
        return self.value(self.operands[:-1] + (0,)) if self.template != "bags" else self.operands[0] + self.operands[1]

    def implied_operand(self, index: int, answer: int) -> int | None:
        """The non-negative integer operand ``index`` that makes the problem's value ``answer``, or None."""
        others = list(self.operands)
        for candidate in range(100):
            others[index] = candidate
            if self.value(tuple(others)) == answer:
                return candidate
        return None


def word_problems(count: int, seed: int) -> list[WordProblem]:
    """``count`` distinct problems with non-negative answers, drawn with ``random.Random(seed)``."""
    rng = random.Random(seed)
    problems: dict[str, WordProblem] = {}
    while len(problems) < count:
        template = rng.choice(sorted(TEMPLATES))
        operands = [rng.choice(FIRST_OPERAND), rng.choice(OTHER_OPERAND)]
        if template in ("add_sub", "bags"):
            operands.append(rng.choice(BAG_SIZE if template == "bags" else OTHER_OPERAND))
        problem = WordProblem(template, tuple(operands), rng.choice(NAMES), rng.choice(ITEMS))
        if problem.value() >= 0:
            problems.setdefault(problem.text(), problem)
    return list(problems.values())


class _Verified:
    """``math_equal`` reward and verifier shared by both word-arithmetic tasks."""

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 for a completion equal to ``columns['answer']``, else 0.0."""
        return [1.0 if math_equal(c, a) else 0.0 for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return math_equal(completion, example.answer)


@TASKS.register("word-arithmetic")
class WordArithmeticTask(_Verified):
    """Word problems with 2-3 operands (a+b, a-b, a+b-c, a+b*c); 256 held out."""

    name = "word-arithmetic"

    def __init__(self, size: int = 3000, test_size: int = 256, seed: int = 1234) -> None:
        self.size, self.test_size, self.seed = size, test_size, seed

    def problems(self, split: str) -> list[WordProblem]:
        """The structured problems behind ``split`` (same order as the examples)."""
        return head_tail_split(word_problems(self.size, self.seed), split, self.test_size, self.name)

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` problems; ``train``: all the others."""
        return [Example(prompt=p.text(), answer=str(p.value())) for p in self.problems(name)]


@TASKS.register("word-arithmetic-sft")
class WordArithmeticSFTTask(_Verified):
    """word-arithmetic's train problems as primal and dual questions, for the DuPO warm start."""

    name = "word-arithmetic-sft"

    def __init__(self, seed: int = 99) -> None:
        self.seed = seed

    def _examples(self, problems: list[WordProblem]) -> list[Example]:
        rng = random.Random(self.seed)
        examples = []
        for problem in problems:
            answer, wrong = problem.value(), problem.forgotten_last_step()
            primal = Example(prompt=problem.text(), answer=str(answer), columns={"distractor": str(wrong)})
            examples += [primal] * PRIMAL_COPIES
            if wrong == answer or rng.random() < 0.5:
                wrong = answer + rng.choice((-3, -2, -1, 1, 2, 3))
            for index, masked in enumerate(masked_problems(problem.text())):
                for stated in (answer, wrong):
                    target = problem.implied_operand(index, stated)
                    if target is not None:  # a wrong answer may imply no non-negative integer operand
                        examples.append(Example(prompt=dual_prompt(masked, str(stated)), answer=str(target),
                                                columns={"distractor": str(target)}))  # clean: no error taught
        return examples

    def split(self, name: str) -> list[Example]:
        """Primal and dual questions of word-arithmetic's ``name`` split (each problem contributes both)."""
        return self._examples(WordArithmeticTask().problems(name))

    def distractor(self, example: Example) -> str:
        """The systematic error of the warm start's noisy targets (module docstring)."""
        return example.columns["distractor"]
