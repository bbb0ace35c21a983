"""mR3 templates: formats, rubric rendering, schema, language instructions, chat rendering."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rewards.mr3.templates import (
    EvalItem,
    build_messages,
    choose_rubric,
    compact_prompt,
    default_score_values,
    format_verdict,
    render_prompt,
    render_rubric,
)


def test_pairwise_layout_matches_mr3():
    item = EvalItem("pairwise", "What is 2+2?", ["4", "5"])
    system, user = build_messages(item)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith("You are Qwen3, an AI assistant that reasons, thinks, and answers strictly "
                                        "in English.\n\n# Instruction\n")
    assert "# Evaluation Rubric\n" in system["content"] and "# Response Format\n\n{'type': 'object'" in system["content"]
    assert "'enum': ['Assistant A', 'Assistant B']" in system["content"]
    assert user["content"] == "# Input (User's Prompt)\nWhat is 2+2?\n\n# Assistant A\n4\n\n# Assistant B\n5\n\n# Your Response\n"


@pytest.mark.parametrize("mode,values", [("pointwise", ["1", "2", "3", "4", "5"]), ("binary", ["true", "false"])])
def test_single_response_formats(mode, values):
    item = EvalItem(mode, "Q", ["R"], rubric=None)
    assert sorted(item.score_values()) == sorted(values)
    assert "# Response\nR\n\n# Your Response\n" in build_messages(item)[1]["content"]


def test_wrong_number_of_responses_and_bad_mode():
    with pytest.raises(ValueError, match="needs 2"):
        EvalItem("pairwise", "Q", ["only one"])
    with pytest.raises(ValueError, match="not one of"):
        EvalItem("ranking", "Q", ["x"])


def test_rubric_rendering_and_custom_scale():
    rubric = {"5": "great", "1": "bad", "3": "ok"}
    assert render_rubric(rubric) == "5: great\n1: bad\n3: ok"
    assert default_score_values("pointwise", rubric) == ["1", "3", "5"]
    assert default_score_values("pairwise", {"Tie": "t", "Assistant B": "b", "Assistant A": "a"}) == [
        "Assistant A", "Assistant B", "Tie"]


def test_rubric_choice_is_reproducible_across_processes():
    here = choose_rubric("pairwise", "sample-7", seed=3)
    code = ("from rewards.mr3.templates import choose_rubric;"
            "print(list(choose_rubric('pairwise', 'sample-7', seed=3).items()))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=".").stdout.strip()
    assert other == str(list(here.items()))
    seen = {tuple(choose_rubric("pairwise", f"k{i}")) for i in range(40)}
    assert len(seen) == 2  # keys are shuffled across samples


def test_target_language_reasoning_is_forced():
    item = EvalItem("binary", "질문", ["답"], language="ko", prompt_language="tgt", reasoning_language="tgt")
    text = render_prompt(item, tokenizer=None)
    assert "strictly in Korean" in text
    assert text.endswith("<think>\nOkay, I have to think explicitly and provide my answer in Korean. ")
    en = render_prompt(EvalItem("binary", "Q", ["A"], language="ko"), tokenizer=None)
    assert en.endswith("<|assistant|>\n<think>\n") and "strictly in English" in en


def test_chat_template_of_the_served_model():
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer()
    text = render_prompt(EvalItem("binary", "Q", ["A"]), tokenizer=tok)
    assert text.startswith("<bos><|system|>You are Qwen3") and text.endswith("<|assistant|><think>\n")


def test_compact_style_and_verdict_format():
    item = EvalItem("pairwise", "12+7=", ["19", "18"])
    assert compact_prompt(item) == "P|12+07=|A:+019|B:+018|<think>"
    assert compact_prompt(EvalItem("binary", "what?", ["19 apples"])) == "C|what?|R:19 apples|<think>"
    assert compact_prompt(EvalItem("binary", "3+4=", ["7"], reference="7")) == "C|03+04=|ref:+007|R:+007|<think>"
    assert format_verdict("Assistant A", reasoning="19", style="compact") == '19</think>{"score":"A"}'
    full = format_verdict("true", "fine", "because", style="mr3")
    assert full == 'because\n</think>\n\n{"explanation": "fine", "score": "true"}'
