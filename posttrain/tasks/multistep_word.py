"""Multi-step word problems with worked solutions: a task on which RL has room to improve SmolLM2-135M-Instruct.

``multistep-word`` (issue 44) prompts tell a short story about one person's count of things, changed by two to
four operations in turn, and ask for the final count. Each prompt opens with one worked example (``EXAMPLE``)
and the instruction to end on a strict ``Answer: <integer>`` line (``INSTRUCTION``), then the problem:

    Problem: Eva has 7 cards. Then she gets 5 more. Then she gives 3 away. How many cards does she have now?

The operations work on the running count: ``+ n`` ("gets n more"), ``- n`` ("gives n away"; the count never
goes below 0), ``* k`` ("ends up with k times as many") and exact ``/ k`` ("shares them equally among k
friends and keeps one share"; only when k divides the count). The difficulty knob is the constructor:
``min_operations`` / ``max_operations`` (how many operations a problem has), ``max_number`` (the largest start
count and added or removed amount), ``max_factor`` (the largest factor or divisor) and ``max_value`` (no count
on the way exceeds it). Its defaults are the difficulty ``benchmarks/smollm2_task_headroom.py`` measured
(``benchmarks/smollm2.md``).

The reward reads the final ``Answer:`` line only (``posttrain.tasks.verifiers.answer_line_integer``): 1.0
when it is an integer literal equal to the answer, else 0.0. An expression there (``Answer: 48/4``) is
wrong even when it evaluates to the answer, unlike ``math_equal``'s reading.

Every example carries its worked solution in the ``solution`` column (``Eva starts with 7. 7 + 5 = 12.
12 - 3 = 9.`` then ``Answer: 9``): GPO's privileged context (``posttrain.algos.gpo.hint``) with
``--privileged_template`` set to ``SOLUTION_TEMPLATE``. Unlike the arithmetic task's hint it states the
answer: the guider sees the whole solution.

DuPO's dual (``--algo dupo``, She et al. 2025): the generic math dual hides the first numbers of the whole
prompt, which here are the worked example's, so the task brings its own (``story_masked_problems``, the task
class's ``masked_problems``): one dual question per number of the problem's story (the start count, then each
operation's operand, in text order), the story alone with that number behind a fresh variable:

    Eva has Vqe cards. Then she gets 5 more. Then she gives 3 away. How many cards does she have now?
    Given that the answer is 9, what is Vqe?

and the answer a completion states is read as the verifier reads it (``stated_answer``: the last ``Answer:``
line's integer), so a completion without that line gets the reward of a failed recovery.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.dual_questions import MaskedProblem, masked_problems
from posttrain.tasks.verifiers import answer_line_integer

EXAMPLE = ("Here is an example.\nProblem: Ann has 3 pens. Then she gets 2 more. Then she ends up with 2 times as many. "
           "Then she gives 4 away. How many pens does she have now?\n"
           "Solution: Ann starts with 3. 3 + 2 = 5. 5 * 2 = 10. 10 - 4 = 6.\nAnswer: 6")
"""The worked example every prompt opens with: without one SmolLM2-135M-Instruct never ended on an ``Answer:``
line in our probes (0 of 32 greedy answers); with it, more than half do."""
INSTRUCTION = 'Solve the next problem the same way, one equation per step, and end with a final line "Answer: <integer>".'
SOLUTION_TEMPLATE = "{prompt}\nWorked solution: {solution}"
"""The guider's prompt for GPO (``--privileged_template``): the problem followed by its worked solution."""
PEOPLE = (("Ann", "she"), ("Bob", "he"), ("Sam", "he"), ("Eva", "she"), ("Lea", "she"), ("Tom", "he"))
ITEMS = ("pens", "cups", "eggs", "cards", "apples", "stamps", "coins", "books")
OPERATORS = ("+", "-", "*", "/")
SENTENCES = {
    "+": "Then {pronoun} gets {n} more.",
    "-": "Then {pronoun} gives {n} away.",
    "*": "Then {pronoun} ends up with {n} times as many.",
    "/": "Then {pronoun} shares them equally among {n} friends and keeps one share.",
}


@dataclass(frozen=True)
class MultistepProblem:
    """A start count and the operations applied to it in turn."""

    name: str
    pronoun: str
    item: str
    start: int
    steps: tuple[tuple[str, int], ...]

    def text(self) -> str:
        """The story and its question, without the answer-format instruction."""
        sentences = [f"{self.name} has {self.start} {self.item}."]
        sentences += [SENTENCES[op].format(pronoun=self.pronoun, n=n) for op, n in self.steps]
        sentences.append(f"How many {self.item} does {self.pronoun} have now?")
        return " ".join(sentences)

    def values(self) -> list[int]:
        """The running count after each operation (the last is the answer)."""
        value, out = self.start, []
        for op, n in self.steps:
            value = apply(value, op, n)
            out.append(value)
        return out

    def value(self) -> int:
        return self.values()[-1]

    def solution(self) -> str:
        """The worked solution: one equation per operation, then the ``Answer:`` line."""
        equations, left = [f"{self.name} starts with {self.start}."], self.start
        for (op, n), result in zip(self.steps, self.values(), strict=True):
            equations.append(f"{left} {op} {n} = {result}.")
            left = result
        return " ".join(equations) + f"\nAnswer: {left}"

PROBLEM_MARKER = "\nProblem: "
"""What opens the problem's story in a prompt (after the worked example and the instruction)."""


