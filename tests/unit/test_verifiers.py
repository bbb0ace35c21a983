"""Answer verifiers: exact match and math equality (fast integer path and math-verify fallback)."""

from __future__ import annotations

import threading

import pytest

from posttrain.tasks.verifiers import exact_match, math_equal


@pytest.mark.parametrize(("completion", "answer"), [
    ("19", "19"),
    (" 19\n", "19"),
    ("-3", "-3"),
    ("+7", "7"),
    ("007", "7"),
    ("The answer is 19.", "19"),
    ("\\boxed{19}", "19"),
    ("0.5", "1/2"),
    ("\\frac{1}{2}", "0.5"),
    ("4 - 15 = -11", "-11"),  # the computation shown, then its value
    ("The result is 4 - 15, which is -11.", "-11"),
    ("The number 9 + 3 = 12.", "12"),
    ("1/2", "\\frac{1}{2}"),  # a fraction is a value
    ("50%", "0.5"),
    ("1,000", "1000"),
])
def test_math_equal_accepts(completion: str, answer: str) -> None:
    assert math_equal(completion, answer)


@pytest.mark.parametrize(("completion", "answer"), [
    ("18", "19"),
    ("-19", "19"),
    ("", "19"),
    ("   ", "19"),
    ("))((**", "19"),
    ("<unk><unk>", "3"),
    ("1" * 500, "19"),
    ("\\frac{", "2"),
    ("nineteen", "19"),
    ("19", ""),
])
def test_math_equal_rejects_without_raising(completion: str, answer: str) -> None:
    assert not math_equal(completion, answer)


@pytest.mark.parametrize(("completion", "answer"), [
    ("The answer is: 4-15.", "-11"),  # SmolLM2's GRPO exploit: math-verify alone evaluates these to the answer
    ("\\boxed{4-15}", "-11"),
    ("9+3", "12"),
    ("3*4", "12"),
    ("2\\cdot 6", "12"),
])
def test_math_equal_rejects_a_restated_computation(completion: str, answer: str) -> None:
    assert not math_equal(completion, answer)


def test_exact_match_normalises_whitespace_only() -> None:
    assert exact_match("  a  b\n", "a b")
    assert not exact_match("A b", "a b")
    assert not exact_match("19.0", "19")


def test_math_equal_works_off_the_main_thread() -> None:
    results: list[tuple[bool, bool]] = []
    worker = threading.Thread(target=lambda: results.append(
        (math_equal("so \\frac{1}{2}", "0.5"), math_equal("junk ((", "2"))))
    worker.start()
    worker.join()
    assert results == [(True, False)]
