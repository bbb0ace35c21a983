"""mR3 judge prompts: the item to judge, its rubric and score values, and the two template styles.

The mR3 contract (Anugraha et al., arXiv 2510.01146): the judge sees a task instruction, the user's
input, the response(s) and a rubric, and answers with a reasoning trace followed by a JSON object
``{"explanation": str, "score": str}``. An ``EvalItem`` names its *format* (``template``, one of
``official.FORMATS``; by default the mode's: ``pairwise-general``, ``math-correctness``, ``pointwise``),
which fixes the official text, the allowed scores and which verdict is good. Two *styles* render it:

- ``"mr3"`` (the default for real checkpoints): mR3's official prompt, byte for byte (``official``);
- ``"compact"``: the project's few-character layout for the embedded character-level tiny judge
  (256-token context), e.g. ``P|12+07=|A:+019|B:+018|<think>``. Same score spaces and output contract
  (reasoning, ``</think>``, JSON), so the same parser and rewards apply; it is *not* an mR3 layout. It shows
  the judge what it was trained on whatever form a prompt comes in (the problem found inside a chat-rendered
  or instructed prompt, each answer as the integer it ends on), and refuses a prompt holding no two-operand
  problem (a ``ValueError``; the server's 400), which the tiny judge could only answer with unreadable text.

Which verdict is good is part of the item, never assumed: a binary format says it (mR3's safety formats
use ``true`` = harmful, so ``false`` earns the reward), and an item with its own binary rubric must say
it in ``good_verdict``. A categorical pointwise scale (multiple choice) is scored against ``gold``.

Deviation (pitfall 1 of the official code): the rubric paraphrase and key order are drawn from a SHA-256
of ``(sample key, seed)``, not Python's per-process randomised ``hash()``, so prompts are reproducible.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.models.chat import render_chat
from rewards.mr3 import official
from rewards.mr3.official import THINK_OPEN, Format

MODES = ("pointwise", "pairwise", "binary")
STYLES = ("mr3", "compact")
THINK_CLOSE = "</think>"
COMPACT_VERDICT_TOKENS = 96
"""The compact tiny judge's verdict budget: its longest verdict (worked solution, two checks, JSON) is ~60
tokens; real mR3 checkpoints instead get what their context leaves (they reason for thousands)."""
PAIRWISE_ORDER = {"Assistant A": 0, "Assistant B": 1, "Tie": 2, "Both Bad": 3}


def check_mode(mode: str) -> None:
    """Raise ``ValueError`` unless ``mode`` is one of ``MODES``."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {list(MODES)}")


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def is_numeric_scale(values: Sequence[str]) -> bool:
    """Whether every score value is a number (a scale), as opposed to categories (e.g. options A-D)."""
    return all(_is_number(v) for v in values)


def default_score_values(mode: str, rubric: Mapping[str, str]) -> list[str]:
    """The allowed ``score`` values of a rubric: numeric keys sorted numerically, pairwise labels in the
    order A, B, Tie, Both Bad, any other keys as listed."""
    check_mode(mode)
    keys = [str(k) for k in rubric]
    if is_numeric_scale(keys):
        return sorted(keys, key=float)
    if mode == "pairwise":
        return sorted(keys, key=lambda k: PAIRWISE_ORDER.get(k, len(PAIRWISE_ORDER)))
    return keys


