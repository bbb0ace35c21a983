"""The multistep-word task: seeded disjoint splits, worked solutions, the difficulty knob and the strict
``Answer:`` line verifier (issue 44, section 1)."""

from __future__ import annotations

import re

import pytest

from posttrain.algos.gpo.hint import privileged_examples
from posttrain.tasks import TASKS, reward_columns
from posttrain.tasks.base import Example
from posttrain.tasks.multistep_word import SOLUTION_TEMPLATE, MultistepWordTask, apply
from posttrain.tasks.verifiers import answer_line_integer


def test_splits_seeded_disjoint_and_sized() -> None:
    first, second = TASKS.get("multistep-word")(), MultistepWordTask()
    train, test = first.split("train"), first.split("test")
    assert train == second.split("train") and test == second.split("test")
    assert len(train) >= 2000 and len(test) >= 512
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    assert MultistepWordTask(seed=7).split("test") != test
    with pytest.raises(ValueError, match="validation"):
        first.split("validation")


def test_prompt_asks_for_the_answer_line() -> None:
    example = MultistepWordTask().split("test")[0]
    assert example.prompt.rstrip().endswith("have now?")
    assert '"Answer: <integer>"' in example.prompt


def test_worked_solution_recomputes_the_answer() -> None:
    for example in MultistepWordTask(min_operations=2, max_operations=4).split("test")[:200]:
        steps = re.findall(r"(\d+) ([-+*/]) (\d+) = (\d+)\.", example.columns["solution"])
        assert len(steps) == example.columns["operations"]
        for left, op, right, result in steps:
            assert apply(int(left), op, int(right)) == int(result)
        assert int(steps[-1][3]) == int(example.answer)
        assert example.columns["solution"].endswith(f"\nAnswer: {example.answer}")
        assert MultistepWordTask().is_correct(example.columns["solution"], example)


def test_difficulty_knob() -> None:
    hard = MultistepWordTask(min_operations=4, max_operations=4, max_number=9, max_factor=3, max_value=60)
    examples = hard.split("test")
    assert {e.columns["operations"] for e in examples} == {4}
    for example in examples:
        numbers = [int(x) for x in re.findall(r"\d+", example.columns["solution"])]
        assert max(numbers) <= 60 and int(example.answer) >= 0
    with pytest.raises(ValueError, match="min_operations"):
        MultistepWordTask(min_operations=3, max_operations=2)
    with pytest.raises(ValueError, match="distinct problems"):
        MultistepWordTask(size=4000, test_size=512, min_operations=1, max_operations=1, max_number=1, max_factor=2,
                          max_value=2).problems()


def test_solution_reaches_the_guider_prompt() -> None:
    examples = MultistepWordTask().split("train")[:3]
    for plain, guided in zip(examples, privileged_examples(examples, SOLUTION_TEMPLATE), strict=True):
        assert guided.prompt == f"{plain.prompt}\nWorked solution: {plain.columns['solution']}"
        assert guided.answer == plain.answer


EVALUATED_ELSEWHERE = [("-22/2", "-11"), ("48/4", "12"), ("12^1", "12"), ("-11 +- 1", "-11"),
                       ("4 - 15 = 12 = -11", "-11")]
"""Unevaluated expressions a review found a verifier accepting: the Answer line must reject every one."""


@pytest.mark.parametrize(("stated", "gold"), EVALUATED_ELSEWHERE)
def test_expressions_on_the_answer_line_are_wrong(stated: str, gold: str) -> None:
    task = MultistepWordTask()
    completion = f"Some steps.\nAnswer: {stated}"
    assert answer_line_integer(completion) is None
    assert not task.is_correct(completion, Example(prompt="p", answer=gold))
    assert task.reward(["p"], [completion], answer=[gold]) == [0.0]


@pytest.mark.parametrize("completion", [
    "Answer: 12", "Answer:12", "Answer: 12.", "  Answer:   12  ", "Answer: +12", "3 * 4 = 12.\nAnswer: 12\n",
    "Answer: 7\nOn second thought 3 * 4 = 12.\nAnswer: 12", "Answer: 12.\n\nThat is all.",
])
def test_integer_answer_lines_are_right(completion: str) -> None:
    assert MultistepWordTask().is_correct(completion, Example(prompt="p", answer="12"))


@pytest.mark.parametrize("completion", [
    "3 * 4 = 12", "The answer is 12.", "", "Answer: 12\nAnswer: 13", "answer: 12", "So the Answer: 12",
    "Answer: 12 pens", "Answer: 1 2", "Answer:", "Answer: 12.0",
])
def test_other_completions_are_wrong(completion: str) -> None:
    assert not MultistepWordTask().is_correct(completion, Example(prompt="p", answer="12"))


def test_negative_integer_literal() -> None:
    assert answer_line_integer("Answer: -11") == -11


def test_reward_over_a_batch() -> None:
    task = MultistepWordTask()
    examples = task.split("test")[:8]
    completions = [e.columns["solution"] for e in examples]
    completions[3] = "no answer line"
    rewards = task.reward([e.prompt for e in examples], completions, **reward_columns(examples))
    assert rewards == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
