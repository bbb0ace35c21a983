"""Multi-step arithmetic whose mistakes a program can point at: Text2Grad's embedded default.

``step-arithmetic`` prompts chain four one-digit operands with ``+`` and ``-`` (``7+5-3+8=``); the policy
answers step by step, each step starting from the previous result (``7+5=12,12-3=9,9+8=17``). Reward: 1.0
when the number after the last ``=`` equals the answer (``posttrain.tasks.verifiers.math_equal``), else 0.0.

``program_feedback(prompt, response)`` is the oracle a span reward model learns to imitate (Text2Grad,
arXiv 2505.22338, "spans" form): every step of the response that is right is a good span, every step that
is wrong (a wrong result, a left operand that is not the previous result, the wrong operation or operand,
an unreadable piece, an extra step) is a poor span, quoted exactly, and the critique says what is wrong
("12-3 is 9, not 8."; "1 step missing."). A later step computed correctly from an earlier wrong result is a
good step: the error, and so the negative reward, sits where it was made. A response with steps missing at the
end (an empty one included) is ``incomplete``: there is no text to quote for what is missing, so the scorer puts
the poor mark on its last token (the end-of-sequence token where the policy stopped) and its verdict is -1.

``step-arithmetic-sft`` is the policy's warm-start data (recipe ``causal-step-arithmetic``): targets are the
step solutions, and its distractor (the systematic error ``TinyRecipe.target_noise`` teaches) adds one to
the result of one step (which step depends on the operands) and carries the wrong value on, so RL has
localised errors to fix. ``step-arithmetic-feedback`` is the span reward model's SFT data (recipe
``reward-text2grad``, ``rewards.text2grad.tiny``): compact reward-model prompts over responses with
injected step errors (``noisy_response``), targets the program's feedback as compact JSON;
``step-arithmetic-feedback-nocritique`` is the same data with the critique field removed (recipe
``reward-text2grad-nocritique``, the paper's "spans without critique" ablation).
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.span_feedback import SpanFeedback
from posttrain.tasks.span_templates import compact_request, feedback_json
from posttrain.tasks.verifiers import math_equal

OPERANDS = range(1, 10)
N_OPERANDS = 4
_PROMPT = re.compile(r"(\d+)((?:[+-]\d+)+)=")
_STEP = re.compile(r"(-?\d+)([+-])(\d+)=(-?\d+)")


def parse_prompt(prompt: str) -> tuple[int, list[tuple[str, int]]]:
    """``7+5-3+8=`` -> ``(7, [("+", 5), ("-", 3), ("+", 8)])``."""
    match = _PROMPT.fullmatch(prompt.strip())
    if match is None:
        raise ValueError(f"not a step-arithmetic prompt: {prompt!r}")
    return int(match.group(1)), [(op, int(x)) for op, x in re.findall(r"([+-])(\d+)", match.group(2))]


def apply(left: int, op: str, right: int) -> int:
    return left + right if op == "+" else left - right


def solution(prompt: str, errors: dict[int, int] | None = None) -> str:
    """The step solution of ``prompt``; ``errors`` maps a step index to a delta added to its result (later
    steps then start from the wrong value and compute correctly)."""
    value, ops = parse_prompt(prompt)
    steps = []
    for k, (op, right) in enumerate(ops):
        result = apply(value, op, right) + (errors or {}).get(k, 0)
        steps.append(f"{value}{op}{right}={result}")
        value = result
    return ",".join(steps)


def final_answer(response: str) -> str:
    """The text after the last ``=`` (the whole response when it has none)."""
    return response.rsplit("=", 1)[-1].strip()


def program_feedback(prompt: str, response: str) -> SpanFeedback:
    """The oracle's span feedback on ``response`` (module docstring)."""
    value, ops = parse_prompt(prompt)
    good: list[str] = []
    poor: list[str] = []
    notes: list[str] = []
    expected_left: int | None = value
    pieces = [p for p in response.split(",") if p.strip()]
    for k, piece in enumerate(pieces):
        text = piece.strip()
        match = _STEP.fullmatch(text)
        if match is None:
            poor.append(text)
            notes.append(f"'{text}' is not a step.")
            expected_left = None
            continue
        left, op, right, result = int(match.group(1)), match.group(2), int(match.group(3)), int(match.group(4))
        if k >= len(ops):
            poor.append(text)
            notes.append("there is an extra step.")
        elif expected_left is not None and left != expected_left:
            poor.append(text)
            notes.append(f"step {k + 1} should start from {expected_left}.")
        elif (op, right) != ops[k]:
            poor.append(text)
            notes.append(f"step {k + 1} should apply {ops[k][0]}{ops[k][1]}.")
        elif apply(left, op, right) != result:
            poor.append(text)
            notes.append(f"{left}{op}{right} is {apply(left, op, right)}, not {result}.")
        else:
            good.append(text)
        expected_left = result
    missing = len(ops) - len(pieces)
    if pieces and missing > 0:
        notes.append(f"{missing} step{'s' if missing > 1 else ''} missing.")
    if not pieces:
        notes.append("There are no steps.")
    critique = " ".join(notes) if notes else "All steps are right."
    return SpanFeedback(form="spans", critique=critique[:1].upper() + critique[1:], good=tuple(good),
                        poor=tuple(poor), incomplete=missing > 0)


