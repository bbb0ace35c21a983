"""The word-arithmetic task (DuPO's embedded default) and its primal + dual warm-start data."""

from __future__ import annotations

import re

from posttrain.tasks.dual_questions import masked_problems
from posttrain.tasks.word_arithmetic import (
    PRIMAL_COPIES,
    WordArithmeticSFTTask,
    WordArithmeticTask,
    WordProblem,
)


def test_values_distractors_and_inverses_by_hand() -> None:
    bags = WordProblem("bags", (5, 3, 2), "Ann", "pens")
    assert bags.text() == "Ann has 5 pens, buys 3 bags of 2. How many?"
    assert bags.value() == 11 and bags.forgotten_last_step() == 8
    assert bags.implied_operand(1, 13) == 4 and bags.implied_operand(1, 12) is None  # 12 - 5 is odd
    mixed = WordProblem("add_sub", (7, 4, 2), "Bob", "cups")
    assert mixed.value() == 9 and mixed.forgotten_last_step() == 11 and mixed.implied_operand(2, 10) == 1
    assert WordProblem("sub", (6, 2), "Sam", "eggs").value() == 4
    assert WordProblem("add", (6, 2), "Sam", "eggs").forgotten_last_step() == 6


def test_every_number_of_every_problem_is_a_dual_candidate() -> None:
    task = WordArithmeticTask()
    for problem in task.problems("test") + task.problems("train")[:200]:
        assert [int(m.hidden) for m in masked_problems(problem.text())] == list(problem.operands)
        assert problem.value() >= 0


def test_splits_are_disjoint_and_answers_are_integers() -> None:
    task = WordArithmeticTask()
    train, test = task.split("train"), task.split("test")
    assert len(test) == 256 and len(train) == 2744
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    assert task.reward([e.prompt for e in test[:2]], [test[0].answer, "-1"], answer=[e.answer for e in test[:2]]) == [1.0, 0.0]


DUAL = re.compile(r"(.*) Given that the answer is (-?\d+), what is (V[a-z]+)\?")


def test_sft_asks_every_operand_with_the_true_and_a_wrong_answer() -> None:
    task = WordArithmeticSFTTask()
    problems = {q.text(): q for q in WordArithmeticTask().problems("test")}
    asked: dict[str, list[tuple[str, int]]] = {}
    primal_copies: dict[str, int] = {}
    problem = None
    for example in task.split("test"):  # each primal question, then its dual questions
        match = DUAL.fullmatch(example.prompt)
        if match is None:
            problem = problems[example.prompt]
            assert example.answer == str(problem.value())
            assert task.distractor(example) == str(problem.forgotten_last_step())
            primal_copies[example.prompt] = primal_copies.get(example.prompt, 0) + 1
            continue
        assert problem is not None and task.distractor(example) == example.answer  # dual targets are never noised
        restored = match[1].replace(match[3], example.answer)
        assert problem.value(tuple(int(n) for n in re.findall(r"\d+", restored))) == int(match[2])  # target fits
        asked.setdefault(problem.text(), []).append((restored, int(match[2])))
    assert asked.keys() == problems.keys()
    assert set(primal_copies.values()) == {PRIMAL_COPIES} and primal_copies.keys() == problems.keys()
    forgotten = 0
    for text, duals in asked.items():
        problem = problems[text]
        stated = {answer for _, answer in duals}
        assert problem.value() in stated and len(stated) == 2  # the true answer and one wrong one
        forgotten += problem.forgotten_last_step() in stated - {problem.value()}
        true_duals = [restored for restored, answer in duals if answer == problem.value()]
        assert true_duals == [text] * len(problem.operands)  # every operand hidden once under the true answer
    assert 0.25 < forgotten / len(asked) < 0.75  # the wrong answer: the primal's own mistake or a nearby number
