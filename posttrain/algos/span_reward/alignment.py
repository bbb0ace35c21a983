"""Span feedback -> character rewards -> token rewards, for any tokenizer (Text2Grad, arXiv 2505.22338).

Three steps, each a pure function:

1. ``match_span(span, response)``: where a quoted span sits in the response. Generative reward models
   misquote, so the search follows the paper's code: an exact match; a match after normalisation
   (lowercase, punctuation as spaces, whitespace collapsed); difflib ``SequenceMatcher`` over sliding
   windows (stride a quarter of the span, width twice the span; the extent aligned with the whole span, so a misquoted
   result digit stays inside) at thresholds 0.7, then 0.6, then 0.5
   (``THRESHOLDS``; a span under 5 characters gets 0.2 less, never below 0.5; a window holding a common
   block longer than 70% of the span counts as a 0.7 match); for spans over 10 characters, the front or
   the back half at the threshold minus 0.1; for spans over 5 words, the front or back half of the words
   found exactly.
2. ``char_rewards(feedback, response, rule)``: one reward per character under a ``SpanRule`` (``RULES``):

   ======== ===================================================================================
   spans    good span +1, poor span -1, rest 0; spans given but none found: every word 0.1
   code     every word +1 by default, ``wrong_code`` -1, ``improvement_code`` 0
   words    the word scores times the length decay w_t = sigmoid(-(t - 48) + 6)
   ======== ===================================================================================

   "Every word" means the non-whitespace characters; inside a matched span every character (interior
   spaces too) takes the span's value. Where spans overlap, poor/wrong wins over improvable, which wins
   over good. In the ``words`` rule ``t`` is the 0-based index of the *word* in the response (the word
   the score was aligned to), not a token index: the scores are per word, and a word index makes the
   weight the same under every tokenizer, whereas a token index would decay a character-level response
   after 54 characters and a byte-BPE one after about 40 words. Each score is aligned to the next
   response word equal to it after stripping surrounding punctuation and case, looking at most
   ``MAX_WORD_SKIP`` words ahead (the paper's greedy matcher allows 6 skips); unaligned scores are
   counted as unmatched.
3. ``token_char_spans(tokenizer, ids)``: each completion token's ``[start, end)`` in
   ``tokenizer.decode(ids, skip_special_tokens=True)``, from the tokenizer's offset mapping when
   re-encoding the decoded text reproduces the ids, otherwise by decoding growing prefixes (sampled ids
   are often not the canonical tokenization). Special tokens get empty spans; several byte tokens of one
   character (byte-level BPE splits emoji and CJK) all get that character. Nothing here knows any
   tokenizer's markers (``Ġ``, ``▁``) or special tokens by name.
   ``token_rewards(...)`` then gives each token the **mean** of its characters' rewards, whitespace
   characters left out (a byte-BPE token `` foo`` carries its leading space; counting it would shrink
   the reward of every word-initial token). The mean, not the largest magnitude: a token straddling a
   span boundary gets the share of its text inside the span (``14,`` with ``14`` in a poor span: -2/3),
   so the total reward a span gives does not depend on how a tokenizer happens to cut its edges, and a
   token covering both a good and a poor character is not decided by a tie-break. A whitespace-only
   token gets the mean of its (whitespace) characters, an empty span 0. Feedback that calls the response
   ``incomplete`` (steps missing at the end; nothing to quote) puts the rule's poor value on the last token:
   the end-of-sequence token when one was sampled, where the policy chose to stop.

Deviations from the paper's code: (a) a match's extent comes from difflib's matching blocks inside the
best window, where the paper takes the window start plus the span length; the half fallbacks are one
level deep, where the paper recurses with the threshold lowered 0.1 per level (down to near 0 for long
spans). (b) Rewards are painted on characters and averaged per token, where the paper scores whole words
(by their first character) and copies word scores onto tokens by greedy string matching that looks for
Llama-3's ``<|start_header_id|>assistant`` header and ``Ġ`` markers (other tokenizers silently got zero
rewards). (c) When the feedback marks nothing at all the ``spans`` rule gives zeros (``SpanRule.empty``;
the paper's code gave 0.1 there too, a bonus for length); the 0.1 fallback applies when spans were given
and none could be found, as the paper describes it. (d) Poor spans win overlaps (the paper's first match,
a good span, did).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from posttrain.tasks.span_feedback import SpanFeedback

THRESHOLDS = (0.7, 0.6, 0.5)
SHORT_SPAN_CHARS, SHORT_SPAN_RELAX, THRESHOLD_FLOOR = 5, 0.2, 0.5
BLOCK_SHARE = 0.7  # a common block longer than this share of the span counts as a 0.7 match
HALF_MIN_CHARS, HALF_RELAX = 10, 0.1
HALF_MIN_WORDS = 5
MAX_WORD_SKIP = 6
DECAY_CENTER, DECAY_SHIFT = 48, 6


@dataclass(frozen=True)
class SpanRule:
    """How feedback becomes character rewards (see the module docstring's table)."""

    name: str
    good: float = 1.0
    poor: float = -1.0  # poor spans and wrong code
    improvable: float = 0.0
    default: float = 0.0  # every other word
    no_match: float | None = 0.1  # every word, when spans were given and none was found (None: off)
    empty: float | None = None  # every word, when nothing is marked (None: ``default``)
    length_decay: bool = False  # word scores times sigmoid(-(t - 48) + 6), t the word index


RULES: dict[str, SpanRule] = {
    "spans": SpanRule("spans"),
    "code": SpanRule("code", default=1.0, no_match=None),
    "words": SpanRule("words", no_match=None, length_decay=True),
}


def resolve_rule(rule: str | SpanRule) -> SpanRule:
    """A ``SpanRule`` itself, or the one named in ``RULES``."""
    if isinstance(rule, SpanRule):
        return rule
    if rule not in RULES:
        raise ValueError(f"unknown span rule {rule!r}; choose one of {', '.join(RULES)}")
    return RULES[rule]


def length_decay(t: int) -> float:
    """Text2Grad's SLF5K weight of word ``t`` (0-based): sigmoid(-(t - 48) + 6), about 1 up to word 50."""
    return 1.0 / (1.0 + math.exp((t - DECAY_CENTER) - DECAY_SHIFT))


# -- 1. fuzzy matching ----------------------------------------------------------------------------------
def _normalized(text: str) -> tuple[str, list[int]]:
    """``text`` lowercased, punctuation as spaces, whitespace runs as one space; and the index in ``text`` of
    every character kept."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        ch = " " if (ch.isspace() or re.match(r"[,.;:!?\"'()\[\]{}]", ch)) else ch.lower()
        if ch == " " and (not out or out[-1] == " "):
            continue
        out.append(ch)
        where.append(i)
    return "".join(out), where


def _normalized_find(span: str, response: str) -> tuple[int, int] | None:
    norm_span = _normalized(span)[0].strip()
    if len(norm_span) <= 3:
        return None
    norm_text, where = _normalized(response)
    k = norm_text.find(norm_span)
    if k < 0:
        return None
    return where[k], where[k + len(norm_span) - 1] + 1


def _window_match(span: str, response: str, threshold: float) -> tuple[int, int] | None:
    """The best sliding-window ``SequenceMatcher`` match of ``span`` at ``threshold`` (see the module doc).

    The extent is the response text aligned with the **whole** span: from the first matching block back by the
    span characters before it, to the last block forward by the span characters after it (within the response, past the window's end too).
    A misquote differs from the response exactly where the critic is wrong about it, and that is often the part
    its judgement is about: ``12-3=9`` quoted for the wrong step ``12-3=8`` matches on ``12-3=``, and an extent of
    the matched blocks alone would leave the wrong result ``8`` outside the poor span (issue 41). Extending to
    the span's ends puts it inside. Refusing such matches instead would drop most misquotes of a small model,
    which are one digit off; extending never reaches past what the span's own length covers."""
    if len(span) < SHORT_SPAN_CHARS:
        threshold = max(THRESHOLD_FLOOR, threshold - SHORT_SPAN_RELAX)
    stride = max(1, len(span) // 4)
    starts = list(range(0, len(response) - len(span) + 1, stride)) or [0]
    best_ratio, best = 0.0, None
    for start in starts:
        chunk = response[start:start + 2 * len(span)]
        matcher = difflib.SequenceMatcher(None, chunk, span, autojunk=False)
        blocks = [b for b in matcher.get_matching_blocks() if b.size]
        if not blocks:
            continue
        ratio = matcher.ratio()
        if max(b.size for b in blocks) > BLOCK_SHARE * len(span):
            ratio = max(ratio, 0.7)
        if ratio > best_ratio:
            first, last = blocks[0], blocks[-1]
            head = max(0, first.a - first.b)
            tail = min(len(response) - start, last.a + last.size + len(span) - (last.b + last.size))
            best_ratio, best = ratio, (start + head, start + tail)
    return best if best is not None and best_ratio >= threshold else None


def _find(span: str, response: str, threshold: float) -> tuple[int, int] | None:
    exact = response.find(span)
    if exact >= 0:
        return exact, exact + len(span)
    return _normalized_find(span, response) or _window_match(span, response, threshold)


def match_span(span: str, response: str) -> tuple[int, int] | None:
    """``[start, end)`` of ``span`` in ``response``, or None when no strategy finds it (module docstring)."""
    span = span.strip()
    if not span or not response:
        return None
    for threshold in THRESHOLDS:
        found = _find(span, response, threshold)
        if found is None and len(span) > HALF_MIN_CHARS:
            half = len(span) // 2
            front = _find(span[:half], response, threshold - HALF_RELAX)
            if front is not None:
                found = front[0], front[0] + len(span)
            else:
                back = _find(span[half:], response, threshold - HALF_RELAX)
                if back is not None:
                    found = max(0, back[0] - half), back[1]
        if found is not None:
            start, end = max(0, found[0]), min(len(response), found[1])
            return (start, end) if start < end else None
    words = span.split()
    if len(words) > HALF_MIN_WORDS:
        front, back = " ".join(words[:len(words) // 2]), " ".join(words[len(words) // 2:])
        k = response.find(front)
        if k >= 0:
            return k, min(len(response), k + len(span))
        k = response.find(back)
        if k >= 0:
            return max(0, k - len(front) - 1), k + len(back)
    return None


# -- 2. character rewards -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CharScores:
    """Per-character rewards and marks (covered by a located span or an aligned word score) of one response,
    and how many of the feedback's spans or word scores were located."""

    rewards: list[float]
    marked: list[bool]
    matched: int
    unmatched: int


def _strip_word(word: str) -> str:
    start, end = 0, len(word)
    while start < end and not word[start].isalnum():
        start += 1
    while end > start and not word[end - 1].isalnum():
        end -= 1
    return word[start:end].lower()


def score_characters(feedback: SpanFeedback, response: str, rule: str | SpanRule) -> CharScores:
    """``char_rewards`` with the marks and match counts (the numbers ``scorer`` reports)."""
    rule = resolve_rule(rule)
    n = len(response)
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", response)]

    def every_word(value: float) -> list[float]:
        out = [0.0] * n
        for a, b in words:
            out[a:b] = [value] * (b - a)
        return out

    marked = [False] * n
    if not feedback.marks_anything:
        return CharScores(every_word(rule.default if rule.empty is None else rule.empty), marked, 0, 0)
    rewards = every_word(rule.default)
    matched = unmatched = 0
    if feedback.word_scores:
        j = 0
        for word, score in feedback.word_scores:
            target = _strip_word(word)
            hit = next((k for k in range(j, min(len(words), j + MAX_WORD_SKIP + 1))
                        if _strip_word(response[words[k][0]:words[k][1]]) == target), None)
            if hit is None:
                unmatched += 1
                continue
            a, b = words[hit]
            value = score * (length_decay(hit) if rule.length_decay else 1.0)
            rewards[a:b] = [value] * (b - a)
            marked[a:b] = [True] * (b - a)
            matched, j = matched + 1, hit + 1
    painted = (*((s, rule.good) for s in feedback.good), *((s, rule.improvable) for s in feedback.improvable),
               *((s, rule.poor) for s in (*feedback.poor, *feedback.wrong)))
    located = []
    for span, value in painted:
        where = match_span(span, response)
        if where is None:
            unmatched += 1
        else:
            matched += 1
            located.append((where, value))
    if painted and not located and not matched and rule.no_match is not None:
        return CharScores(every_word(rule.no_match), marked, 0, unmatched)
    for (a, b), value in located:
        rewards[a:b] = [value] * (b - a)
        marked[a:b] = [True] * (b - a)
    return CharScores(rewards, marked, matched, unmatched)


def char_rewards(feedback: SpanFeedback, response: str, rule: str | SpanRule) -> list[float]:
    """One reward per character of ``response`` from ``feedback`` under ``rule`` (module docstring)."""
    return score_characters(feedback, response, rule).rewards


# -- 3. tokens ------------------------------------------------------------------------------------------
def _special_ids(tokenizer: Any) -> set[int]:
    return set(getattr(tokenizer, "all_special_ids", None) or ())


def _incremental_spans(tokenizer: Any, token_ids: list[int], text: str, special: set[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int] | None] = [None] * len(token_ids)
    end, pending = 0, []
    for i, tid in enumerate(token_ids):
        if tid in special:
            spans[i] = (end, end)
            continue
        prefix = tokenizer.decode(token_ids[:i + 1], skip_special_tokens=True)
        pending.append(i)
        if len(prefix) >= end and text.startswith(prefix) and not prefix.endswith("\ufffd"):
            for k in pending:
                spans[k] = (end, len(prefix))
            end, pending = len(prefix), []
    for k in pending:
        spans[k] = (end, len(text))
    return [s if s is not None else (end, end) for s in spans]


def token_char_spans(tokenizer: Any, token_ids: list[int]) -> list[tuple[int, int]]:
    """Each token's ``[start, end)`` in ``tokenizer.decode(token_ids, skip_special_tokens=True)`` (module doc)."""
    token_ids = [int(t) for t in token_ids]
    text = tokenizer.decode(token_ids, skip_special_tokens=True)
    special = _special_ids(tokenizer)
    plain = [i for i, t in enumerate(token_ids) if t not in special]
    try:
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    except NotImplementedError:  # a slow (Python) tokenizer has no offsets
        encoded = None
    if encoded is not None and list(encoded["input_ids"]) == [token_ids[i] for i in plain]:
        offsets = [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
        if all(0 <= a <= b <= len(text) for a, b in offsets):
            spans: list[tuple[int, int]] = []
            end, k = 0, 0
            for tid in token_ids:
                if tid in special:
                    spans.append((end, end))
                else:
                    spans.append(offsets[k])
                    end, k = offsets[k][1], k + 1
            return spans
    return _incremental_spans(tokenizer, token_ids, text, special)


def _token_value(rewards: list[float], text: str, start: int, end: int) -> float:
    if start >= end:
        return 0.0
    inside = [rewards[i] for i in range(start, end) if not text[i].isspace()] or rewards[start:end]
    return sum(inside) / len(inside)


@dataclass(frozen=True)
class TokenScores:
    """Per-token rewards and marks of one completion, with the feedback's match counts."""

    rewards: list[float]
    marked: list[bool]
    matched: int
    unmatched: int


def score_tokens(feedback: SpanFeedback, response_text: str, token_ids: list[int], tokenizer: Any,
                 rule: str | SpanRule) -> TokenScores:
    """``token_rewards`` with the marks and match counts."""
    decoded = tokenizer.decode([int(t) for t in token_ids], skip_special_tokens=True)
    if decoded != response_text:
        raise ValueError(f"response_text is not the decoded completion (decode(token_ids, skip_special_tokens=True)"
                         f" = {decoded[:60]!r}, response_text = {response_text[:60]!r}); spans would land on the "
                         "wrong tokens")
    rule = resolve_rule(rule)
    chars = score_characters(feedback, response_text, rule)
    spans = token_char_spans(tokenizer, token_ids)
    rewards = [_token_value(chars.rewards, response_text, a, b) for a, b in spans]
    marked = [any(chars.marked[a:b]) for a, b in spans]
    if feedback.incomplete and token_ids:
        rewards[-1], marked[-1] = rule.poor, True
    return TokenScores(rewards, marked, chars.matched, chars.unmatched)


def token_rewards(feedback: SpanFeedback, response_text: str, token_ids: list[int], tokenizer: Any,
                  rule: str | SpanRule) -> list[float]:
    """One reward per completion token: the mean of its non-whitespace characters' rewards (module doc);
    ``response_text`` must be ``tokenizer.decode(token_ids, skip_special_tokens=True)``."""
    return score_tokens(feedback, response_text, token_ids, tokenizer, rule).rewards