def story(prompt: str) -> tuple[int, str]:
    """The character offset and text of the story a ``multistep-word`` prompt asks about (after its last
    ``PROBLEM_MARKER``); a prompt without one raises ``ValueError`` naming it."""
    start = prompt.rfind(PROBLEM_MARKER)
    if start < 0:
        raise ValueError(f"multistep-word: prompt {prompt[:80]!r} has no {PROBLEM_MARKER.strip()!r} line")
    start += len(PROBLEM_MARKER)
    return start, prompt[start:].strip()


def story_masked_problems(prompt: str, max_questions: int | None = None) -> list[MaskedProblem]:
    """DuPO's dual questions of a ``multistep-word`` prompt: ``masked_problems`` of its story alone (one per
    number, at most ``max_questions``, in text order), ``start`` counted in the whole prompt."""
    offset, text = story(prompt)
    return [MaskedProblem(m.text, m.variable, m.hidden, offset + m.start) for m in masked_problems(text, max_questions)]


def stated_answer(completion: str) -> str | None:
    """The answer a completion states, as the verifier reads it: the last ``Answer:`` line's integer."""
    value = answer_line_integer(completion)
    return None if value is None else str(value)


def apply(value: int, op: str, n: int) -> int:
    """``value op n`` for one of ``OPERATORS`` (``/`` only where it is exact)."""
    if op == "+":
        return value + n
    if op == "-":
        return value - n
    if op == "*":
        return value * n
    if op == "/" and value % n == 0:
        return value // n
    raise ValueError(f"multistep-word: cannot apply {value} {op} {n} (operators: {OPERATORS}, exact division)")


@TASKS.register("multistep-word")
class MultistepWordTask:
    """Word problems with ``min_operations``..``max_operations`` operations (+, -, *, exact /) on small numbers,
    answered step by step with a final ``Answer: <integer>`` line; ``test_size`` held out."""

    name = "multistep-word"
    masked_problems = staticmethod(story_masked_problems)
    """DuPO's dual questions (module docstring); ``stated_answer`` the primal answer they are given."""
    stated_answer = staticmethod(stated_answer)

    def __init__(self, size: int = 4000, test_size: int = 512, min_operations: int = 2, max_operations: int = 2,
                 max_number: int = 5, max_factor: int = 2, max_value: int = 20,
                 seed: int = 1234) -> None:
        if not 1 <= min_operations <= max_operations:
            raise ValueError(f"multistep-word: need 1 <= min_operations <= max_operations, got {min_operations} "
                             f"and {max_operations}")
        if max_number < 1 or max_factor < 2 or max_value < max_number:
            raise ValueError(f"multistep-word: need max_number >= 1, max_factor >= 2 and max_value >= max_number, "
                             f"got {max_number}, {max_factor} and {max_value}")
        if size <= test_size:
            raise ValueError(f"multistep-word: size {size} leaves no train split after test_size {test_size}")
        self.size, self.test_size, self.seed = size, test_size, seed
        self.min_operations, self.max_operations = min_operations, max_operations
        self.max_number, self.max_factor, self.max_value = max_number, max_factor, max_value

    def problems(self) -> list[MultistepProblem]:
        """``size`` distinct problems (by text) drawn with ``random.Random(seed)``; fails naming the knobs when
        the settings do not allow that many."""
        rng = random.Random(self.seed)
        problems: dict[str, MultistepProblem] = {}
        for _ in range(self.size * 20):
            problem = self._draw(rng)
            problems.setdefault(problem.text(), problem)
            if len(problems) == self.size:
                return list(problems.values())
        raise ValueError(f"multistep-word: only {len(problems)} distinct problems of the {self.size} asked with "
                         f"operations {self.min_operations}-{self.max_operations}, max_number {self.max_number}, "
                         f"max_factor {self.max_factor}, max_value {self.max_value}")

    def _draw(self, rng: random.Random) -> MultistepProblem:
        name, pronoun = rng.choice(PEOPLE)
        value = start = rng.randint(min(2, self.max_number), self.max_number)  # "has 1 cups" reads badly
        steps = []
        for _ in range(rng.randint(self.min_operations, self.max_operations)):
            op, n = self._operation(rng, value)
            steps.append((op, n))
            value = apply(value, op, n)
        return MultistepProblem(name, pronoun, rng.choice(ITEMS), start, tuple(steps))

    def _operation(self, rng: random.Random, value: int) -> tuple[str, int]:
        """One operation on ``value``, the operator drawn uniformly from those that apply (the count stays in
        ``0..max_value``, division is exact, nothing is multiplied by 0 or 1), then its operand uniformly."""
        operands = {
            "+": range(1, min(self.max_number, self.max_value - value) + 1),
            "-": range(1, min(self.max_number, value) + 1),
            "*": range(2, min(self.max_factor, self.max_value // value if value else 0) + 1),
            "/": [k for k in range(2, self.max_factor + 1) if value and value % k == 0],
        }
        op = rng.choice([op for op in OPERATORS if operands[op]])
        return op, rng.choice(operands[op])

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` problems; ``train``: all the others. Columns: ``solution`` (the
        worked solution) and ``operations`` (how many the problem has)."""
        return [Example(prompt=f"{EXAMPLE}\n\n{INSTRUCTION}\nProblem: {p.text()}", answer=str(p.value()),
                        columns={"solution": p.solution(), "operations": len(p.steps)})
                for p in head_tail_split(self.problems(), name, self.test_size, self.name)]

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 when the completion's last ``Answer:`` line is the integer ``columns['answer']``, else 0.0."""
        return [float(answer_line_integer(c) == int(a)) for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return answer_line_integer(completion) == int(example.answer)
