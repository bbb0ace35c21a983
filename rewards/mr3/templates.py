"""mR3 prompt templates: the three evaluation formats, rubric rendering, language instructions, chat rendering.

The mR3 contract (paper notes §3.1): the model sees a task instruction, the user's input, one or two
responses and a rubric, and answers with a reasoning trace followed by a JSON object
``{"explanation": str, "score": str}``. Two template *styles* are provided:

- ``"mr3"``: the official layout (``dataset_gen.py``): system = ``"{system_msg}\\n\\n{developer_text}"`` with
  ``# Instruction``, ``# Evaluation Rubric`` (``key: value`` per line) and ``# Response Format`` (the JSON
  schema printed as a Python dict, ``score`` enumerating the allowed values); user = ``# Input (User's
  Prompt)`` / ``# Assistant A`` / ``# Assistant B`` (or ``# Response``) / ``# Your Response``; the
  assistant turn is opened by the chat template and forced to start with ``<think>`` plus an optional
  language-forcing sentence.
- ``"compact"``: a few-character layout for the embedded character-level tiny reward model (256-token
  context). Same score spaces and the same output contract (reasoning, ``</think>``, JSON), so the
  same parser and reward mapping apply. It is *not* an mR3 layout; use ``"mr3"`` for real checkpoints.

Deviations from the official code (deliberate):

- Rubric paraphrase choice and key shuffling are seeded with a SHA-256 of ``(sample key, seed)``, not
  Python's per-process randomised ``hash()`` (pitfall 1 in the notes), so prompts are reproducible.
- The official templates are translated into 152 languages; we ship only the English text. For a
  target-language *prompt* the English template is used with an explicit "reason and answer in
  <language>" system message (pass ``system_message=`` to use your own translation). Target-language
  *reasoning* is forced, as in mR3, by a thinking prefix sentence.
- An optional ``# Reference Answer`` section (off unless given) lets binary correctness use a gold answer.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MODES = ("pointwise", "pairwise", "binary")
STYLES = ("mr3", "compact")

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

LANGUAGES: dict[str, str] = {
    "en": "English", "ar": "Arabic", "bn": "Bengali", "cs": "Czech", "de": "German", "el": "Greek",
    "es": "Spanish", "fa": "Persian", "fr": "French", "he": "Hebrew", "hi": "Hindi", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sw": "Swahili", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian",
    "vi": "Vietnamese", "zh": "Chinese", "yo": "Yoruba", "jv": "Javanese", "su": "Sundanese",
}

TASK_DESCRIPTIONS = {
    "pairwise": ("Evaluate the response based on the given task, input, two responses, and evaluation rubric. "
                 "Provide a fair and detailed assessment following the rubric."),
    "pointwise": ("Evaluate the response based on the given task, input, response, and evaluation rubric. "
                  "Provide a fair and detailed assessment following the rubric."),
    "binary": ("Evaluate whether the response is correct and appropriate based on the given task, input, "
               "response, and evaluation rubric. Provide a fair and detailed assessment following the rubric."),
}

# Three paraphrases per format (mR3 picks one at random and shuffles its keys).
RUBRICS: dict[str, list[dict[str, str]]] = {
    "pairwise": [
        {"Assistant A": "Assistant A provides a better response to the user's prompt than Assistant B.",
         "Assistant B": "Assistant B provides a better response to the user's prompt than Assistant A."},
        {"Assistant A": "Assistant A's answer is more helpful, accurate and relevant to the input.",
         "Assistant B": "Assistant B's answer is more helpful, accurate and relevant to the input."},
        {"Assistant A": "The response of Assistant A is preferred over the response of Assistant B.",
         "Assistant B": "The response of Assistant B is preferred over the response of Assistant A."},
    ],
    "pointwise": [
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
    ],
    "binary": [
        {"true": "The response correctly and appropriately answers the input.",
         "false": "The response is incorrect or inappropriate for the input."},
        {"true": "The response is correct.", "false": "The response is not correct."},
        {"true": "The answer given in the response is right.", "false": "The answer given in the response is wrong."},
    ],
}

SCORE_DESCRIPTIONS = {
    "pairwise": "The selected response, one of {values}.",
    "pointwise": "The score assigned to the response, one of {values}.",
    "binary": "Whether the response is correct, one of {values}.",
}
EXPLANATION_DESCRIPTION = "A brief reasoning that supports the score, based on the evaluation rubric."


def language_name(code_or_name: str | None) -> str:
    """``"ko"`` -> ``"Korean"``; an unknown code or a full name is returned unchanged; None -> English."""
    if not code_or_name:
        return "English"
    return LANGUAGES.get(code_or_name.lower(), code_or_name)


def system_message(language: str | None = None, reasoning_language: str | None = None) -> str:
    """The mR3 system message; English text, naming the language to reason and answer in."""
    lang = language_name(reasoning_language or language)
    return f"You are Qwen3, an AI assistant that reasons, thinks, and answers strictly in {lang}."


def thinking_prefix(reasoning_language: str | None = None, force_language: bool = False) -> str:
    """``<think>`` plus, when forcing a (non-English) reasoning language, mR3's forcing sentence."""
    prefix = THINK_OPEN + "\n"
    if force_language:
        prefix += f"Okay, I have to think explicitly and provide my answer in {language_name(reasoning_language)}. "
    return prefix


