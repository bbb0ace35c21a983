"""Answer verifiers: exact match and mathematical equality (math-verify with a fast integer path).

``math_equal`` is called thousands of times per training run. Completions of the tiny models are
mostly bare integers, so a regex + ``int`` comparison answers those without math-verify (measured: about 1 us
against 1-4 ms per call through ``math_verify.parse``/``verify``); everything else goes to
math-verify, which extracts answers from surrounding text and LaTeX and never raises on garbage.
math-verify's 5 s time limits use ``signal.alarm``, which only works in the main thread; called from
any other thread (e.g. a reward server's workers) the limits are switched off.
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
    return bool(verify(gold, predicted, timeout_seconds=limit))
