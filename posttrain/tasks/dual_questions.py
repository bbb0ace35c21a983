"""DuPO's dual questions for math text (She et al. 2025, "DuPO: Enabling Reliable LLM Self-Verification via
Dual Preference Optimization", arXiv 2508.14460, Appendix A).

A primal problem x is split into a known part x_k and an unknown part x_u: one number of the problem text
is the unknown. ``masked_problems`` finds the numeric candidates, replaces one of them by a fresh variable
name (``Vsk``, ``Vrj``: "V" plus random lowercase letters, as in the paper's case study) and returns one
``MaskedProblem`` per candidate, so one primal problem yields several dual questions. ``dual_prompt``
completes a masked problem with a candidate answer y into the dual question T_cd(y, x_k):

    "<problem with the variable> Given that the answer is {answer}, what is {variable}?"

Numbers the paper excludes from the candidates, because hiding them gives no well-posed dual question:

- subscripts: ``x_1``, ``a_{12}``, ``x1``, ``x₁`` (a digit glued to the end of a name or after ``_``);
- inequality bounds: ``x <= 5``, ``3 < y``, ``x \\le 5``, ``n ≥ 2`` (a number on either side of a comparison);
- common exponent bases: ``2^n``, ``10^{k}``, ``2ⁿ`` (a number raised to a power);
- function arguments: ``f(3)``, ``g(2, 5)``, ``\\sin(30)`` (a number inside the parentheses of a call).

Variable names are a pure function of the problem text and the candidate's position (no global RNG), so the
same problem always gives the same dual questions, on every rank and after a resume.

The translation dual (the paper's other setting) hides the whole source sentence: ``translation_request``
reads a primal prompt "Translate {source language} to {target language}: {sentence}" and
``back_translation_prompt`` asks for a translation y back: "Translate {target} to {source}: {y}".
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

DUAL_TEMPLATE = "{problem} Given that the answer is {answer}, what is {variable}?"
"""The dual question (the paper's Appendix A template, shortened for the tiny models' context)."""

_NUMBER = re.compile(r"(?<![0-9.])[0-9]+(?:\.[0-9]+)?(?![0-9])")
_SUBSCRIPT_BEFORE = re.compile(r"(?:[A-Za-z]|_\{?)$")
_COMPARISON_BEFORE = re.compile(r"(?:<|>|≤|≥|\\le(?:q)?|\\ge(?:q)?|\\lt|\\gt|\\leqslant|\\geqslant)\s*=?\s*$")
_COMPARISON_AFTER = re.compile(r"^\s*(?:<|>|≤|≥|\\le(?:q)?\b|\\ge(?:q)?\b|\\lt\b|\\gt\b|\\leqslant|\\geqslant)")
_EXPONENT_AFTER = re.compile(r"^(?:\s*\^|\s*\*\*|[⁰¹²³⁴⁵⁶⁷⁸⁹ⁿᵏˣʸᵐ⁺⁻])")
_FUNCTION_CALL = re.compile(r"(?:\\?[A-Za-z]+)\(([^()]*)\)")


@dataclass(frozen=True)
class MaskedProblem:
    """A primal problem with one number (``hidden``, the unknown x_u) replaced by ``variable``."""

    text: str
    """The problem with the variable in place of the hidden number."""
    variable: str
    """The fresh variable name, e.g. ``Vsk``."""
    hidden: str
    """The number that was replaced, as written in the problem (what the dual must recover)."""
    start: int
    """Character offset of the hidden number in the original problem."""


DualMasker = Callable[[str, int | None], list[MaskedProblem]]
"""What builds a prompt's dual questions: ``masked_problems``, or a task's own (the task class's
``masked_problems``, e.g. ``multistep_word.story_masked_problems``)."""


def _function_argument_spans(problem: str) -> list[tuple[int, int]]:
    return [match.span(1) for match in _FUNCTION_CALL.finditer(problem)]


def numeric_candidates(problem: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the numbers in ``problem`` that may be hidden, in text order.

    Subscripts, inequality bounds, exponent bases and function arguments are excluded (module docstring).
    """
    calls = _function_argument_spans(problem)
    spans = []
    for match in _NUMBER.finditer(problem):
        start, end = match.span()
        before, after = problem[:start], problem[end:]
        if _SUBSCRIPT_BEFORE.search(before):
            continue
        if _COMPARISON_BEFORE.search(before) or _COMPARISON_AFTER.search(after):
            continue
        if _EXPONENT_AFTER.search(after):
            continue
        if any(low <= start and end <= high for low, high in calls):
            continue
        spans.append((start, end))
    return spans


