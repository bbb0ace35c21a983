"""Span-level feedback of a generative reward model, and its robust parser (Text2Grad, arXiv 2505.22338).

Text2Grad's reward model reads a (prompt, response) pair and writes a critique plus the parts of the
response it judges, as JSON, in one of three forms (the ``form`` argument everywhere in this package):

``spans`` (the paper's UltraFeedback / SLF5K annotation)
    ``{"textual_feedback": critique, "good_spans": [...], "poor_spans": [...]}``
``code`` (KodCode)
    ``{"code_feedback": critique, "wrong_code": [...], "improvement_code": [...]}`` (the annotation prompt
    spells the critique key ``Code Feedback``)
``words`` (the SLF5K reward model's output)
    ``{"textual_feedback": critique, "word_score_list": [[word, -1 | 0 | 1], ...]}``

Any form may add ``"incomplete": true``: the response stops before it is done (steps missing at the end, an
empty answer). There is no text to quote for what is missing, so the scorer puts a poor mark on the response's
last token (the end-of-sequence token when one was sampled: where the policy chose to stop) and the verdict is
-1. The paper's forms have no such field (its tasks judge the text that is there); it is this package's
extension, written by ``posttrain.tasks.step_arithmetic.program_feedback`` and learned by the embedded reward
model.

``parse_feedback(text, form)`` returns a ``SpanFeedback`` or raises ``FeedbackParseError`` (a
``ValueError``) whose message names what was wrong, down to the field and list index
(``poor_spans[1]: expected a string, got int``). It accepts what generative models actually write:
code fences, prose before and after the object, several objects (the first one carrying a field of
the form wins), keys in the paper's variants, any case, with spaces, dashes or underscores
(``Code Feedback`` = ``code_feedback``). Span strings are stripped and empty ones dropped, as the paper's
``clean_spans`` does.

Deviations from the paper's code: its parsers fall back to regular expressions over broken JSON and
silently turn a malformed field into an empty list (so a garbled output becomes "nothing marked"); here
malformed output is an error, so the caller can mask the sample and count it instead of training on a
reward nobody gave. A missing list field is empty (the paper allows 0 spans), but an object with none
of the form's fields is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

FORMS = ("spans", "code", "words")

_CRITIQUE_KEYS = {"spans": ("textual_feedback", "critique", "feedback"),
                  "code": ("code_feedback", "textual_feedback", "critique", "feedback"),
                  "words": ("textual_feedback", "critique", "feedback")}
_LIST_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "spans": {"good": ("good_spans", "good"), "poor": ("poor_spans", "poor", "bad_spans")},
    "code": {"wrong": ("wrong_code", "wrong"), "improvable": ("improvement_code", "improvable_code", "improvable")},
    "words": {"word_scores": ("word_score_list", "word_scores")},
}
INCOMPLETE_KEYS = ("incomplete",)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


class FeedbackParseError(ValueError):
    """The reward model's output is not feedback of the requested form; the message says why."""


@dataclass(frozen=True)
class SpanFeedback:
    """One parsed feedback. Fields of the other forms stay empty (``good``/``poor`` for ``spans``,
    ``wrong``/``improvable`` for ``code``, ``word_scores`` for ``words``)."""

    form: str
    critique: str = ""
    good: tuple[str, ...] = ()
    poor: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()
    improvable: tuple[str, ...] = ()
    word_scores: tuple[tuple[str, int], ...] = ()
    incomplete: bool = False

    def __post_init__(self) -> None:
        check_form(self.form)

    @property
    def marks_anything(self) -> bool:
        """Whether any span or word score is given (a critique alone marks nothing; ``incomplete`` marks the last
        token, not a span)."""
        return bool(self.good or self.poor or self.wrong or self.improvable or self.word_scores)


def check_form(form: str) -> str:
    """``form`` when it is one of ``FORMS``, else a ``ValueError`` listing them."""
    if form not in FORMS:
        raise ValueError(f"unknown feedback form {form!r}; choose one of {', '.join(FORMS)}")
    return form