def noisy_response(prompt: str, rng: random.Random) -> str:
    """A response with the kinds of mistakes a policy makes: 35% right, 40% one wrong result (off by 1, 2 or
    10), 10% two, 10% a step starting from a miscopied result, 5% the last step missing."""
    n = len(parse_prompt(prompt)[1])
    kind = rng.random()

    def delta() -> int:
        return rng.choice((-10, -2, -1, 1, 2, 10))

    if kind < 0.35:
        return solution(prompt)
    if kind < 0.75:
        return solution(prompt, {rng.randrange(n): delta()})
    if kind < 0.85:
        first, second = rng.sample(range(n), 2)
        return solution(prompt, {first: delta(), second: delta()})
    if kind < 0.95:
        steps = solution(prompt).split(",")
        k = rng.randrange(1, n)
        _, ops = parse_prompt(prompt)
        left = int(steps[k - 1].rsplit("=", 1)[1]) + rng.choice((-1, 1))
        op, right = ops[k]
        steps[k] = f"{left}{op}{right}={apply(left, op, right)}"
        return ",".join(steps)
    return ",".join(solution(prompt).split(",")[:-1])


def _all_prompts(seed: int) -> list[str]:
    prompts = [f"{a}{o1}{b}{o2}{c}{o3}{d}="
               for a, b, c, d in itertools.product(OPERANDS, repeat=N_OPERANDS)
               for o1, o2, o3 in itertools.product("+-", repeat=N_OPERANDS - 1)]
    random.Random(seed).shuffle(prompts)
    return prompts


@TASKS.register("step-arithmetic")
class StepArithmeticTask:
    """Four one-digit operands, ``+`` and ``-``, answered step by step; reward = the final answer."""

    name = "step-arithmetic"

    def __init__(self, test_size: int = 256, seed: int = 1234) -> None:
        self.test_size, self.seed = test_size, seed

    def _examples(self) -> list[Example]:
        out = []
        for prompt in _all_prompts(self.seed):
            value, ops = parse_prompt(prompt)
            for op, right in ops:
                value = apply(value, op, right)
            out.append(Example(prompt=prompt, answer=str(value)))
        return out

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` shuffled problems; ``train``: all the others."""
        return head_tail_split(self._examples(), name, self.test_size, self.name)

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 when the number after the last ``=`` equals ``columns['answer']``, else 0.0."""
        return [1.0 if math_equal(final_answer(c), a) else 0.0
                for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return math_equal(final_answer(completion), example.answer)


@TASKS.register("step-arithmetic-sft")
class StepArithmeticSFTTask(StepArithmeticTask):
    """The policy warm start's data: answers are the step solutions (module docstring)."""

    name = "step-arithmetic-sft"

    def _examples(self) -> list[Example]:
        return [Example(prompt=p, answer=solution(p)) for p in _all_prompts(self.seed)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return math_equal(final_answer(completion), final_answer(example.answer))

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        return [1.0 if math_equal(final_answer(c), final_answer(a)) else 0.0
                for c, a in zip(completions, columns["answer"], strict=True)]

    def distractor(self, example: Example) -> str:
        """The solution with one step's result one too large, carried on (the step: operand sum mod 3)."""
        first, ops = parse_prompt(example.prompt)
        return solution(example.prompt, {(first + sum(x for _, x in ops)) % len(ops): 1})


def feedback_example(prompt: str, response: str, critique: bool = True) -> Example:
    """One span reward model SFT example: the compact request and the program's compact JSON feedback (without
    its critique field when ``critique`` is False)."""
    return Example(prompt=compact_request("spans", prompt, response),
                   answer=feedback_json(program_feedback(prompt, response), compact=True, critique=critique),
                   columns={"problem": prompt, "response": response})


@TASKS.register("step-arithmetic-feedback")
class StepArithmeticFeedbackTask:
    """The span reward model's data (module docstring): one noisy response per problem, problems from
    ``step-arithmetic``'s own splits, so held-out feedback is on held-out problems."""

    name = "step-arithmetic-feedback"
    critique = True
    """Whether the targets carry the critique (``textual_feedback``) before the spans."""

    def __init__(self, test_size: int = 256, seed: int = 1234, train_size: int = 20000) -> None:
        self.base = StepArithmeticTask(test_size, seed)
        self.seed, self.train_size = seed, train_size

    def split(self, name: str) -> list[Example]:
        problems = self.base.split(name)
        if name == "train":
            problems = problems[:self.train_size]
        rng = random.Random(f"{self.seed}-{name}")
        return [feedback_example(e.prompt, noisy_response(e.prompt, rng), self.critique) for e in problems]

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 for a completion that is exactly the program's feedback JSON, else 0.0."""
        return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return completion.strip() == example.answer


@TASKS.register("step-arithmetic-feedback-nocritique")
class StepArithmeticSpansOnlyTask(StepArithmeticFeedbackTask):
    """``step-arithmetic-feedback`` with the critique field removed from every target (the same problems,
    responses and spans): the data of Text2Grad's "spans without critique" ablation (recipe
    ``reward-text2grad-nocritique``)."""

    name = "step-arithmetic-feedback-nocritique"
    critique = False
