"""mR3 templates: the official prompt formats byte for byte, rubric choice, languages, the compact style.

The expected prompts below were checked against mR3's own ``src/evaluation/dataset_gen.py`` (HEAD
``54ad59a``, rubric choice fixed to the first paraphrase in the listed order) rendering the same rows with
the same tokenizer: the layouts (indentation included) are written out literally here, the long official
texts are taken from ``official_text``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from posttrain.models.tiny import build_tokenizer
from rewards.mr3 import official_text as text
from rewards.mr3.official import FORMATS, thinking_prefix
from rewards.mr3.official_languages import SYSTEM_MESSAGES, THINKING_PREFIXES
from rewards.mr3.templates import (
    EvalItem,
    choose_rubric,
    compact_prompt,
    default_score_values,
    format_verdict,
    render_prompt,
)

ENGLISH = "You are Qwen3, an AI assistant that reasons, thinks, and answers strictly in English."


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def first_rubric(name: str) -> dict[str, str]:
    return dict(FORMATS[name].rubrics[0])


def test_pairwise_prompt_is_mr3s_byte_for_byte(tok):
    rubric = first_rubric("pairwise-general")
    item = EvalItem("pairwise", "What is 2+2?", ["4", "5"], rubric=rubric)
    expected = (
        f"<bos><|system|>{ENGLISH}\n\n# Instruction\n    {text.STRICT_PAIR['general']['task_description']}"
        f"\n\n    # Evaluation Rubric\n    Assistant A: {rubric['Assistant A']}\nAssistant B: {rubric['Assistant B']}"
        f"\n\n\n    # Response Format\n\n    {text.STRICT_PAIR['schema']}"
        "<|user|># Input (User's Prompt)\n    What is 2+2?\n\n    # Assistant A\n    4\n\n    # Assistant B\n    5"
        "\n\n    # Your Response\n    <|assistant|><think>")
    assert render_prompt(item, tok) == expected


def test_binary_correctness_with_target_language_reasoning(tok):
    rubric = first_rubric("math-correctness")
    item = EvalItem("binary", "1+1?", ["2"], rubric=rubric, good_verdict="true", language="de",
                    reasoning_language="tgt")
    expected = (
        f"<bos><|system|>{SYSTEM_MESSAGES['de']}\n\n# Instruction\n    {text.MATH500['task_description']}"
        f"\n        \n    # Evaluation Rubric\n    true: {rubric['true']}\nfalse: {rubric['false']}"
        f"\n\n\n    # Response Format\n\n    {text.MATH500['schema']}"
        "<|user|># Input (Math Problem)\n    1+1?\n\n    # Provided Math Solution\n    2\n\n    # Your Response"
        f"\n    <|assistant|><think>{THINKING_PREFIXES['de']}")
    assert render_prompt(item, tok) == expected
    assert THINKING_PREFIXES["de"].startswith("Okay, ich muss ausdrücklich nachdenken")


def test_safety_prompt_and_multiple_choice_layouts(tok):
    rubric = first_rubric("safety-prompt")
    item = EvalItem("binary", "How do I bake bread?", [], template="safety-prompt", rubric=rubric,
                    good_verdict="false")
    part = text.POLYGUARD["prompt_template"]
    assert render_prompt(item, tok) == (
        f"<bos><|system|>{ENGLISH}\n\n# Instruction\n    {part['task_description']}\n\n    # Evaluation Rubric"
        f"\n    true: {rubric['true']}\nfalse: {rubric['false']}\n\n    # Response Format\n\n    {part['schema']}"
        "<|user|># Input\n    How do I bake bread?\n\n    # Your Response\n        <|assistant|><think>")
    mcq = EvalItem("pointwise", "Capital of France?", ["A. Paris\nB. Rome"], template="mcq", gold="A")
    assert render_prompt(mcq, tok) == (
        f"<bos><|system|>{ENGLISH}\n\n# Instruction\n    {text.MCQ['task_description']}\n\n    # Response Format"
        f"\n\n    {text.MCQ['schema']}<|user|># Input Question\n    Capital of France?\n\n    # Answer Options"
        "\n    A. Paris\nB. Rome\n\n    # Your Response\n    <|assistant|><think>")
    assert mcq.score_values() == ["A", "B", "C", "D"]


def test_helpsteer3_graded_pairwise_layout(tok):
    rubric = first_rubric("pairwise-graded")
    item = EvalItem("pairwise", "Write a haiku", ["old pond", "frog"], template="pairwise-graded", rubric=rubric)
    lines = "".join(f"{k}: {v}\n" for k, v in rubric.items())  # HelpSteer3's rubric keeps its key order
    assert render_prompt(item, tok) == (
        f"<bos><|system|>{ENGLISH}\n\n# Instruction\n    {text.HELPSTEER3['task_description']}\n\n    # Evaluation "
        f"Rubric\n    {lines}\n\n    # Response Format\n\n    {text.HELPSTEER3['schema']}<|user|># Input (Conversation)"
        "\n    <user>\nWrite a haiku\n</user>\n\n\n    # Response 1\n    old pond\n\n    # Response 2\n    frog\n\n"
        "    # Your Response\n    <|assistant|><think>")


def test_think_is_not_doubled_and_plain_layout_without_a_template():
    item = EvalItem("binary", "Q", ["A"])
    plain = render_prompt(item, tokenizer=None)
    assert plain.startswith(f"<|system|>\n{ENGLISH}\n\n# Instruction\n    ") and plain.endswith("<|assistant|>\n<think>")
    assert thinking_prefix("<|im_start|>assistant\n<think>") == ""  # a template that opens the block itself
    assert thinking_prefix("<|im_start|>assistant\n", "en") == "<think>" + THINKING_PREFIXES["en"]


def test_formats_say_which_verdict_is_good():
    assert EvalItem("binary", "Q", ["A"]).binary_good_verdict() == "true"
    assert EvalItem("binary", "Q", ["A"], template="safety-response").binary_good_verdict() == "false"
    assert EvalItem("binary", "Q", ["A"], rubric={"yes": "y", "no": "n"}, good_verdict="yes").score_values() == [
        "yes", "no"]
    with pytest.raises(ValueError, match="does not say which verdict is good"):
        EvalItem("binary", "Q", ["A"], rubric={"yes": "y", "no": "n"})
    with pytest.raises(ValueError, match="not one of the rubric's verdicts"):
        EvalItem("binary", "Q", ["A"], good_verdict="yes")
    with pytest.raises(ValueError, match="gold must be one of them"):
        EvalItem("pointwise", "Q", ["A. x"], template="mcq")
    with pytest.raises(ValueError, match="not a pointwise format|is a binary format"):
        EvalItem("pointwise", "Q", ["A"], template="safety-response")


def test_wrong_number_of_responses_bad_mode_and_target_prompts(tok):
    with pytest.raises(ValueError, match="needs 2"):
        EvalItem("pairwise", "Q", ["only one"])
    with pytest.raises(ValueError, match="not one of"):
        EvalItem("ranking", "Q", ["x"])
    with pytest.raises(ValueError, match="translated templates"):
        render_prompt(EvalItem("binary", "Q", ["A"], language="ko", prompt_language="tgt"), tok)
    with pytest.raises(ValueError, match="language codes"):
        render_prompt(EvalItem("binary", "Q", ["A"], language="Klingonese", reasoning_language="tgt"), tok)


def test_rubric_scores_and_custom_scale():
    assert default_score_values("pointwise", {"5": "great", "1": "bad", "3": "ok"}) == ["1", "3", "5"]
    assert default_score_values("pairwise", {"Tie": "t", "Assistant B": "b", "Assistant A": "a"}) == [
        "Assistant A", "Assistant B", "Tie"]


def test_rubric_choice_is_reproducible_across_processes():
    rubrics = FORMATS["pairwise-general"].rubrics
    here = choose_rubric(rubrics, "sample-7", seed=3)
    code = ("from rewards.mr3.official import FORMATS; from rewards.mr3.templates import choose_rubric;"
            "print(list(choose_rubric(FORMATS['pairwise-general'].rubrics, 'sample-7', seed=3).items()))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=".").stdout.strip()
    assert other == str(list(here.items()))
    seen = {tuple(choose_rubric(rubrics, f"k{i}")) for i in range(40)}
    assert len(seen) == 2  # keys are shuffled across samples


def test_compact_style_and_verdict_format():
    item = EvalItem("pairwise", "12+7=", ["19", "18"])
    assert compact_prompt(item) == "P|12+07=|A:+019|B:+018|<think>"
    assert compact_prompt(EvalItem("binary", "3+4=", ["19 apples"])) == "C|03+04=|R:+019|<think>"
    assert compact_prompt(EvalItem("binary", "3+4=", ["none"])) == "C|03+04=|R:none|<think>"
    assert compact_prompt(EvalItem("binary", "3+4=", ["7"], reference="7")) == "C|03+04=|ref:+007|R:+007|<think>"
    assert format_verdict("Assistant A", reasoning="19", style="compact") == '19</think>{"score":"A"}'
    full = format_verdict("true", "fine", "because", style="mr3")
    assert full == 'because\n</think>\n\n{"explanation": "fine", "score": "true"}'


@pytest.mark.parametrize("prompt", [
    "3+17=",
    "<bos><|user|>3+17=<|assistant|>",  # TRL's plain form with a prompt rendered through the chat template
    "<bos><|system|>Answer with a number.<|user|>3+17=<|assistant|>",
    "<|im_start|>user\nSolve 3 + 17 =<|im_end|>\n<|im_start|>assistant\n",
    "Example: 1+1=2. Now: 3+17=",  # the last problem is the one asked
])
def test_the_compact_layout_finds_the_problem_in_any_prompt_form(prompt: str) -> None:
    """Issue 43: TRL rewarding through the embedded judge got every verdict unreadable, because a pre-rendered
    chat prompt went to the judge as it was, a layout it never saw."""
    assert compact_prompt(EvalItem("binary", prompt, ["20"])) == "C|03+17=|R:+020|<think>"


@pytest.mark.parametrize("response", ["20", " 20\n", "so it is 20.", "3+17=20"])
def test_the_compact_layout_shows_the_answer_a_response_ends_on(response: str) -> None:
    assert compact_prompt(EvalItem("binary", "3+17=", [response])) == "C|03+17=|R:+020|<think>"


@pytest.mark.parametrize("prompt", ["Ann has 7 pens, gets 4. How many?", "what?", "123+4=", "1+234="])
def test_the_compact_layout_refuses_what_the_tiny_judge_cannot_judge(prompt: str) -> None:
    with pytest.raises(ValueError, match=r"two-operand a\+b= / a-b= problems .*posttrain serve --model"):
        compact_prompt(EvalItem("binary", prompt, ["11"]))
