"""Arithmetic: small integer ``a+b`` / ``a-b`` problems whose answer is an integer.

Prompts look like ``23+7=``; the answer is the integer (``30``). Every problem with operands in
``0..max_operand`` is enumerated, shuffled with a fixed seed and cut into disjoint test and train
splits. Reward: 1.0 when the completion equals the answer (``posttrain.tasks.verifiers.math_equal``), else
0.0; there is no format reward.

Every example carries a ``hint`` column: an intermediate result of the compensation method, the same
operation with the second operand one larger (``23+7=`` -> ``23+8=31``, so the answer is 31 - 1; ``3-5=``
-> ``3-6=-3``, so the answer is -3 + 1). It is GPO's privileged context (``posttrain.algos.gpo.hint``):
it makes the problem easier without stating the answer, which always differs from the hinted result by
exactly one.
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.verifiers import math_equal


def compensation_hint(a: int, op: str, b: int) -> str:
    """The compensation step for ``a op b``: ``a op (b + 1)`` and its value, e.g.
    ``compensation_hint(23, "+", 7) == "23+8=31"``. Never the answer itself: the value is the answer plus
    one (``+``) or minus one (``-``)."""
    if op not in ("+", "-"):
        raise ValueError(f"arithmetic hint: op must be '+' or '-', got {op!r}")
    value = a + (b + 1) if op == "+" else a - (b + 1)
    return f"{a}{op}{b + 1}={value}"


@TASKS.register("arithmetic")
class ArithmeticTask:
    """Integer addition and subtraction with operands in ``0..max_operand``."""

    name = "arithmetic"

    def __init__(self, max_operand: int = 19, test_size: int = 256, seed: int = 1234) -> None:
        self.max_operand = max_operand
        self.test_size = test_size
        self.seed = seed

    def _all(self) -> list[Example]:
        examples = []
        for a in range(self.max_operand + 1):
            for b in range(self.max_operand + 1):
                for op, value in (("+", a + b), ("-", a - b)):
                    examples.append(Example(prompt=f"{a}{op}{b}=", answer=str(value),
                                            columns={"hint": compensation_hint(a, op, b)}))
        random.Random(self.seed).shuffle(examples)
        return examples

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` shuffled problems; ``train``: all the others."""
        return head_tail_split(self._all(), name, self.test_size, self.name)

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 for a completion equal to ``columns['answer']``, else 0.0."""
        return [1.0 if math_equal(c, a) else 0.0 for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return math_equal(completion, example.answer)

    def distractor(self, example: Example) -> str:
        """A systematic wrong answer, the sign flipped (0 becomes -1): it gives the tiny model's warm
        start a consistent mistake that RL can learn to remove (see TinyRecipe.target_noise)."""
        value = int(example.answer)
        return str(-value if value else -1)
