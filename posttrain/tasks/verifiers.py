"""Answer verifiers: exact match and mathematical equality (math-verify with a fast integer path).

``math_equal`` is called thousands of times per training run. Completions of the tiny models are
mostly bare integers, so a regex + ``int`` comparison answers those without the far costlier
``math_verify.parse``/``verify``; everything else goes to
math-verify, which extracts answers from surrounding text and LaTeX and never raises on garbage.
math-verify's 5 s time limits use ``signal.alarm``, which only works in the main thread; called from
any other thread (e.g. a reward server's workers) the limits are switched off.

A completion must state the value, not restate the problem: when the answer is a number, a completion whose
final expression is still a sum, a difference or a product of numbers (``"The answer is: 4-15."`` for -11)
is wrong even though math-verify would evaluate it to the answer. SmolLM2 trained with GRPO on ``arithmetic``
found exactly that exploit (``benchmarks/smollm2.md``). A fraction (``1/2``, ``50%``) still counts as a value.
"""

from __future__ import annotations

import functools
import re
import threading

_INTEGER = re.compile(r"[+-]?\d+")


def _normalise(text: str) -> str:
    return " ".join(text.strip().split())


def exact_match(completion: str, answer: str) -> bool:
    """True when the two strings are equal after trimming and collapsing whitespace."""
    return _normalise(completion) == _normalise(answer)


@functools.lru_cache(maxsize=65536)
def math_equal(completion: str, answer: str) -> bool:
    """True when ``completion`` states a value mathematically equal to ``answer``.

    Bare integers are compared directly; anything else is parsed by math-verify (which finds the
    answer inside text such as "so the answer is 19" or ``\\boxed{19}``). Garbage gives False.
    """
    got, want = completion.strip(), answer.strip()
    if _INTEGER.fullmatch(want) and _INTEGER.fullmatch(got):
        return int(got) == int(want)
    from math_verify import parse, verify  # imported on first use: it pulls in sympy

    limit = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(want, parsing_timeout=limit)
    predicted = parse(got, parsing_timeout=limit)
    if not gold or not predicted:
        return False
    if getattr(gold[0], "is_Number", False) and restates_a_computation(predicted[0]):
        return False
    return bool(verify(gold, predicted, timeout_seconds=limit))


def restates_a_computation(expression: object) -> bool:
    """True when ``expression`` (math-verify's parsed value) is an unevaluated computation on numbers: a sum or
    difference anywhere in it, or a product with more than one factor that is not a divisor (``3*4``; ``1/2``
    and ``50%`` are products with one divisor, and count as values)."""
    import sympy

    if not isinstance(expression, sympy.Basic):
        return False
    if expression.has(sympy.Add):
        return True
    for product in expression.atoms(sympy.Mul):  # the expression itself included
        factors = [f for f in product.args if not _is_divisor(f)]
        if len(factors) > 1:
            return True
    return False


def _is_divisor(factor: object) -> bool:
    """``1/x`` inside a product: ``Pow(x, -1)``, or the number ``1/q`` that ``50%`` parses to."""
    import sympy

    if isinstance(factor, sympy.UnevaluatedExpr):
        factor = factor.args[0]
    if isinstance(factor, sympy.Pow):
        return factor.exp == -1
    return isinstance(factor, sympy.Rational) and not factor.is_Integer and abs(factor.p) == 1


_ANSWER_LINE = re.compile(r"^[ \t]*Answer:(.*)$", re.MULTILINE)
_INTEGER_LITERAL = re.compile(r"\s*([+-]?\d+)\s*\.?\s*")


def answer_line_integer(completion: str) -> int | None:
    """The integer on the last line of ``completion`` that opens with ``Answer:``, or None when there is no
    such line or it holds anything but one integer literal (optionally a trailing period and whitespace).

    Strict where ``math_equal`` is lenient: nothing is evaluated, so ``Answer: 48/4``, ``Answer: 12^1`` or
    ``Answer: 4 - 15 = -11`` give None even when their value is the answer.
    """
    lines = _ANSWER_LINE.findall(completion)
    if not lines:
        return None
    match = _INTEGER_LITERAL.fullmatch(lines[-1])
    return int(match.group(1)) if match else None