def default_score_values(mode: str, rubric: Mapping[str, str] | None = None) -> list[str]:
    """Allowed ``score`` values: the rubric's keys (numeric keys sorted numerically) or the format default."""
    check_mode(mode)
    if rubric:
        keys = [str(k) for k in rubric]
        if all(_is_number(k) for k in keys):
            return sorted(keys, key=float)
        if mode == "pairwise":
            order = {"Assistant A": 0, "Assistant B": 1, "Tie": 2, "Both Bad": 3}
            return sorted(keys, key=lambda k: order.get(k, 9))
        return keys
    return list(RUBRICS[mode][0])


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {list(MODES)}")


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def stable_rng(key: str, seed: int = 0) -> random.Random:
    """A ``random.Random`` seeded from SHA-256 of ``key`` and ``seed``: same in every process."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def choose_rubric(mode: str, key: str = "", seed: int = 0, shuffle_keys: bool = True) -> dict[str, str]:
    """One of the format's paraphrased rubrics, with its keys shuffled, reproducibly from ``key``/``seed``."""
    check_mode(mode)
    rng = stable_rng(key, seed)
    rubric = dict(rng.choice(RUBRICS[mode]))
    items = list(rubric.items())
    if shuffle_keys:
        rng.shuffle(items)
    return dict(items)


def render_rubric(rubric: Mapping[str, Any]) -> str:
    """``key: value`` one per line, in the given order."""
    return "\n".join(f"{k}: {v}" for k, v in rubric.items())