def fresh_variable(problem: str, index: int, letters: int = 2) -> str:
    """A name "V" + ``letters`` lowercase letters that does not occur in ``problem``.

    Drawn from a ``random.Random`` seeded by a hash of (problem, index): repeatable, and different for the
    different candidates of one problem."""
    digest = hashlib.sha256(f"{index}\x00{problem}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    for _ in range(1000):
        name = "V" + "".join(rng.choice(string.ascii_lowercase) for _ in range(letters))
        if name not in problem:
            return name
    raise ValueError(f"no fresh variable name of {letters} letters is free in the problem {problem[:80]!r}")


def masked_problems(problem: str, max_questions: int | None = None) -> list[MaskedProblem]:
    """One masked problem per numeric candidate (at most ``max_questions``, the first ones in the text).

    An empty list means the problem has no usable number: callers count it (DuPO filters the problem out)
    or raise ``NoDualQuestionError`` through ``require_masked_problems``."""
    if max_questions is not None and max_questions < 1:
        raise ValueError(f"max_questions must be >= 1 or None, got {max_questions}")
    spans = numeric_candidates(problem)[:max_questions]
    masked = []
    for index, (start, end) in enumerate(spans):
        variable = fresh_variable(problem, index)
        masked.append(MaskedProblem(text=problem[:start] + variable + problem[end:], variable=variable,
                                    hidden=problem[start:end], start=start))
    return masked


class NoDualQuestionError(ValueError):
    """A problem with no number that a dual question can hide."""


def require_masked_problems(problem: str, max_questions: int | None = None) -> list[MaskedProblem]:
    """``masked_problems``, but a problem without a usable number raises ``NoDualQuestionError`` naming it."""
    masked = masked_problems(problem, max_questions)
    if not masked:
        raise NoDualQuestionError(
            f"problem {problem[:80]!r} has no number a dual question can hide (numbers that are subscripts, "
            "inequality bounds, exponent bases or function arguments are excluded)")
    return masked


TRANSLATION_TEMPLATE = "Translate {source} to {target}: {text}"
"""A translation prompt: the primal question of the translation dual, and (languages swapped) its dual."""
_TRANSLATION = re.compile(r"^Translate (?P<source>\S+) to (?P<target>\S+): (?P<text>.+)$", re.DOTALL)


@dataclass(frozen=True)
class TranslationRequest:
    """A primal translation prompt's parts: the sentence x (the dual's unknown) and its two languages."""

    source: str
    target: str
    text: str


def translation_request(prompt: str) -> TranslationRequest:
    """The parts of a prompt written as ``TRANSLATION_TEMPLATE``; any other prompt raises ``ValueError``
    naming it."""
    match = _TRANSLATION.match(prompt.strip())
    if match is None:
        raise ValueError(f"prompt {prompt[:80]!r} is not a translation request "
                         f"({TRANSLATION_TEMPLATE.format(source='A', target='B', text='...')!r})")
    return TranslationRequest(match["source"], match["target"], match["text"].strip())


def back_translation_prompt(request: TranslationRequest, translation: str) -> str:
    """The dual question: translate ``translation`` back from the request's target to its source language."""
    return TRANSLATION_TEMPLATE.format(source=request.target, target=request.source, text=translation.strip())


def dual_prompt(masked: MaskedProblem, answer: str, template: str = DUAL_TEMPLATE) -> str:
    """The dual question: ``template`` filled with the masked problem, the candidate answer and the variable."""
    return template.format(problem=masked.text, answer=answer, variable=masked.variable)
