"""Read an mR3 verdict ("reasoning, then JSON {explanation, score}") from raw model output, robustly.

``parse_verdict`` never raises on model output. It returns a ``Verdict`` whose ``parse_ok`` says whether
a score from the allowed set was found, and whose ``error`` says why not. Handled:

- reasoning closed by ``</think>`` (opening ``<think>`` optional: mR3 forces it in the prompt);
- no ``</think>`` at all (a non-thinking model, or output truncated at max_tokens): the last JSON
  verdict in the text is still used; if none, ``error`` says the output looks truncated;
- extra text around the JSON, Markdown fences, several JSON objects (the last with a ``score`` wins),
  Python-dict syntax (single quotes, True/False), trailing commas;
- no JSON at all: the official fallback, a regex on ``score: ...``;
- wrong types (``5``, ``5.0``, ``true``), case and spacing (``assistant a``), and aliases (``A``,
  ``Response A``, ``[[A]]``, ``yes``/``no`` for binary, ``4/5`` for numeric scales).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewards.mr3.templates import THINK_CLOSE, THINK_OPEN


@dataclass
class Verdict:
    """What could be read from one model output."""

    score: str | None  # a canonical allowed value, or None
    explanation: str = ""
    reasoning: str = ""
    parse_ok: bool = False
    error: str | None = None  # why the score could not be read (None when parse_ok)
    raw_score: Any = None  # what the model wrote in the score field, before normalisation
    warnings: list[str] = field(default_factory=list)


_DECODER = json.JSONDecoder()
_SCORE_RE = re.compile(r"""["']?score["']?\s*[:=]\s*["']?\s*([^"',}\n]+?)\s*["']?\s*(?:[,}\n]|$)""", re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_ALIASES = {
    "a": "Assistant A", "assistant a": "Assistant A", "response a": "Assistant A", "[[a]]": "Assistant A",
    "b": "Assistant B", "assistant b": "Assistant B", "response b": "Assistant B", "[[b]]": "Assistant B",
    "assistant_a": "Assistant A", "assistant_b": "Assistant B", "model a": "Assistant A", "model b": "Assistant B",
    "tie": "Tie", "both bad": "Both Bad", "both_bad": "Both Bad",
    "yes": "true", "correct": "true", "no": "false", "incorrect": "false",
}


def split_reasoning(text: str) -> tuple[str, str, bool]:
    """``(reasoning, answer_part, closed)``: text before/after the last ``</think>``."""
    if THINK_CLOSE in text:
        reasoning, _, answer = text.rpartition(THINK_CLOSE)
        reasoning = reasoning.split(THINK_OPEN, 1)[-1] if THINK_OPEN in reasoning else reasoning
        return reasoning.strip(), answer, True
    return "", text, False


def _candidate_objects(text: str, max_tries: int = 64) -> list[tuple[int, Any]]:
    """Dicts decodable from the last ``max_tries`` ``{`` of ``text``, latest first: (start, object).

    Bounded so that long outputs full of braces (code) cost O(max_tries * len) at worst."""
    found: list[tuple[int, Any]] = []
    starts = [m.start() for m in re.finditer(r"\{", text)][-max_tries:]
    for start in reversed(starts):
        try:
            obj, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            obj = _lenient(text, start)
        if isinstance(obj, dict):
            found.append((start, obj))
    return found


def _lenient(text: str, start: int) -> Any:
    """Python-dict syntax or trailing commas: find the balanced ``{...}`` and try harder."""
    depth, end = 0, None
    in_str: str | None = None
    i, stop = start, min(len(text), start + 20000)
    while i < stop:
        ch = text[i]
        i += 1
        if in_str:
            if ch == "\\":
                i += 1  # skip the escaped character
            elif ch == in_str:
                in_str = None
        elif ch in "\"'":
            in_str = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end is None:
        return None
    chunk = _TRAILING_COMMA.sub(r"\1", text[start:end])
    try:
        return json.loads(chunk)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(chunk)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def normalise_score(raw: Any, allowed: Sequence[str] | None) -> tuple[str | None, str | None]:
    """Map what the model wrote to an allowed value: ``(value, None)`` or ``(None, reason)``."""
    if raw is None:
        return None, "the score is null"
    if isinstance(raw, bool):
        text = "true" if raw else "false"
    elif isinstance(raw, (int, float)):
        text = str(int(raw)) if float(raw).is_integer() else str(raw)
    elif isinstance(raw, str):
        text = raw.strip().strip("*").strip()
    elif isinstance(raw, list) and len(raw) == 1:
        return normalise_score(raw[0], allowed)
    else:
        return None, f"the score has unsupported type {type(raw).__name__}"
    if not text:
        return None, "the score is empty"
    if allowed is None:
        return text, None
    by_lower = {v.lower(): v for v in allowed}
    lowered = text.lower()
    if lowered in by_lower:
        return by_lower[lowered], None
    alias = _ALIASES.get(lowered)
    if alias and alias.lower() in by_lower:
        return by_lower[alias.lower()], None
    if lowered in ("1", "0") and set(by_lower) == {"true", "false"}:
        return by_lower["true" if lowered == "1" else "false"], None
    numeric = re.match(r"^\s*(-?\d+(?:\.0+)?)\s*(?:/\s*\d+|out of \d+|points?)?\s*$", lowered)
    if numeric:
        number = str(int(float(numeric.group(1))))
        if number in by_lower:
            return by_lower[number], None
    return None, f"score {text!r} is not one of {list(allowed)}"


def parse_verdict(text: str | None, allowed: Sequence[str] | None = None) -> Verdict:
    """Read reasoning, explanation and score from ``text``; ``allowed`` = the permitted score values."""
    if text is None or not str(text).strip():
        return Verdict(score=None, error="empty output")
    text = str(text)
    reasoning, answer, closed = split_reasoning(text)
    warnings: list[str] = []
    if not closed:
        warnings.append("no </think>: reasoning was not closed (truncated output or a non-thinking model)")
    objects = [(s, o) for s, o in _candidate_objects(answer) if "score" in {str(k).lower() for k in o}]
    if objects:
        start, obj = objects[0]  # the latest verdict in the text
        if not closed:
            reasoning = answer[:start].strip()
        lowered = {str(k).lower(): v for k, v in obj.items()}
        raw = lowered.get("score")
        explanation = lowered.get("explanation", "")
        if not isinstance(explanation, str):
            warnings.append(f"explanation had type {type(explanation).__name__}; converted to text")
            explanation = json.dumps(explanation) if not isinstance(explanation, str) else explanation
        score, why = normalise_score(raw, allowed)
        return Verdict(score=score, explanation=explanation, reasoning=reasoning, parse_ok=score is not None,
                       error=why, raw_score=raw, warnings=warnings)
    matches = list(_SCORE_RE.finditer(answer))
    if matches:
        raw = matches[-1].group(1)
        score, why = normalise_score(raw, allowed)
        if not closed:
            reasoning = answer[: matches[-1].start()].strip()
        warnings.append("no JSON verdict; score read with the 'score:' fallback")
        return Verdict(score=score, reasoning=reasoning, parse_ok=score is not None, error=why, raw_score=raw,
                       warnings=warnings)
    if not closed:
        error = "no </think> and no JSON verdict: output truncated before the answer?"
    elif _candidate_objects(answer):
        error = "the JSON after </think> has no 'score' field"
    elif "{" in answer:
        error = "malformed JSON after </think> and no 'score:' field"
    else:
        error = "no JSON object and no 'score:' field after </think>"
    return Verdict(score=None, reasoning=reasoning, error=error, warnings=warnings)
