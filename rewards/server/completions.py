"""The reward server's OpenAI-compatible generation routes (non-streaming; the official ``openai`` client
works): ``POST /v1/completions`` (text or token-id prompts, vLLM's ``stop_token_ids`` and
``return_token_ids`` extensions) and ``POST /v1/chat/completions`` (rendered through the model's chat
template; ``<think>`` reasoning split into ``reasoning_content``). ``response_format`` (``json_object``,
``json_schema``) constrains decoding through the engine."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from fastapi import APIRouter

from posttrain.models.chat import render_chat
from rewards.mr3.templates import THINK_CLOSE
from rewards.server.batching import Generated, sample_params
from rewards.server.guard import APIError
from rewards.server.schemas import ChatCompletionRequest, CompletionRequest
from rewards.server.state import ServerState, State

router = APIRouter()


def apply_stop(text: str, stop: str | list[str] | None) -> tuple[str, bool]:
    """``text`` cut at the first stop string it contains, and whether it was cut."""
    stops = [stop] if isinstance(stop, str) else (stop or [])
    cut = min((text.find(s) for s in stops if s and s in text), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def reject_unsupported(req: CompletionRequest | ChatCompletionRequest) -> None:
    """A 400 for streaming and for more than 4 stop sequences."""
    if req.stream:
        raise APIError(400, "stream=true is not supported by this server; send stream=false")
    if isinstance(req.stop, list) and len(req.stop) > 4:
        raise APIError(400, "at most 4 stop sequences are allowed")


def usage(outs: list[Generated]) -> dict[str, int]:
    """OpenAI's ``usage`` of a request's generations."""
    prompt = sum(len(o.prompt_ids) for o in outs)
    completion = sum(len(o.completion_ids) for o in outs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _prompt_ids(req: CompletionRequest, state: ServerState) -> list[list[int]]:
    """The request's prompts as token ids (a string, strings, ids or lists of ids)."""
    raw, served = req.prompt, state.served
    if isinstance(raw, str):
        return [served.encode(raw)]
    if raw and all(isinstance(x, int) for x in raw):
        return [list(raw)]  # type: ignore[arg-type]
    if raw and all(isinstance(x, str) for x in raw):
        return [served.encode(x) for x in raw]  # type: ignore[union-attr]
    if raw and all(isinstance(x, list) for x in raw):
        return [list(x) for x in raw]  # type: ignore[union-attr]
    raise APIError(400, "prompt must be a string, a list of strings, or token ids (non-empty)")


@router.post("/v1/completions")
async def completions(req: CompletionRequest, state: State) -> dict:
    state.check_model(req.model)
    reject_unsupported(req)
    if req.echo or (req.best_of not in (None, 1)) or req.suffix:
        raise APIError(400, "echo, best_of > 1 and suffix are not supported by this server")
    max_tokens = req.max_tokens or state.settings.default_max_tokens
    state.check_tokens(max_tokens, "max_tokens")
    prompts, vocab = _prompt_ids(req, state), state.vocab_size
    for i, ids in enumerate(prompts):
        if any((not isinstance(t, int)) or t < 0 or t >= vocab for t in ids):
            raise APIError(400, f"prompt {i} has token ids outside the vocabulary [0, {vocab})")
        state.check_context(ids, max_tokens, i)
    params = state.sampling(max_tokens, req.temperature, req.top_p, req.top_k, req.seed,
                            response_format=req.response_format)
    stop_ids = (req.model_extra or {}).get("stop_token_ids")  # vLLM's extension (OpenAIHTTPEngine sends it)
    if stop_ids:
        if not isinstance(stop_ids, list) or not all(isinstance(t, int) and 0 <= t < vocab for t in stop_ids):
            raise APIError(400, f"stop_token_ids must be a list of token ids in [0, {vocab})")
        params = replace(params, stop_token_ids=tuple(stop_ids))
    expanded = [ids for ids in prompts for _ in range(req.n)]
    outs = await state.generate(expanded, sample_params(params, expanded))
    want_ids = bool((req.model_extra or {}).get("return_token_ids"))
    tokenizer = state.served.tokenizer
    choices = []
    for index, out in enumerate(outs):
        text, stopped = apply_stop(out.text, req.stop)
        choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None,
                                  "finish_reason": "stop" if stopped else out.finish_reason}
        if req.logprobs is not None:
            tokens = [tokenizer.decode([t]) for t in out.completion_ids]
            offsets, pos = [], 0
            for tok in tokens:
                offsets.append(pos)
                pos += len(tok)
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": out.logprobs, "top_logprobs": None,
                                  "text_offset": offsets}
        if want_ids:
            choice["prompt_token_ids"], choice["token_ids"] = out.prompt_ids, out.completion_ids
        choices.append(choice)
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": state.model_name, "choices": choices, "usage": usage(outs)}


@router.post("/v1/chat/completions")
async def chat_completions(req: ChatCompletionRequest, state: State) -> dict:
    state.check_model(req.model)
    reject_unsupported(req)
    served = state.served
    try:
        messages = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
                    for m in req.messages]
    except ValueError as err:
        raise APIError(400, str(err)) from None
    explicit = req.max_completion_tokens or req.max_tokens
    max_tokens = explicit or state.capped(state.settings.default_chat_max_tokens)
    state.check_tokens(max_tokens, "max_tokens")
    continue_final = req.continue_final_message
    if continue_final is None:
        continue_final = messages[-1]["role"] == "assistant"
    if continue_final and messages[-1]["role"] != "assistant":
        raise APIError(400, "continue_final_message needs a final assistant message")
    try:
        text = render_chat(served.tokenizer, messages, add_generation_prompt=not continue_final,
                           continue_final=continue_final)
    except Exception as err:  # noqa: BLE001 - template errors are the request's fault (e.g. role order)
        raise APIError(400, f"the chat template rejected these messages: {err}") from None
    ids = served.encode(text, add_special_tokens=False)
    if not explicit:  # the default budget shrinks to what the context leaves
        max_tokens = max(1, min(max_tokens, served.max_context - len(ids)))
    state.check_context(ids, max_tokens, 0)
    params = state.sampling(max_tokens, req.temperature, req.top_p, req.top_k, req.seed,
                            response_format=req.response_format)
    outs = await state.generate([ids] * req.n, sample_params(params, [ids] * req.n))
    choices = []
    for index, out in enumerate(outs):
        content, stopped = apply_stop(out.text, req.stop)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if THINK_CLOSE in content:
            reasoning, _, answer = content.partition(THINK_CLOSE)
            message["reasoning_content"] = reasoning.replace("<think>", "").strip()
            message["content"] = answer.strip()
        choice: dict[str, Any] = {"index": index, "message": message, "logprobs": None,
                                  "finish_reason": "stop" if stopped else out.finish_reason}
        if req.logprobs:
            choice["logprobs"] = {"content": [
                {"token": served.tokenizer.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
                for t, lp in zip(out.completion_ids, out.logprobs)]}
        choices.append(choice)
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": state.model_name, "choices": choices, "usage": usage(outs)}