def stable_rng(key: str, seed: int = 0) -> random.Random:
    """A ``random.Random`` seeded from SHA-256 of ``key`` and ``seed``: same in every process."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def choose_rubric(rubrics: Sequence[Mapping[str, str]], key: str = "", seed: int = 0,
                  shuffle_keys: bool = True) -> dict[str, str]:
    """One of the paraphrased ``rubrics`` with its keys shuffled, reproducibly from ``key`` and ``seed``."""
    rng = stable_rng(key, seed)
    items = list(rng.choice(list(rubrics)).items())
    if shuffle_keys:
        rng.shuffle(items)
    return dict(items)


@dataclass
class EvalItem:
    """One thing to judge. ``responses`` holds as many texts as the format judges (2 for pairwise, 0 for
    ``safety-prompt``, the answer options as one text for ``mcq``, else 1)."""

    mode: str
    instruction: str
    responses: list[str]
    rubric: dict[str, str] | None = None  # None = one of the format's paraphrases, chosen from ``key``
    task_description: str | None = None  # None = the format's
    reference: str | None = None  # a gold answer shown to the judge
    language: str | None = None  # language of the input (mR3 code, e.g. "ko")
    prompt_language: str = "en"  # "en" or "tgt"
    reasoning_language: str = "en"  # "en" or "tgt" (reason in ``language``)
    system_message: str | None = None  # override (e.g. your own translation)
    key: str = ""  # sample id for the reproducible rubric choice
    template: str | None = None  # a name in ``official.FORMATS``; None = the mode's default
    good_verdict: str | None = None  # binary: the verdict that earns reward 1; None = the format's
    gold: str | None = None  # categorical pointwise (multiple choice): the correct option

    def __post_init__(self) -> None:
        check_mode(self.mode)
        fmt = self.format()
        if len(self.responses) != fmt.n_responses:
            raise ValueError(f"template {fmt.name!r} ({self.mode}) needs {fmt.n_responses} response(s), "
                             f"got {len(self.responses)}")
        for name in ("prompt_language", "reasoning_language"):
            if getattr(self, name) not in ("en", "tgt"):
                raise ValueError(f"{name} must be 'en' or 'tgt', got {getattr(self, name)!r}")
        values = self.score_values()
        if self.mode == "binary":
            if self.binary_good_verdict() is None:
                raise ValueError(f"the binary rubric with verdicts {values} does not say which verdict is good: "
                                 "set good_verdict")
            if self.good_verdict is not None and self.good_verdict not in values:
                raise ValueError(f"good_verdict {self.good_verdict!r} is not one of the rubric's verdicts {values}")
        elif self.good_verdict is not None:
            raise ValueError(f"good_verdict applies to binary items, not {self.mode}")
        categorical = self.mode == "pointwise" and not is_numeric_scale(values)
        if categorical and self.gold not in values:
            raise ValueError(f"a multiple-choice (categorical) score {values} is right or wrong: gold must be one "
                             f"of them, got {self.gold!r}")
        if self.gold is not None and not categorical:
            raise ValueError("gold applies to multiple-choice (categorical pointwise) items only")

    def format(self) -> Format:
        """The item's format (``official.FORMATS``)."""
        return official.get_format(self.template, self.mode)

    def resolved_rubric(self, seed: int = 0) -> dict[str, str]:
        """The rubric the judge sees: the item's own, else a paraphrase of the format's (empty for mcq)."""
        if self.rubric:
            return {str(k): str(v) for k, v in self.rubric.items()}
        fmt = self.format()
        if not fmt.rubrics:
            return {}
        return choose_rubric(fmt.rubrics, self.key or self.instruction, seed, fmt.shuffle_keys)

    def score_values(self, seed: int = 0) -> list[str]:
        """The allowed scores: the rubric's keys, or the format schema's ``enum`` when it has no rubric."""
        rubric = self.resolved_rubric(seed)
        if rubric:
            return default_score_values(self.mode, rubric)
        return list(self.format().schema["properties"]["score"]["enum"])

    def binary_good_verdict(self) -> str | None:
        """The verdict that earns reward 1: ``good_verdict``, else the format's when its rubric is used."""
        if self.good_verdict is not None:
            return self.good_verdict
        return self.format().good_verdict if self.rubric is None else None

    def swapped(self) -> EvalItem:
        """The pairwise item with A and B exchanged (rubric unchanged: its keys name positions)."""
        if self.mode != "pairwise":
            raise ValueError("only pairwise items can be swapped")
        return dataclasses.replace(self, responses=list(reversed(self.responses)))

    def reasoning_language_code(self) -> str | None:
        """The language the judge must reason in (mR3's tgt-thinking setting), or None for plain English."""
        if self.reasoning_language != "tgt":
            return None
        return self.language or "en"


def build_messages(item: EvalItem, seed: int = 0) -> list[dict[str, str]]:
    """mR3's system + user messages for ``item`` (style ``"mr3"``, see ``official``)."""
    if item.prompt_language == "tgt":
        raise ValueError("prompt_language 'tgt' needs mR3's translated templates, which are not shipped (English "
                         "only); use prompt_language 'en' (reasoning_language 'tgt' still makes the judge reason "
                         "in the input's language)")
    fmt = item.format()
    values = item.score_values(seed)
    system = item.system_message or official.system_message(item.reasoning_language_code())
    developer = official.developer_text(fmt, item.resolved_rubric(seed), values, item.task_description)
    return [{"role": "system", "content": f"{system}\n\n{developer}"},
            {"role": "user", "content": official.user_text(fmt, item.instruction, item.responses, item.reference)}]


