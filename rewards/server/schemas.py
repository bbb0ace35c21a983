"""Request and response bodies of the reward server (pydantic v2).

The OpenAI-compatible bodies accept (and ignore) fields this server does not use, as vLLM's server
does, so the official ``openai`` client works unchanged; ``response_format`` (``json_object`` /
``json_schema``) constrains decoding through the engine (``SamplingParams.json_schema``); fields that would change the meaning of the
answer and are not supported (``stream=True``, ``best_of``, ``echo``, ``suffix``) are refused with 400.
The rubric-scoring body is strict (unknown fields are 422) so typos do not pass silently.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posttrain.engines.base import check_json_schema
from rewards.mr3.official import get_format

Mode = Literal["pointwise", "pairwise", "binary"]


class RubricScoreRequest(BaseModel):
    """``POST /v1/rubric_score``: judge one input with one (pointwise, binary) or two (pairwise) responses."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode
    instruction: str = Field(description="The user's prompt (the input being answered).")
    responses: list[str] = Field(max_length=2, description="As many as the template judges: 2 for pairwise, "
                                 "0 for safety-prompt, the answer options as one text for mcq, else 1.")
    template: str | None = Field(None, description="An mR3 format (pairwise-general, math-correctness, "
                                 "safety-response, mcq, ...); default: the mode's.")
    rubric: dict[str, str] | None = Field(None, description="Score value -> description; default: mR3's.")
    good_verdict: str | None = Field(None, description="Binary: the verdict that earns reward 1; default: the "
                                     "template's (required with a rubric of your own).")
    gold: str | None = Field(None, description="Multiple choice: the correct option (reward = accuracy).")
    task_description: str | None = None
    reference: str | None = Field(None, description="Optional gold answer shown to the judge.")
    language: str | None = Field(None, description="Language of the input, ISO code or name.")
    prompt_language: Literal["en", "tgt"] = "en"
    reasoning_language: Literal["en", "tgt"] = "en"
    system_message: str | None = None
    n_samples: int = Field(1, ge=1, le=16, description="Verdicts sampled per prompt (averaged).")
    swap_positions: bool = Field(True, description="Pairwise: also judge with A and B swapped.")
    max_tokens: int | None = Field(None, ge=1, description="Cap on reasoning + verdict tokens; default: what "
                                   "the model's context leaves (the tiny judge's own small budget), capped by "
                                   "the server's limits.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    seed: int | None = None
    id: str | None = Field(None, description="Sample id; seeds the reproducible rubric paraphrase choice.")
    model: str | None = None

    @model_validator(mode="after")
    def _responses_match_template(self) -> RubricScoreRequest:
        need = get_format(self.template, self.mode).n_responses
        if len(self.responses) != need:
            raise ValueError(f"mode '{self.mode}' (template {self.template or 'default'}) needs exactly {need} "
                             f"response(s), got {len(self.responses)}")
        if self.rubric is not None and len(self.rubric) < 2:
            raise ValueError("rubric needs at least two score values")
        return self


class RubricScoreBatchRequest(BaseModel):
    """``POST /v1/rubric_score/batch``: several items scored together (one result per item, in order)."""

    model_config = ConfigDict(extra="forbid")

    requests: list[RubricScoreRequest] = Field(min_length=1)


class RubricScoreResponse(BaseModel):
    id: str
    model: str
    mode: Mode
    score_raw: str | None
    reward: float
    p_first: float | None = None
    parse_ok: bool
    explanation: str = ""
    reasoning: str = ""
    n_parsed: int
    n_samples: int
    errors: list[str] = []
    usage: dict[str, int]


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: OpenAI's named schema (``schema`` is the JSON Schema itself)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = "output"
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """``response_format`` (OpenAI's, which vLLM's server also takes on ``/v1/completions``): ``text``,
    ``json_object`` (any JSON object) or ``json_schema`` (a document valid under ``json_schema.schema``)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    def schema_text(self) -> str | None:
        """The JSON Schema to constrain decoding to, as text (None for free text); ``ValueError`` naming
        the field when it is missing or not a valid JSON Schema."""
        if self.type == "text":
            return None
        if self.type == "json_object":
            return '{"type": "object"}'
        if self.json_schema is None or self.json_schema.schema_ is None:
            raise ValueError("response_format.json_schema.schema is required when response_format.type is "
                             "'json_schema'")
        text = json.dumps(self.json_schema.schema_)
        try:
            check_json_schema(text)
        except ValueError as err:
            raise ValueError(f"response_format.json_schema.schema: {err}") from None
        return text


class _OpenAIBase(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)  # vLLM extension; -1 or 0 = off
    n: int = Field(1, ge=1, le=16)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    response_format: ResponseFormat | None = None


class CompletionRequest(_OpenAIBase):
    """``POST /v1/completions`` (prompt: text, list of texts, token ids, or list of token-id lists)."""

    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=5)
    echo: bool | None = False
    best_of: int | None = None
    suffix: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = []
        for part in self.content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"only text content parts are supported, got type {part.get('type')!r}")
            parts.append(part["text"])
        return "".join(parts)


class ChatCompletionRequest(_OpenAIBase):
    """``POST /v1/chat/completions``; a final assistant message is continued (vLLM's continue_final_message)."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(None, ge=0, le=5)
    continue_final_message: bool | None = None
    add_generation_prompt: bool | None = None
