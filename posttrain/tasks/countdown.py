"""Countdown: reach a target with + - * / and parentheses, using each given number at most once.

Prompts look like ``3,5,7->22``: three numbers from 1-9 and a target in 1..max_target. The reference
answer is one expression that uses all three numbers (``3*5+7``); the numbers and target are recovered
from it, so rewards need only the ``answer`` column. A completion is scored 1.0 when it is an
expression over a sub-multiset of the numbers whose exact (rational) value is the target, else 0.0;
text after a first ``=`` is ignored (``3*5+7=22`` counts). Completions are parsed with ``ast`` and a
whitelist of node types: nothing is ever evaluated by Python.
"""

from __future__ import annotations

import ast
import itertools
import random
from collections import Counter
from fractions import Fraction
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split

MAX_EXPRESSION_CHARS = 64
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def evaluate_expression(text: str) -> tuple[Fraction, list[int]] | None:
    """Exact value and the integer literals of an arithmetic expression, or None if it is not one.

    Only non-negative integer literals, binary + - * / and parentheses are accepted; division by
    zero, unary operators, names, calls and anything longer than ``MAX_EXPRESSION_CHARS`` give None.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    literals: list[int] = []

    def walk(node: ast.AST) -> Fraction | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            return None if right == 0 else left / right
        return None

    value = walk(tree.body)
    return None if value is None else (value, literals)


def check_solution(completion: str, numbers: list[int], target: int) -> bool:
    """True when ``completion`` (up to a first ``=``) uses only ``numbers`` (each at most once) to make ``target``."""
    result = evaluate_expression(completion.split("=", 1)[0])
    if result is None:
        return False
    value, used = result
    return value == target and not Counter(used) - Counter(numbers)


def problem_from_answer(answer: str) -> tuple[list[int], int]:
    """The numbers and target a reference expression encodes; a bad reference raises naming it."""
    result = evaluate_expression(answer)
    if result is None or result[0].denominator != 1:
        raise ValueError(f"countdown reference answer {answer!r} is not an integer-valued expression")
    return result[1], int(result[0])


def _render(a: int, b: int, c: int, o1: str, o2: str, left_first: bool) -> tuple[str, int]:
    """``(a o1 b) o2 c`` or ``a o1 (b o2 c)`` with only the parentheses precedence needs, and its value."""
    def apply(x: int, op: str, y: int) -> int:
        return x + y if op == "+" else x - y if op == "-" else x * y

    if left_first:
        inner = f"{a}{o1}{b}"
        if o2 == "*" and o1 != "*":
            inner = f"({inner})"
        return f"{inner}{o2}{c}", apply(apply(a, o1, b), o2, c)
    inner = f"{b}{o2}{c}"
    if o2 != "*" and o1 != "+":
        inner = f"({inner})"
    return f"{a}{o1}{inner}", apply(a, o1, apply(b, o2, c))


@TASKS.register("countdown")
class CountdownTask:
    """Three numbers from 1-9 and a target reachable with all of them (+, -, * in the reference)."""

    name = "countdown"

    def __init__(self, max_target: int = 50, test_size: int = 256, seed: int = 1234) -> None:
        self.max_target = max_target
        self.test_size = test_size
        self.seed = seed

    def _all(self) -> list[Example]:
        rng = random.Random(self.seed)
        by_problem: dict[tuple[tuple[int, ...], int], str] = {}
        for a, b, c in itertools.product(range(1, 10), repeat=3):
            for o1, o2 in itertools.product("+-*", repeat=2):
                for left_first in (True, False):
                    text, value = _render(a, b, c, o1, o2, left_first)
                    if 1 <= value <= self.max_target:
                        by_problem.setdefault((tuple(sorted((a, b, c))), value), text)
        examples = []
        for (numbers, target), text in sorted(by_problem.items()):
            shown = list(numbers)
            rng.shuffle(shown)
            examples.append(Example(prompt=f"{','.join(map(str, shown))}->{target}", answer=text))
        rng.shuffle(examples)
        return examples

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` shuffled problems; ``train``: all the others."""
        return head_tail_split(self._all(), name, self.test_size, self.name)

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 when the completion reaches the target of ``columns['answer']`` legally, else 0.0."""
        rewards: list[float | None] = []
        for completion, answer in zip(completions, columns["answer"], strict=True):
            numbers, target = problem_from_answer(answer)
            rewards.append(1.0 if check_solution(completion, numbers, target) else 0.0)
        return rewards

    def is_correct(self, completion: str, example: Example) -> bool:
        numbers, target = problem_from_answer(example.answer)
        return check_solution(completion, numbers, target)

