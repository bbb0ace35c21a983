"""Structured output from any ``GenerationEngine``: schema-constrained JSON or prefilled prompts, then
validation and bounded retries.

DESIGNER (Liu et al., 2025) asks its annotator and generator for fields (discipline, difficulty, type;
selected logic id, question, reference answer). Here every such call renders the chat with
``posttrain.models.chat.render_chat``. A request with a ``json_schema`` has the engine decode only JSON
documents valid under it (``SamplingParams.json_schema``); one without (a Mermaid flowchart, or the
free-text ablation of a JSON step) opens the assistant turn with a prefix (``{"discipline": "`` or a
flowchart header) so that even a small model starts in the right form. Every reply is parsed and
validated (the backstop: a budget can cut a document short, and the validators check what a schema
cannot), and a failed record is retried up to ``retries`` more times with a fresh sampling seed. A record
that fails every attempt becomes an ``Outcome`` without a value, carrying the last reason; callers turn it
into a counted reject. The paper's models are large enough to answer in JSON; the schema and the prefix
are this implementation's additions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from posttrain.common.seeds import derive_seed
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.models.chat import render_chat


class InvalidOutput(ValueError):
    """A reply that does not meet its schema; the message says which field and why."""


@dataclass
class Outcome:
    """One request's result: the validated ``value`` (None when every attempt failed, then ``reason`` is
    the last validator message) and how many ``attempts`` were made."""

    value: Any
    attempts: int
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass
class Request:
    """One structured call: chat ``messages``, the assistant-turn ``prefix`` and ``validate(reply)``
    returning the parsed value or raising ``InvalidOutput``. With ``json_schema`` (JSON Schema text) the
    completion is decoded under it and the reply is the completion alone; without, the reply is
    ``prefix + completion``."""

    messages: list[dict[str, str]]
    prefix: str
    validate: Callable[[str], Any]
    json_schema: str | None = None

    def prompt(self, tokenizer: Any) -> str:
        """The rendered chat, opened with ``prefix`` unless decoding is schema-constrained."""
        return render_chat(tokenizer, self.messages) + ("" if self.json_schema else self.prefix)

    def reply(self, completion: str) -> str:
        """What ``validate`` sees."""
        return completion if self.json_schema else self.prefix + completion


def parse_json_object(text: str) -> dict:
    """The first complete JSON object in ``text`` (text after it is ignored)."""
    start = text.find("{")
    if start < 0:
        raise InvalidOutput("no JSON object in the reply")
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as err:
        raise InvalidOutput(f"reply is not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(value, dict):
        raise InvalidOutput("reply JSON is not an object")
    return value


def require_string(obj: dict, key: str, choices: tuple[str, ...] | None = None) -> str:
    """``obj[key]`` as a stripped non-empty string (one of ``choices``, case-insensitive, if given)."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidOutput(f"field {key!r} missing or not a non-empty string")
    value = " ".join(value.split())
    if choices is not None:
        lookup = {c.lower(): c for c in choices}
        if value.lower() not in lookup:
            raise InvalidOutput(f"field {key!r} = {value[:40]!r} is not one of {list(choices)}")
        value = lookup[value.lower()]
    return value


def generate_structured(engine: GenerationEngine, requests: list[Request], params: SamplingParams,
                        retries: int = 2, seed: int = 0, retry_temperature: float = 0.7) -> list[Outcome]:
    """One ``Outcome`` per request. Attempt ``a`` samples with seed ``derive_seed(seed, "attempt", a)``: attempt 0 with ``params``
    as given (e.g. greedy), retries at ``retry_temperature`` when ``params`` is greedy, so that a retry can
    differ. The requests still pending are batched per attempt, one ``generate`` call per distinct schema."""
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    outcomes: list[Outcome | None] = [None] * len(requests)
    reasons: dict[int, str] = {}
    pending = list(range(len(requests)))
    prompts = [r.prompt(engine.tokenizer) for r in requests]
    for attempt in range(retries + 1):
        if not pending:
            break
        temperature = params.temperature if attempt == 0 or params.temperature > 0 else retry_temperature
        by_schema: dict[str | None, list[int]] = {}
        for i in pending:
            by_schema.setdefault(requests[i].json_schema, []).append(i)
        still: list[int] = []
        for schema, group in by_schema.items():
            attempt_params = replace(params, seed=derive_seed(seed, "attempt", attempt), temperature=temperature, json_schema=schema)
            ids = [engine.tokenizer(prompts[i], add_special_tokens=False)["input_ids"] for i in group]
            rollouts = engine.generate(ids, attempt_params)
            for i, text in zip(group, rollouts.texts, strict=True):
                try:
                    outcomes[i] = Outcome(requests[i].validate(requests[i].reply(text)), attempt + 1)
                except InvalidOutput as err:
                    reasons[i] = str(err)
                    still.append(i)
        pending = sorted(still)
    for i in pending:
        outcomes[i] = Outcome(None, retries + 1, reasons[i])
    return outcomes  # type: ignore[return-value]


_LETTER = re.compile(r"(?:^|\s|\()([A-D])[\).:]\s")


def check_multiple_choice(question: str, answer: str) -> None:
    """A multiple-choice question lists options A and B at least (``A) ...``, ``B. ...``) and its answer
    starts with one of the listed letters; ``InvalidOutput`` otherwise."""
    letters = sorted(set(_LETTER.findall(" " + question)))
    if "A" not in letters or "B" not in letters:
        raise InvalidOutput("multiple-choice question without options A) and B)")
    key = answer.strip().lstrip("(").upper()[:1]
    if key not in letters:
        raise InvalidOutput(f"multiple-choice answer {answer[:20]!r} is not one of the options {letters}")
