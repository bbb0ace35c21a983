"""Prompt templates of the span reward model and its SFT targets (Text2Grad, arXiv 2505.22338).

The reward model's input is the task prompt plus the policy's response wrapped in instructions for one
of the three feedback forms (``feedback.FORMS``); its target is the JSON the parser reads
(``feedback_json``). The instructions follow the paper's annotation prompts, in our own words: quote the
response exactly, let every span be supported by the critique, keep spans short and few (0-2 of each
kind for summaries, ``max_spans``), leave a list empty when nothing stands out.

Two styles (``render_request(..., style=...)``):

- ``full``: the natural-language instructions, for real instruction-tuned reward models;
- ``compact``: ``T2G|<form>|<prompt>|<response>|`` and nothing else, for the embedded character-level
  reward model (``rewards.text2grad.tiny``), whose 256-token context cannot hold the instructions. Its
  target is the same JSON, written compactly (no spaces after separators).

Either text is the user turn; ``scorer.SpanRewardModel`` renders it through the reward model's chat
template (``posttrain.tasks.prompts.encode_prompts``), exactly as ``--algo sft --task dataset`` renders
the ``prompt`` column of the SFT data (``data_pipelines.text2grad.sft``).
"""

from __future__ import annotations

import json

from posttrain.tasks.span_feedback import SpanFeedback, check_form

STYLES = ("full", "compact")

_DEFINITIONS = {
    "spans": (
        "- good_spans: phrases of the response that make it better: accurate, on topic, giving the key "
        "information the input asks for.\n"
        "- poor_spans: phrases of the response that make it worse: wrong, irrelevant, redundant, badly worded, "
        "or where something the input needs is missing."),
    "code": (
        "- wrong_code: snippets of the solution that make it fail (wrong logic, wrong results, crashes).\n"
        "- improvement_code: snippets that work but could be clearer, faster or more robust."),
    "words": (
        "- word_score_list: every word of the response in order, as [word, score] with score 1 for a word "
        "of a good span, -1 for a word of a poor span and 0 otherwise."),
}
_LAYOUT = {
    "spans": '{"textual_feedback": "...", "good_spans": ["...", ...], "poor_spans": ["...", ...]}',
    "code": '{"code_feedback": "...", "wrong_code": ["...", ...], "improvement_code": ["...", ...]}',
    "words": '{"textual_feedback": "...", "word_score_list": [["word", 0], ...]}',
}


def full_request(form: str, prompt: str, response: str, max_spans: int | None = None) -> str:
    """The natural-language instructions for ``form`` around ``prompt`` and ``response``."""
    check_form(form)
    limit = f" Give at most {max_spans} spans of each kind." if max_spans is not None else ""
    subject = "solution" if form == "code" else "response"
    return (
        f"Critique the {subject} below to the user's input, then point at the parts of it your critique is "
        "about.\n\n"
        f"### Input\n{prompt}\n\n### {subject.capitalize()}\n{response}\n\n"
        f"### Definitions\n{_DEFINITIONS[form]}\n\n"
        "### Rules\n"
        "1. Judge accuracy, relevance, clarity and completeness; write the critique as one paragraph.\n"
        f"2. Copy every span exactly, character for character, from the {subject}; never paraphrase.\n"
        "3. Mark only what the critique discusses: each span must be supported by it.\n"
        f"4. Prefer few, short, decisive spans; leave a list empty when nothing stands out.{limit}\n\n"
        f"### Output\nOnly this JSON object:\n{_LAYOUT[form]}")


def compact_request(form: str, prompt: str, response: str) -> str:
    """The embedded tiny reward model's input: ``T2G|<form>|<prompt>|<response>|``."""
    check_form(form)
    return f"T2G|{form}|{prompt}|{response}|"


def render_request(form: str, prompt: str, response: str, style: str = "full",
                   max_spans: int | None = None) -> str:
    """The reward model's user turn in ``style`` (``STYLES``)."""
    if style == "full":
        return full_request(form, prompt, response, max_spans)
    if style == "compact":
        return compact_request(form, prompt, response)
    raise ValueError(f"unknown template style {style!r}; choose one of {', '.join(STYLES)}")


def feedback_json(feedback: SpanFeedback, compact: bool = False, critique: bool = True) -> str:
    """The SFT target of ``feedback``: its form's JSON with the paper's key names (critique first, so the
    model writes its analysis before the spans it supports). ``critique=False`` leaves the critique field out:
    the target of the paper's "spans without critique" ablation, a reward model that only marks spans.
    ``"incomplete": true`` closes the object only when the feedback says so (``SpanFeedback.incomplete``)."""
    critique_key = "code_feedback" if feedback.form == "code" else "textual_feedback"
    body: dict = {critique_key: feedback.critique} if critique else {}
    if feedback.form == "spans":
        body.update(good_spans=list(feedback.good), poor_spans=list(feedback.poor))
    elif feedback.form == "code":
        body.update(wrong_code=list(feedback.wrong), improvement_code=list(feedback.improvable))
    else:
        body["word_score_list"] = [[w, s] for w, s in feedback.word_scores]
    if feedback.incomplete:
        body["incomplete"] = True
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(body, ensure_ascii=False, separators=separators)