def render_prompt(item: EvalItem, tokenizer: Any = None, style: str = "mr3", seed: int = 0) -> str:
    """The full prompt text the judge continues (it ends inside the thinking block)."""
    if style == "compact":
        return compact_prompt(item)
    if style != "mr3":
        raise ValueError(f"template style {style!r} is not one of {list(STYLES)}")
    text = render_chat(tokenizer, build_messages(item, seed))
    return text + official.thinking_prefix(text, item.reasoning_language_code())


_INT = re.compile(r"\s*([+-]?\d{1,3})\s*")
_ANY_INT = re.compile(r"[+-]?\d+")
_PROBLEM = re.compile(r"(?<!\d)(\d{1,2})\s*([+-])\s*(\d{1,2})\s*=")


def compact_number(text: str) -> str:
    """Integers in a fixed-width signed form (``"7"`` -> ``"+007"``, ``"-19"`` -> ``"-019"``); any other text
    is returned unchanged. Fixed widths put digits at fixed offsets, which a tiny model compares easily."""
    match = _INT.fullmatch(text)
    return f"{int(match.group(1)):+04d}" if match else text


def compact_problem(text: str) -> str:
    """The two-operand ``a+b=`` / ``a-b=`` problem ``text`` asks, with zero-padded operands (``"3+17="`` ->
    ``"03+17="``): the last one in it, so a prompt rendered through a chat template or led by an instruction
    (``"<bos><|user|>3+17=<|assistant|>"``, as TRL passes a pre-rendered prompt) gives the problem the tiny judge
    was trained on. ``ValueError`` when ``text`` holds none: the tiny judge can judge nothing else."""
    matches = list(_PROBLEM.finditer(text))
    if not matches:
        raise ValueError(f"the compact layout (the embedded tiny judge) judges two-operand a+b= / a-b= problems "
                         f"(the arithmetic task), and {text[:80]!r} holds none; serve a real judge "
                         "(posttrain serve --model ...) for other prompts")
    a, op, b = matches[-1].groups()
    return f"{int(a):02d}{op}{int(b):02d}="


def compact_answer(text: str) -> str:
    """A response or reference as the tiny judge reads it: its last integer in fixed width (``compact_number``;
    ``"19"``, ``" 19\n"`` and ``"so it is 19."`` -> ``"+019"``; a restated sum ``"12+7"`` -> ``"+007"``, which
    is judged as the 7 it ends on); a text without an integer as it is."""
    numbers = _ANY_INT.findall(text)
    return compact_number(numbers[-1]) if numbers else text


def compact_prompt(item: EvalItem) -> str:
    """The tiny model's layout, e.g. ``"P|12+07=|A:+019|B:+018|<think>"`` (the problem from
    ``compact_problem``, answers from ``compact_answer``), with ``ref:+019`` after the problem when a reference
    answer is given; the reasoning goes up to ``</think>``."""
    tag = {"pairwise": "P", "pointwise": "S", "binary": "C"}[item.mode]
    parts = [tag, compact_problem(item.instruction)]
    if item.reference is not None:
        parts.append(f"ref:{compact_answer(item.reference)}")
    if item.mode == "pairwise":
        parts += [f"A:{compact_answer(item.responses[0])}", f"B:{compact_answer(item.responses[1])}"]
    else:
        parts += [f"R:{compact_answer(item.responses[0])}"]
    return "|".join(parts) + "|" + THINK_OPEN


def format_verdict(score: str, explanation: str = "", reasoning: str = "", style: str = "mr3") -> str:
    """A target completion in the contract's shape (used to build SFT data). The prompt already opened
    ``<think>``, so the completion is ``reasoning</think>`` + JSON."""
    if style == "compact":
        short = {"Assistant A": "A", "Assistant B": "B"}.get(score, score)
        return f"{reasoning}{THINK_CLOSE}" + json.dumps({"score": short}, separators=(",", ":"))
    body = json.dumps({"explanation": explanation, "score": score}, ensure_ascii=False)
    return f"{reasoning.strip()}\n{THINK_CLOSE}\n\n{body}"
