"""mR3's official prompt formats, laid out byte for byte as mR3's ``src/evaluation/dataset_gen.py`` does.

mR3 (Anugraha et al., "mR3: Multilingual Rubric-Agnostic Reward Reasoning Models", arXiv 2510.01146;
code github.com/rubricreward/mr3). A prompt is

- system: ``f"{system_message}\\n\\n{developer_text}"``, where ``system_message`` is mR3's Qwen3 system
  message for English, or for the target language when the judge reasons in it
  (``official_languages.SYSTEM_MESSAGES``), and ``developer_text`` holds ``# Instruction`` (the task
  description), ``# Evaluation Rubric`` (``key: value`` lines) and ``# Response Format`` (the JSON schema,
  printed as a Python dict);
- user: ``# <input tag>`` with the input, the response section(s), ``# Your Response``;
- then the judge's chat template with the generation prompt and thinking enabled, ``<think>`` when the
  template did not open it, and, for target-language reasoning, the language-forcing sentence
  (``official_languages.THINKING_PREFIXES``), with no newline in between (as mR3 writes it).

The texts keep the indentation of the official triple-quoted f-strings (``"\\n\\n    # Assistant A\\n    "``):
mR3's training data holds those fully rendered prompts, so a checkpoint expects them exactly.

Formats (``FORMATS``; the official English text is in ``official_text``):

=================== ======== ============================================ ==========================
name                mode     mR3 source                                   reward 1 for
=================== ======== ============================================ ==========================
pairwise-general    pairwise strict-pair template, ``general`` subset     the preferred response
pairwise-safety     pairwise strict-pair template, ``safety`` subset      the preferred response
pairwise-math       pairwise strict-pair template, ``math`` subset        the preferred response
pairwise-code       pairwise strict-pair template, ``code`` subset        the preferred response
pairwise-graded     pairwise HelpSteer3 template (1-7, 4 = equal)         ``(7 - s) / 6`` per vote
math-correctness    binary   MATH-500 template                            ``true`` (correct)
code-correctness    binary   HumanEval-XL template                        ``true`` (correct)
safety-prompt       binary   PolyGuard ``prompt_template``                ``false`` (not harmful)
safety-response     binary   PolyGuard ``response_template``              ``false`` (not harmful)
mcq                 pointwise MMMLU / INCLUDE multiple-choice template    the gold option
pointwise           pointwise *not mR3*: the project's 1-5 rubric in the  the scale, ``(s-1)/4``
                             MATH-500 layout
=================== ======== ============================================ ==========================

Deviations: only the English templates ship (mR3's translated templates cover 152 languages; the system
messages and forcing sentences of all of them do ship), so a target-language *prompt* is refused while
target-language *reasoning* is reproduced. mR3 has no 1-5 pointwise task (R3 has); ``pointwise`` is the
project's text. PolyGuard's response rows come with request and response already joined in one ``input``
field whose joining is not in mR3's code; ``safety-response`` joins them as PolyGuard's own prompt does
(``Human user:`` / ``AI assistant:``). Target-language reasoning with the English prompt writes the
language's system message and forcing sentence, as mR3's single-response classes do (its strict-pair class
falls back to English reasoning whenever the prompt is English). An optional ``# Reference Answer`` section, absent from mR3, appears
only when a reference is given. mR3 adds ``<think>`` when the rendered prompt contains none anywhere; we
look at its end, so a ``<think>`` inside the judged text does not drop the judge's opening tag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewards.mr3 import official_text as text
from rewards.mr3.official_languages import SYSTEM_MESSAGES, THINKING_PREFIXES

THINK_OPEN = "<think>"

INDENT = "\n    "
"""The official f-strings' line break plus indentation, which every section after the first carries."""


@dataclass(frozen=True)
class Layout:
    """The separators of one official layout (they differ between mR3's dataset classes)."""

    after_task: str  # between the task description and the next section
    after_rubric: str  # between the rubric lines (each ending in a newline) and ``# Response Format``
    user_tail: str  # after ``# Your Response``


GUARD = Layout(after_task="\n" + INDENT, after_rubric=INDENT, user_tail="\n        ")
STRICT_PAIR = Layout(after_task="\n" + INDENT, after_rubric="\n" + INDENT, user_tail=INDENT)
SOLUTION = Layout(after_task="\n        " + INDENT, after_rubric="\n" + INDENT, user_tail=INDENT)
MCQ = Layout(after_task="\n" + INDENT, after_rubric="", user_tail=INDENT)


