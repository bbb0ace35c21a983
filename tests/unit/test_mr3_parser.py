"""The verdict parser survives malformed output and says why it could not read a score."""

from __future__ import annotations

import pytest

from rewards.mr3.parser import normalise_score, parse_verdict

PAIR = ["Assistant A", "Assistant B"]
FIVE = ["1", "2", "3", "4", "5"]
BIN = ["true", "false"]


def test_well_formed_with_think_block():
    v = parse_verdict('<think>A is right.</think>\n{"explanation": "A computes it", "score": "Assistant A"}', PAIR)
    assert v.parse_ok and v.score == "Assistant A" and v.explanation == "A computes it"
    assert v.reasoning == "A is right." and v.error is None


def test_forced_think_prefix_means_no_opening_tag():
    v = parse_verdict('B is better\n</think>\n\n{"explanation": "", "score": "Assistant B"}', PAIR)
    assert v.score == "Assistant B" and v.reasoning == "B is better"


def test_extra_text_and_fences_and_last_object_wins():
    text = ('reasoning {"score": "Assistant A"} </think> Here is my verdict:\n```json\n'
            '{"explanation": "x", "score": "Assistant B"}\n```\nThanks!')
    assert parse_verdict(text, PAIR).score == "Assistant B"


@pytest.mark.parametrize("raw,expected", [(5, "5"), (4.0, "4"), ("4/5", "4"), (" 3 ", "3"), ("2 out of 5", "2")])
def test_numeric_types(raw, expected):
    assert normalise_score(raw, FIVE) == (expected, None)


@pytest.mark.parametrize("raw,expected", [(True, "true"), ("False", "false"), ("yes", "true"), (0, "false")])
def test_binary_types(raw, expected):
    assert normalise_score(raw, BIN)[0] == expected


@pytest.mark.parametrize("raw", ["A", "assistant a", "Response A", "[[A]]", "ASSISTANT A"])
def test_pairwise_aliases(raw):
    assert normalise_score(raw, PAIR)[0] == "Assistant A"


def test_python_dict_and_trailing_comma():
    assert parse_verdict("</think>{'explanation': 'it\\'s fine', 'score': 'true',}", BIN).score == "true"
    assert parse_verdict('</think>{"explanation": "x", "score": 4,}', FIVE).score == "4"


def test_regex_fallback_without_json():
    v = parse_verdict("</think>\nExplanation: A is wrong.\nScore: Assistant B", PAIR)
    assert v.parse_ok and v.score == "Assistant B" and v.warnings


def test_truncated_output_says_why():
    v = parse_verdict("Let me think about the first response, it says", PAIR)
    assert not v.parse_ok and "truncated" in v.error


def test_missing_json_after_think():
    v = parse_verdict("thinking</think> I prefer the first one.", PAIR)
    assert not v.parse_ok and "no JSON" in v.error


def test_json_without_score():
    v = parse_verdict('thinking</think>{"explanation": "good"}', PAIR)
    assert not v.parse_ok and "no 'score'" in v.error


def test_score_outside_allowed_values():
    v = parse_verdict('</think>{"explanation": "", "score": "7"}', FIVE)
    assert not v.parse_ok and "not one of" in v.error and v.raw_score == "7"


@pytest.mark.parametrize("bad", [None, "", "   ", '</think>{"score": null}', '</think>{"score": {"a": 1}}',
                                 '</think>{"score": [1, 2]}', "</think>{{{{", "}" * 50 + "{" * 50])
def test_garbage_never_raises(bad):
    v = parse_verdict(bad, PAIR)
    assert not v.parse_ok and v.error


def test_wrong_type_explanation_is_kept_as_text():
    v = parse_verdict('</think>{"explanation": ["a", "b"], "score": "true"}', BIN)
    assert v.parse_ok and v.explanation == '["a", "b"]'


def test_compact_tiny_output():
    v = parse_verdict('19</think>{"score":"A"}', PAIR)
    assert v.score == "Assistant A" and v.reasoning == "19"


def test_no_allowed_set_accepts_any_text():
    assert parse_verdict('</think>{"score": "Tie"}').score == "Tie"


def test_long_brace_heavy_output_is_bounded():
    text = "def f(): return {1: 2}\n" * 2000 + '</think>{"explanation": "", "score": "Assistant A"}'
    assert parse_verdict(text, PAIR).score == "Assistant A"
