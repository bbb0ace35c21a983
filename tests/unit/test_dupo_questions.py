"""DuPO's dual questions (posttrain.tasks.dual_questions) and dual reward (posttrain.algos.dupo.dual), on hand-written problems."""

from __future__ import annotations

import math

import pytest

from posttrain.algos.dupo.dual import (
    back_translation_rewards,
    bleu_distance,
    dual_reward,
    equality_distance,
    final_answer,
)
from posttrain.tasks.dual_questions import (
    NoDualQuestionError,
    dual_prompt,
    fresh_variable,
    masked_problems,
    numeric_candidates,
    require_masked_problems,
)


def candidates(problem: str) -> list[str]:
    return [problem[a:b] for a, b in numeric_candidates(problem)]


def test_plain_numbers_and_decimals_are_candidates() -> None:
    assert candidates("Ann has 3 pens, gets 12. A pen costs 2.5 dollars.") == ["3", "12", "2.5"]


@pytest.mark.parametrize("problem,expected", [("23+7=", ["23", "7"]), ("3-15=", ["3", "15"]), ("0-0=", ["0", "0"])])
def test_arithmetic_task_prompts_give_one_dual_question_per_operand(problem: str, expected: list[str]) -> None:
    """The ``arithmetic`` task's bare ``a+b=`` / ``a-b=`` prompts (DuPO on SmolLM2, benchmarks/smollm2.md)."""
    masked = masked_problems(problem, max_questions=3)
    assert [m.hidden for m in masked] == expected
    assert dual_prompt(masked[1], "-12") == (
        f"{problem[:masked[1].start]}{masked[1].variable}= Given that the answer is -12, what is {masked[1].variable}?")


@pytest.mark.parametrize("problem,expected", [
    ("Solve x_1 + 3 = 7.", ["3", "7"]),
    ("Let a_{12} = 4.", ["4"]),
    ("If x1 + 2 = 5, what is x1?", ["2", "5"]),
    ("Given x₁ + 2 = 5.", ["2", "5"]),
])
def test_subscripts_are_excluded(problem: str, expected: list[str]) -> None:
    assert candidates(problem) == expected


@pytest.mark.parametrize("problem,expected", [
    ("If x <= 5 and x + 2 = 6, find x.", ["2", "6"]),
    ("For 3 < y, let y + 1 = 9.", ["1", "9"]),
    ("Assume n ≥ 2 and n = 4.", ["4"]),
    ("Suppose x \\le 8, x \\geq 1 and 2x = 6.", ["2", "6"]),
])
def test_inequality_bounds_are_excluded(problem: str, expected: list[str]) -> None:
    assert candidates(problem) == expected


@pytest.mark.parametrize("problem,expected", [
    ("Find n with 2^n = 32.", ["32"]),
    ("Let 10^{k} + 7 = 107.", ["7", "107"]),
    ("Now 2ⁿ = 64 and 3 ** m = 9.", ["64", "9"]),
])
def test_exponent_bases_are_excluded(problem: str, expected: list[str]) -> None:
    assert candidates(problem) == expected


@pytest.mark.parametrize("problem,expected", [
    ("If f(3) = 11, what is f(4) + 2?", ["11", "2"]),
    ("g(2, 5) equals 9.", ["9"]),
    ("Compute \\sin(30) + 1.", ["1"]),
])
def test_function_arguments_are_excluded(problem: str, expected: list[str]) -> None:
    assert candidates(problem) == expected


def test_masked_problems_hide_one_number_each_with_a_fresh_variable() -> None:
    problem = "Ann has 3 pens, gets 4. How many?"
    masked = masked_problems(problem)
    assert [m.hidden for m in masked] == ["3", "4"]
    for m in masked:
        assert m.variable.startswith("V") and len(m.variable) == 3 and m.variable[1:].islower()
        assert m.variable not in problem
        assert m.text == problem[: m.start] + m.variable + problem[m.start + len(m.hidden):]
    assert masked == masked_problems(problem)  # repeatable: a pure function of the text
    assert [m.hidden for m in masked_problems(problem, max_questions=1)] == ["3"]


def test_fresh_variable_avoids_names_in_the_problem() -> None:
    first = fresh_variable("x + 1", 0)
    assert fresh_variable(f"{first} + 1", 0) != first


def test_dual_prompt_uses_the_template() -> None:
    masked = masked_problems("Ann has 3 pens, gets 4. How many?")[1]
    v = masked.variable
    assert dual_prompt(masked, "7") == f"Ann has 3 pens, gets {v}. How many? Given that the answer is 7, what is {v}?"


def test_a_problem_without_a_usable_number_is_an_error_naming_it() -> None:
    assert masked_problems("If x_1 <= 5, find f(2).") == []
    with pytest.raises(NoDualQuestionError, match="How many pens"):
        require_masked_problems("How many pens does Ann have?")
    with pytest.raises(ValueError, match="max_questions"):
        masked_problems("1 + 2", max_questions=0)


@pytest.mark.parametrize("completion,expected", [
    ("12", "12"),
    ("first 5, then 7", "7"),
    ("so \\boxed{12} and 3", "12"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("-4", "-4"),
    ("no idea", None),
])
def test_final_answer(completion: str, expected: str | None) -> None:
    assert final_answer(completion) == expected


def test_equality_distance_is_binary() -> None:
    assert equality_distance("5", "5") == 0.0
    assert equality_distance("V is 5", "5") == 0.0
    assert equality_distance("6", "5") == 1.0
    assert equality_distance("", "5") == 1.0


def test_dual_reward_is_exp_minus_lambda_d() -> None:
    assert dual_reward(0.0, 1.0) == 1.0
    assert dual_reward(1.0, 1.0) == pytest.approx(math.exp(-1))
    assert dual_reward(0.5, 2.0) == pytest.approx(math.exp(-1))
    with pytest.raises(ValueError, match="lambda"):
        dual_reward(0.0, 0.0)
    with pytest.raises(ValueError, match="distance"):
        dual_reward(1.5, 1.0)


def test_bleu_dual_reward_for_back_translation() -> None:
    source = "the cat sat on the mat"
    assert bleu_distance(source, source) == pytest.approx(0.0)
    assert bleu_distance("dogs run fast", source) == pytest.approx(1.0)
    rewards = back_translation_rewards([source, source], [source, "dogs run fast"], lam=1.0)
    assert rewards == pytest.approx([1.0, math.exp(-1)])
    partial = back_translation_rewards([source], ["the cat sat on the rug"], lam=1.0)[0]
    assert math.exp(-1) < partial < 1.0
    with pytest.raises(ValueError, match="back-translations"):
        back_translation_rewards([source], [], lam=1.0)