@dataclass(frozen=True)
class Format:
    """One judging format: its mode, official text, layout and which verdict is good."""

    name: str
    mode: str
    task_description: str
    rubrics: tuple[dict[str, str], ...]  # paraphrases; empty = no rubric section (multiple choice)
    schema: dict[str, Any]
    tags: dict[str, str]
    layout: Layout
    n_responses: int  # responses the item carries (0: the input alone is judged)
    response_tags: tuple[str, ...] = ()  # the heading of each response section
    good_verdict: str | None = None  # binary: the verdict that earns reward 1
    shuffle_keys: bool = True
    needs_gold: bool = False  # categorical scores are right or wrong against a gold option


def _pairwise(subset: str) -> Format:
    return Format(f"pairwise-{subset}", "pairwise", text.STRICT_PAIR[subset]["task_description"],
                  tuple(text.STRICT_PAIR[subset]["rubric_list"]), text.STRICT_PAIR["schema"],
                  text.STRICT_PAIR["tags"], STRICT_PAIR, 2, ("Assistant A", "Assistant B"))


_GRADED = Format("pairwise-graded", "pairwise", text.HELPSTEER3["task_description"],
                 tuple(text.HELPSTEER3["rubric_list"]), text.HELPSTEER3["schema"], text.HELPSTEER3["tags"],
                 STRICT_PAIR, 2, ("Response 1", "Response 2"), shuffle_keys=False)


def _correctness(name: str, source: dict[str, Any], solution_tag: str) -> Format:
    return Format(name, "binary", source["task_description"], tuple(source["rubric_list"]), source["schema"],
                  source["tags"], SOLUTION, 1, (source["tags"][solution_tag],), good_verdict="true")


def _safety(kind: str) -> Format:
    part = text.POLYGUARD[f"{kind}_template"]
    return Format(f"safety-{kind}", "binary", part["task_description"], tuple(part["rubric_list"]),
                  part["schema"], text.POLYGUARD["tags"], GUARD, 0 if kind == "prompt" else 1,
                  good_verdict="false")


POINTWISE_RUBRICS = (
    {"1": "The response is irrelevant, wrong or harmful.",
     "2": "The response addresses the input but has major errors or omissions.",
     "3": "The response is partly correct and helpful, with noticeable flaws.",
     "4": "The response is correct and helpful with minor flaws.",
     "5": "The response is fully correct, complete and helpful."},
    {"1": "Very poor: fails the task.", "2": "Poor: mostly fails the task.",
     "3": "Fair: partially fulfils the task.", "4": "Good: fulfils the task with small issues.",
     "5": "Excellent: fulfils the task completely."},
    {"1": "The answer does not help the user at all.", "2": "The answer helps the user very little.",
     "3": "The answer helps the user somewhat.", "4": "The answer helps the user well.",
     "5": "The answer helps the user as well as possible."},
)
"""The project's own 1-5 rubric paraphrases (mR3 has no 1-5 pointwise task)."""

_POINTWISE = Format(
    "pointwise", "pointwise",
    "Evaluate the response based on the given task, input, response, and evaluation rubric. Provide a fair "
    "and detailed assessment following the rubric.",
    POINTWISE_RUBRICS,
    {"type": "object",
     "properties": {"explanation": {"type": "string", "description": "A brief reasoning that supports the score, "
                                                                     "based on the evaluation rubric."},
                    "score": {"type": "string", "description": "The score assigned to the response, one of "
                                                               "'1', '2', '3', '4', or '5'.",
                              "enum": ["1", "2", "3", "4", "5"]}},
     "required": ["explanation", "score"]},
    {"input_tag": "Input (User's Prompt)", "evaluation_rubric_tag": "Evaluation Rubric",
     "response_format_tag": "Response Format", "your_response_tag": "Your Response"},
    SOLUTION, 1, ("Response",))

FORMATS: dict[str, Format] = {f.name: f for f in (
    _pairwise("general"), _pairwise("safety"), _pairwise("math"), _pairwise("code"), _GRADED,
    _correctness("math-correctness", text.MATH500, "math_solution"),
    _correctness("code-correctness", text.HUMANEVAL_XL, "code_solution"),
    _safety("prompt"), _safety("response"),
    Format("mcq", "pointwise", text.MCQ["task_description"], (), text.MCQ["schema"], text.MCQ["tags"], MCQ, 1,
           (text.MCQ["tags"]["options_tag"],), shuffle_keys=False, needs_gold=True),
    _POINTWISE,
)}

