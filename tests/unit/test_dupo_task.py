"""The word-arithmetic task (DuPO's embedded default) and its primal + dual warm-start data."""

from __future__ import annotations

import re

from posttrain.tasks.dual_questions import masked_problems
from posttrain.tasks.word_arithmetic import WordArithmeticSFTTask, WordArithmeticTask, WordProblem


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


def test_sft_dual_targets_are_the_operands_the_stated_answer_implies() -> None:
    task = WordArithmeticSFTTask()
    examples = task.split("test")
    primal, dual = examples[0::2], examples[1::2]
    assert [e.prompt for e in primal] == [e.prompt for e in WordArithmeticTask().split("test")]
    problems = {q.text(): q for q in WordArithmeticTask().problems("test")}
    stated_wrong = 0
    for p, d in zip(primal, dual):
        match = re.fullmatch(r"(.*) Given that the answer is (-?\d+), what is (V[a-z]+)\?", d.prompt)
        assert match, d.prompt
        stated_wrong += match[2] != p.answer
        restored = match[1].replace(match[3], d.answer)
        problem = problems[p.prompt]
        numbers = tuple(int(n) for n in re.findall(r"\d+", restored))
        assert problem.value(numbers) == int(match[2])  # the target makes the stated answer true
        assert task.distractor(d) == d.answer  # dual targets are never noised
        assert task.distractor(p) == str(problem.forgotten_last_step())
    assert 0.3 < stated_wrong / len(dual) < 0.6  # about half state a wrong answer (some fall back to the true one)
