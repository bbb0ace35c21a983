"""DuPO's dual on ``multistep-word`` (hand-made problems): the dual questions hide the story's numbers, never
the worked example's; the primal answer is the ``Answer:`` line's; ``--algo dupo`` picks both for this task and
keeps the generic math dual elsewhere."""

from __future__ import annotations

import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.dupo.algo import DuPO, DuPOConfig
from posttrain.algos.dupo.dual import final_answer
from posttrain.metrics import PhaseTimer
from posttrain.tasks.dual_questions import dual_prompt, masked_problems
from posttrain.tasks.multistep_word import (
    EXAMPLE,
    INSTRUCTION,
    MultistepWordTask,
    stated_answer,
    story_masked_problems,
)

STORY = "Eva has 7 cards. Then she gets 5 more. Then she gives 3 away. How many cards does she have now?"
PROMPT = f"{EXAMPLE}\n\n{INSTRUCTION}\nProblem: {STORY}"


def test_one_dual_question_per_number_of_the_story() -> None:
    masked = story_masked_problems(PROMPT)
    assert [m.hidden for m in masked] == ["7", "5", "3"]
    assert [PROMPT[m.start:m.start + len(m.hidden)] for m in masked] == ["7", "5", "3"]
    first = masked[0]
    assert first.text == STORY.replace("7", first.variable)
    assert "example" not in first.text and "Answer" not in first.text
    assert dual_prompt(first, "9") == (f"Eva has {first.variable} cards. Then she gets 5 more. Then she gives 3 "
                                       f"away. How many cards does she have now? Given that the answer is 9, "
                                       f"what is {first.variable}?")


def test_the_generic_dual_would_hide_the_worked_examples_numbers() -> None:
    assert [m.hidden for m in masked_problems(PROMPT, 3)] == ["3", "2", "2"]  # Ann's 3 pens, 2 more, 2 times


def test_max_questions_keeps_the_first_numbers_and_division_operands_count() -> None:
    assert [m.hidden for m in story_masked_problems(PROMPT, 1)] == ["7"]
    prompt = (f"{EXAMPLE}\n\n{INSTRUCTION}\nProblem: Tom has 4 eggs. Then he shares them equally among 2 friends "
              "and keeps one share. Then he ends up with 2 times as many. How many eggs does he have now?")
    assert [m.hidden for m in story_masked_problems(prompt)] == ["4", "2", "2"]


def test_a_prompt_without_a_problem_line_is_an_error() -> None:
    try:
        story_masked_problems("Ann has 3 pens.")
    except ValueError as err:
        assert "Ann has 3 pens." in str(err) and "Problem:" in str(err)
    else:
        raise AssertionError("a prompt without 'Problem:' built dual questions")


def test_every_task_prompt_gets_its_storys_numbers() -> None:
    for example in MultistepWordTask(size=40, test_size=8).split("test"):
        masked = story_masked_problems(example.prompt)
        assert len(masked) == 1 + example.columns["operations"]
        assert all(example.prompt.rfind("Problem: ") < m.start for m in masked)


def test_the_stated_answer_is_the_answer_lines() -> None:
    assert stated_answer("7 + 5 = 12. 12 - 3 = 9.\nAnswer: 9\n\nThe answer is 9 cards, 2 more than 7.") == "9"
    assert stated_answer("12 - 3 = 9.\nAnswer: 12/4") is None
    assert stated_answer("7 + 5 = 12. 12 - 3 = 9.") is None


def test_dupo_takes_the_tasks_dual_and_the_generic_one_elsewhere() -> None:
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, timer=PhaseTimer(), device=torch.device("cpu"))
    word = DuPO(DuPOConfig(algo="dupo", task="multistep-word", dual_solver="policy"), ctx).dual_settings(1)
    assert (word.masker, word.stated_answer) == (story_masked_problems, stated_answer)
    arithmetic = DuPO(DuPOConfig(algo="dupo", task="word-arithmetic", dual_solver="policy"), ctx).dual_settings(1)
    assert (arithmetic.masker, arithmetic.stated_answer) == (masked_problems, final_answer)