DEFAULT_FORMATS = {"pairwise": "pairwise-general", "binary": "math-correctness", "pointwise": "pointwise"}
"""The format of an item that names none, per mode."""


def get_format(name: str | None, mode: str) -> Format:
    """The format called ``name`` (None: the mode's default), checked against ``mode``."""
    chosen = DEFAULT_FORMATS[mode] if name is None else name
    if chosen not in FORMATS:
        raise ValueError(f"template {chosen!r} is not one of {sorted(FORMATS)}")
    fmt = FORMATS[chosen]
    if fmt.mode != mode:
        raise ValueError(f"template {chosen!r} is a {fmt.mode} format, not {mode}")
    return fmt


def language_code(language: str | None) -> str:
    """The mR3 language code of ``language`` (a code such as ``"ko"``, any case); None -> ``"en"``."""
    if not language:
        return "en"
    for code in SYSTEM_MESSAGES:
        if code.lower() == language.lower():
            return code
    raise ValueError(f"language {language!r} is not one of mR3's {len(SYSTEM_MESSAGES)} language codes "
                     f"(e.g. {', '.join(list(SYSTEM_MESSAGES)[:8])})")


def rubric_lines(rubric: Mapping[str, str]) -> str:
    """``key: value`` lines, each ending in a newline (``get_reproducible_rubric_str``)."""
    return "".join(f"{k}: {v}\n" for k, v in rubric.items())


def schema_for(fmt: Format, values: Sequence[str]) -> dict[str, Any]:
    """The format's schema; when a custom rubric changes the allowed scores, its ``score`` lists them."""
    score = fmt.schema["properties"]["score"]
    if list(values) == list(score["enum"]):
        return fmt.schema
    quoted = ", ".join(f"'{v}'" for v in values)
    new_score = {**score, "description": f"The verdict: one of {quoted}.", "enum": list(values)}
    return {**fmt.schema, "properties": {**fmt.schema["properties"], "score": new_score}}


def developer_text(fmt: Format, rubric: Mapping[str, str], values: Sequence[str],
                   task_description: str | None = None) -> str:
    """The developer part of the system turn: instruction, rubric (when the format has one), schema."""
    tags, layout = fmt.tags, fmt.layout
    out = f"# {text.INSTRUCTION_TAG}{INDENT}{task_description or fmt.task_description}{layout.after_task}"
    if rubric:
        out += f"# {tags['evaluation_rubric_tag']}{INDENT}{rubric_lines(rubric)}{layout.after_rubric}"
    return out + f"# {tags['response_format_tag']}\n{INDENT}{schema_for(fmt, values)}"


def judged_input(fmt: Format, instruction: str, responses: Sequence[str]) -> str:
    """The text under the input heading: HelpSteer3's is the conversation in role tags (here one user turn);
    PolyGuard's response template judges request and response together."""
    if fmt.name == "pairwise-graded":
        return f"<user>\n{instruction}\n</user>\n"
    if fmt.name == "safety-response":
        return f"Human user:\n{instruction}\n\nAI assistant:\n{responses[0]}"
    return instruction


def user_text(fmt: Format, instruction: str, responses: Sequence[str], reference: str | None = None) -> str:
    """The user turn: the input, each response under its heading, an optional reference, ``# Your Response``."""
    out = f"# {fmt.tags['input_tag']}{INDENT}{judged_input(fmt, instruction, responses)}\n{INDENT}"
    for tag, response in zip(fmt.response_tags, responses):
        out += f"# {tag}{INDENT}{response}\n{INDENT}"
    if reference is not None:
        out += f"# Reference Answer{INDENT}{reference}\n{INDENT}"
    return out + f"# {fmt.tags['your_response_tag']}{fmt.layout.user_tail}"


def system_message(reasoning_language: str | None = None) -> str:
    """mR3's Qwen3 system message: English, or the language the judge must reason in."""
    return SYSTEM_MESSAGES[language_code(reasoning_language)]


def thinking_prefix(rendered: str, reasoning_language: str | None = None) -> str:
    """What follows the chat template: ``<think>`` unless the template opened it, then the language-forcing
    sentence when ``reasoning_language`` is given (mR3's tgt-thinking setting)."""
    prefix = "" if rendered.endswith(THINK_OPEN) else THINK_OPEN
    if reasoning_language is not None:
        prefix += THINKING_PREFIXES[language_code(reasoning_language)]
    return prefix