def _norm_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def _candidates(text: str) -> list[dict[str, Any]]:
    """Every JSON object in ``text`` (inside code fences first), in order of appearance."""
    fenced = [m.group(1) for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    for chunk in [*fenced, text]:
        start = chunk.find("{")
        while start >= 0:
            try:
                value, end = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                start = chunk.find("{", start + 1)
                continue
            if isinstance(value, dict):
                found.append(value)
            start = chunk.find("{", end)
    return found


def _pick(obj: dict[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    keys = {_norm_key(k): k for k in obj if isinstance(k, str)}
    for name in names:
        if name in keys:
            return keys[name], obj[keys[name]]
    return None


def _strings(field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise FeedbackParseError(f"{field}: expected a list of strings, got {type(value).__name__}")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, str):
            raise FeedbackParseError(f"{field}[{i}]: expected a string, got {type(entry).__name__}")
        cleaned = entry.replace('\\"', '"').strip()
        if cleaned:
            out.append(cleaned)
    return tuple(out)


def _word_scores(field: str, value: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list):
        raise FeedbackParseError(f"{field}: expected a list of [word, score] pairs, got {type(value).__name__}")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise FeedbackParseError(f"{field}[{i}]: expected a [word, score] pair, got {entry!r}")
        word, score = entry
        if not isinstance(word, str):
            raise FeedbackParseError(f"{field}[{i}][0]: expected a string word, got {type(word).__name__}")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score not in (-1, 0, 1):
            raise FeedbackParseError(f"{field}[{i}][1]: expected a score of -1, 0 or 1, got {score!r}")
        out.append((word, int(score)))
    return tuple(out)


def feedback_from_object(obj: dict[str, Any], form: str) -> SpanFeedback:
    """A ``SpanFeedback`` from an already decoded JSON object (``FeedbackParseError`` naming the field)."""
    check_form(form)
    critique_field = _pick(obj, _CRITIQUE_KEYS[form])
    lists = {attr: _pick(obj, names) for attr, names in _LIST_KEYS[form].items()}
    if critique_field is None and all(v is None for v in lists.values()):
        wanted = [_CRITIQUE_KEYS[form][0], *(names[0] for names in _LIST_KEYS[form].values())]
        raise FeedbackParseError(f"the JSON object has none of the {form!r} fields ({', '.join(wanted)}); "
                                 f"keys: {sorted(map(str, obj))}")
    critique = ""
    if critique_field is not None:
        key, value = critique_field
        if not isinstance(value, str):
            raise FeedbackParseError(f"{key}: expected a string critique, got {type(value).__name__}")
        critique = value.strip()
    fields: dict[str, Any] = {}
    for attr, picked in lists.items():
        if picked is None:
            continue
        key, value = picked
        fields[attr] = _word_scores(key, value) if attr == "word_scores" else _strings(key, value)
    incomplete = _pick(obj, INCOMPLETE_KEYS)
    if incomplete is not None:
        key, value = incomplete
        if not isinstance(value, bool):
            raise FeedbackParseError(f"{key}: expected true or false, got {value!r}")
        fields["incomplete"] = value
    return SpanFeedback(form=form, critique=critique, **fields)


def parse_feedback(text: str, form: str) -> SpanFeedback:
    """Parse a reward model's output ``text`` as feedback of ``form`` (see the module docstring)."""
    check_form(form)
    if not isinstance(text, str):
        raise FeedbackParseError(f"expected the reward model's output text, got {type(text).__name__}")
    objects = _candidates(text)
    if not objects:
        snippet = text.strip()[:80]
        raise FeedbackParseError(f"no JSON object found in the output ({snippet!r})" if snippet
                                 else "the output is empty")
    names = {n for n in _CRITIQUE_KEYS[form]} | {n for names in _LIST_KEYS[form].values() for n in names}
    for obj in objects:
        if any(isinstance(k, str) and _norm_key(k) in names for k in obj):
            return feedback_from_object(obj, form)
    return feedback_from_object(objects[0], form)  # raises, naming the fields it lacks
