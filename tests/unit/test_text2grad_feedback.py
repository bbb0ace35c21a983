"""Text2Grad span feedback: the parser's forms, fences, junk and errors, the SFT target round trip (with and
without the critique), and the spans-only reward model's data and recipe."""

from __future__ import annotations

import dataclasses

import pytest

from posttrain.tasks.span_feedback import FeedbackParseError, SpanFeedback, parse_feedback
from posttrain.tasks.span_templates import compact_request, feedback_json, full_request, render_request


def test_spans_form_with_fence_and_prose():
    text = ('Sure! Here is my critique:\n```json\n{"textual_feedback": "Mostly right.", "good_spans": [" 7+5=12 "], '
            '"poor_spans": ["12-3=8", ""]}\n```\nHope this helps {not json}')
    fb = parse_feedback(text, "spans")
    assert fb == SpanFeedback("spans", "Mostly right.", good=("7+5=12",), poor=("12-3=8",))
    assert fb.marks_anything


def test_code_form_key_variants_and_first_matching_object():
    text = ('{"note": 1} then {"Code Feedback": "Off by one.", "wrong_code": ["range(n+1)"], '
            '"improvement_code": ["for i in range(len(x))"]}')
    fb = parse_feedback(text, "code")
    assert fb.critique == "Off by one." and fb.wrong == ("range(n+1)",)
    assert fb.improvable == ("for i in range(len(x))",) and fb.good == fb.poor == ()
    assert parse_feedback('{"code_feedback": "ok", "wrong_code": []}', "code").marks_anything is False


def test_words_form():
    fb = parse_feedback('{"textual_feedback": "t", "word_score_list": [["The", 0], ["best", 1], ["bad", -1.0]]}',
                        "words")
    assert fb.word_scores == (("The", 0), ("best", 1), ("bad", -1))


def test_spans_without_critique_are_accepted():  # the "spans without critique" ablation
    assert parse_feedback('{"good_spans": ["a"]}', "spans") == SpanFeedback("spans", good=("a",))


@pytest.mark.parametrize(("text", "form", "message"), [
    ("", "spans", "empty"),
    ("no json here", "spans", "no JSON object"),
    ('{"textual_feedback": "x", "good_spans": "a b"}', "spans", "good_spans: expected a list"),
    ('{"textual_feedback": "x", "poor_spans": ["a", 3]}', "spans", r"poor_spans\[1\]: expected a string, got int"),
    ('{"textual_feedback": 5}', "spans", "textual_feedback: expected a string critique"),
    ('{"score": 1}', "spans", "none of the 'spans' fields"),
    ('{"Code Feedback": "x", "wrong_code": [null]}', "code", r"Code Feedback|wrong_code\[0\]"),
    ('{"word_score_list": [["a", 2]]}', "words", r"word_score_list\[0\]\[1\]: expected a score of -1, 0 or 1"),
    ('{"word_score_list": [[1, 1]]}', "words", r"word_score_list\[0\]\[0\]"),
    ('{"word_score_list": [["a"]]}', "words", r"word_score_list\[0\]: expected a \[word, score\] pair"),
    ('{"textual_feedback": "x", "good_spans": ["a"', "spans", "no JSON object"),
    ('{"textual_feedback": "x", "incomplete": "yes"}', "spans", "incomplete: expected true or false"),
])
def test_errors_name_the_field(text, form, message):
    with pytest.raises(FeedbackParseError, match=message):
        parse_feedback(text, form)


def test_unknown_form_is_a_value_error():
    with pytest.raises(ValueError, match="unknown feedback form 'essay'"):
        parse_feedback("{}", "essay")


@pytest.mark.parametrize("form", ["spans", "code", "words"])
def test_sft_target_round_trips(form):
    fb = SpanFeedback(form, "c", good=("g",) if form == "spans" else (), poor=("p",) if form == "spans" else (),
                      wrong=("w",) if form == "code" else (), improvable=("i",) if form == "code" else (),
                      word_scores=(("x", 1), ("y", -1)) if form == "words" else ())
    for compact in (False, True):
        assert parse_feedback(feedback_json(fb, compact=compact), form) == fb
    assert '"textual_feedback":"c"' in feedback_json(fb, compact=True) or form == "code"
    spans_only = feedback_json(fb, compact=True, critique=False)  # the "spans without critique" ablation's target
    assert '"c"' not in spans_only and parse_feedback(spans_only, form) == dataclasses.replace(fb, critique="")
    cut_short = dataclasses.replace(fb, incomplete=True)
    assert parse_feedback(feedback_json(cut_short, compact=True), form) == cut_short
    assert "incomplete" not in feedback_json(fb)  # written only when it is true


def test_the_nocritique_reward_model_learns_the_same_feedback_without_its_critique():
    from posttrain.models.tiny import RECIPES
    from posttrain.tasks import TASKS

    full, spans_only = (TASKS.get(name)().split("test")[:20] for name in ("step-arithmetic-feedback",
                                                                          "step-arithmetic-feedback-nocritique"))
    for a, b in zip(full, spans_only, strict=True):
        assert a.prompt == b.prompt and a.columns == b.columns  # the same problems and responses
        assert parse_feedback(b.answer, "spans") == dataclasses.replace(parse_feedback(a.answer, "spans"), critique="")
        assert "textual_feedback" in a.answer and "textual_feedback" not in b.answer
    recipe, ablation = RECIPES.get("reward-text2grad"), RECIPES.get("reward-text2grad-nocritique")
    assert dataclasses.replace(ablation, name=recipe.name, task=recipe.task) == recipe  # nothing else differs


def test_templates_quote_the_rules():
    text = full_request("spans", "Sum 2+2.", "It is 5.", max_spans=2)
    assert "Sum 2+2." in text and "It is 5." in text and "character for character" in text
    assert "at most 2 spans" in text and '"poor_spans"' in text
    assert "wrong_code" in full_request("code", "p", "r") and "word_score_list" in full_request("words", "p", "r")
    assert compact_request("spans", "7+5=", "7+5=12") == "T2G|spans|7+5=|7+5=12|"
    with pytest.raises(ValueError, match="style"):
        render_request("spans", "p", "r", style="long")