def response_schema(mode: str, values: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of the verdict (printed into the prompt as a Python dict, as mR3 does)."""
    quoted = ", ".join(f"'{v}'" for v in values)
    return {
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "description": EXPLANATION_DESCRIPTION},
            "score": {"type": "string", "description": SCORE_DESCRIPTIONS[mode].format(values=quoted),
                      "enum": list(values)},
        },
        "required": ["explanation", "score"],
    }


@dataclass
class EvalItem:
    """One thing to judge. ``responses`` has 2 entries for pairwise, 1 otherwise."""

    mode: str
    instruction: str
    responses: list[str]
    rubric: dict[str, str] | None = None  # None = a default paraphrase, chosen from ``key``
    task_description: str | None = None
    reference: str | None = None
    language: str | None = None  # language of the input (ISO code or name)
    prompt_language: str = "en"  # "en" or "tgt"
    reasoning_language: str = "en"  # "en" or "tgt"
    system_message: str | None = None  # override (e.g. your own translation)
    key: str = ""  # sample id for reproducible rubric choice
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_mode(self.mode)
        need = 2 if self.mode == "pairwise" else 1
        if len(self.responses) != need:
            raise ValueError(f"mode {self.mode!r} needs {need} response(s), got {len(self.responses)}")
        for name in ("prompt_language", "reasoning_language"):
            if getattr(self, name) not in ("en", "tgt"):
                raise ValueError(f"{name} must be 'en' or 'tgt', got {getattr(self, name)!r}")

    def resolved_rubric(self, seed: int = 0) -> dict[str, str]:
        if self.rubric:
            return {str(k): str(v) for k, v in self.rubric.items()}
        return choose_rubric(self.mode, self.key or self.instruction, seed)

    def score_values(self, seed: int = 0) -> list[str]:
        return default_score_values(self.mode, self.resolved_rubric(seed))

    def swapped(self) -> EvalItem:
        """The pairwise item with A and B exchanged (rubric unchanged: its keys name positions)."""
        if self.mode != "pairwise":
            raise ValueError("only pairwise items can be swapped")
        return EvalItem(**{**self.__dict__, "responses": list(reversed(self.responses))})


def build_messages(item: EvalItem, seed: int = 0) -> list[dict[str, str]]:
    """mR3 system + user messages for ``item`` (style ``"mr3"``)."""
    rubric = item.resolved_rubric(seed)
    values = default_score_values(item.mode, rubric)
    reason_lang = item.language if item.reasoning_language == "tgt" else "en"
    if item.system_message:
        sys_msg = item.system_message
    elif item.prompt_language == "tgt" or item.reasoning_language == "tgt":
        sys_msg = system_message(reasoning_language=reason_lang)
    else:
        sys_msg = system_message()
    developer = (
        f"# Instruction\n{item.task_description or TASK_DESCRIPTIONS[item.mode]}\n\n"
        f"# Evaluation Rubric\n{render_rubric(rubric)}\n\n"
        f"# Response Format\n\n{response_schema(item.mode, values)}"
    )
    user = f"# Input (User's Prompt)\n{item.instruction}\n\n"
    if item.mode == "pairwise":
        user += f"# Assistant A\n{item.responses[0]}\n\n# Assistant B\n{item.responses[1]}\n\n"
    else:
        user += f"# Response\n{item.responses[0]}\n\n"
    if item.reference is not None:
        user += f"# Reference Answer\n{item.reference}\n\n"
    user += "# Your Response\n"
    return [{"role": "system", "content": f"{sys_msg}\n\n{developer}"}, {"role": "user", "content": user}]


def render_chat(tokenizer: Any, messages: list[dict[str, str]], assistant_prefix: str = "") -> str:
    """Render ``messages`` with the tokenizer's chat template (generation prompt, thinking enabled) and
    append ``assistant_prefix``. Without a chat template: a plain ``<|role|>`` layout."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             enable_thinking=True)
    else:
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
    if assistant_prefix.startswith(THINK_OPEN) and text.rstrip().endswith(THINK_OPEN):
        assistant_prefix = assistant_prefix[len(THINK_OPEN):].lstrip("\n")
    return text + assistant_prefix


_INT = re.compile(r"\s*([+-]?\d{1,3})\s*")
_PROBLEM = re.compile(r"\s*(\d{1,2})\s*([+-])\s*(\d{1,2})\s*=\s*")


def compact_number(text: str) -> str:
    """Integers in a fixed-width signed form (``"7"`` -> ``"+007"``, ``"-19"`` -> ``"-019"``); any other text
    is returned unchanged. Fixed widths put digits at fixed offsets, which a tiny model compares easily."""
    match = _INT.fullmatch(text)
    return f"{int(match.group(1)):+04d}" if match else text


def compact_problem(text: str) -> str:
    """Two-operand ``a+b=`` / ``a-b=`` problems with zero-padded operands (``"3+17="`` -> ``"03+17="``)."""
    match = _PROBLEM.fullmatch(text)
    return f"{int(match.group(1)):02d}{match.group(2)}{int(match.group(3)):02d}=" if match else text


def compact_prompt(item: EvalItem) -> str:
    """The tiny model's layout, e.g. ``"P|12+07=|A:+019|B:+018|<think>"`` (numbers in fixed width, see
    ``compact_number``), with ``ref:+019`` after the problem when a reference answer is given; the
    reasoning goes up to ``</think>``."""
    tag = {"pairwise": "P", "pointwise": "S", "binary": "C"}[item.mode]
    parts = [tag, compact_problem(item.instruction)]
    if item.reference is not None:
        parts.append(f"ref:{compact_number(item.reference)}")
    if item.mode == "pairwise":
        parts += [f"A:{compact_number(item.responses[0])}", f"B:{compact_number(item.responses[1])}"]
    else:
        parts += [f"R:{compact_number(item.responses[0])}"]
    return "|".join(parts) + "|" + THINK_OPEN


def render_prompt(item: EvalItem, tokenizer: Any = None, style: str = "mr3", seed: int = 0) -> str:
    """The full prompt text the reward model continues (ends inside the thinking block)."""
    if style == "compact":
        return compact_prompt(item)
    if style != "mr3":
        raise ValueError(f"template style {style!r} is not one of {list(STYLES)}")
    force = item.reasoning_language == "tgt" and language_name(item.language) != "English"
    prefix = thinking_prefix(item.language, force_language=force)
    return render_chat(tokenizer, build_messages(item, seed), prefix)


def format_verdict(score: str, explanation: str = "", reasoning: str = "", style: str = "mr3") -> str:
    """A target completion in the contract's shape (used to build SFT data). The prompt already opened
    ``<think>``, so the completion is ``reasoning</think>`` + JSON."""
    import json

    if style == "compact":
        short = {"Assistant A": "A", "Assistant B": "B"}.get(score, score)
        return f"{reasoning}{THINK_CLOSE}" + json.dumps({"score": short}, separators=(",", ":"))
    body = json.dumps({"explanation": explanation, "score": score}, ensure_ascii=False)
    return f"{reasoning.strip()}\n{THINK_CLOSE}\n\n{body}"
