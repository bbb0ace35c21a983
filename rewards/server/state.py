"""The reward server's shared state: one typed object (``ServerState``) that every router reads through the
``server_state`` dependency, holding the served model, the limits, the batcher and the request checks the
routes share (model name, token budgets, context length, sampling settings, generation with its errors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from posttrain.engines.base import SamplingParams, SamplingParamsError
from rewards.mr3.templates import COMPACT_VERDICT_TOKENS
from rewards.server.backends import ServedModel
from rewards.server.batching import Batcher, Generated, QueueFull, TooLarge
from rewards.server.guard import APIError, Metrics, ServerSettings
from rewards.server.schemas import ResponseFormat


@dataclass
class ServerState:
    """Everything the routes of one app share (``app.state.server``)."""

    served: ServedModel
    settings: ServerSettings
    metrics: Metrics
    batcher: Batcher
    style: str
    """The rubric template style: ``settings.style`` or the backend's default."""
    model_name: str
    """The name served in ``/v1/models`` and answers: ``settings.model_name`` or the backend's."""

    @property
    def vocab_size(self) -> int:
        return len(self.served.tokenizer)

    def check_model(self, name: str | None) -> None:
        """A 404 unless ``name`` is unset, this server's model name or ``default``."""
        if name and name not in (self.model_name, "default"):
            raise APIError(404, f"the model '{name}' does not exist; this server serves '{self.model_name}'",
                           "not_found_error", code="model_not_found")

    def check_tokens(self, max_tokens: int, what: str) -> None:
        """A 400 when a request's ``what`` (``max_tokens``) is over ``--max_tokens_cap``."""
        cap = self.settings.max_tokens_cap
        if cap is not None and max_tokens > cap:
            raise APIError(400, f"{what} = {max_tokens} is over this server's limit of {cap}")

    def capped(self, tokens: int, *caps: int | None) -> int:
        """``tokens`` under the server's configured limits (None = no limit)."""
        return max(1, min([tokens, *(c for c in (*caps, self.settings.max_tokens_cap) if c is not None)]))

    def verdict_budget(self, room: int) -> int:
        """The default budget of one verdict: what the context leaves after the prompt (mR3 reasons for
        thousands of tokens), or the compact tiny judge's own short budget, under the server's limits."""
        own = min(room, COMPACT_VERDICT_TOKENS) if self.style == "compact" else room
        return self.capped(own, self.settings.rubric_max_tokens)

    def check_context(self, ids: list[int], max_tokens: int, index: int) -> None:
        """A 400 when prompt ``index`` is empty or does not leave ``max_tokens`` in the model's context."""
        if not ids:
            raise APIError(400, f"prompt {index} is empty")
        limit = self.served.max_context
        if len(ids) + max_tokens > limit:
            raise APIError(400, f"this model's maximum context length is {limit} tokens; prompt {index} "
                                f"has {len(ids)} tokens and max_tokens is {max_tokens}; shorten the prompt or "
                                "lower max_tokens")

    def check_queue(self, generations: int) -> None:
        """A 413 when one request needs more generations than the queue holds."""
        if generations > self.settings.max_queue:
            raise APIError(413, f"these items need {generations} generations; this server queues at most "
                                f"{self.settings.max_queue} (--max_queue)", "request_too_large")

    def check_batch_items(self, items: int) -> None:
        """A 413 when a ``/batch`` request holds more items than ``--max-batch-items``."""
        if items > self.settings.max_batch_items:
            raise APIError(413, f"{items} items in one batch; this server accepts at most "
                                f"{self.settings.max_batch_items}", "request_too_large")

    async def generate(self, prompts: list[list[int]],
                       params: SamplingParams | list[SamplingParams]) -> list[Generated]:
        """Generate through the batcher; queue, size, timeout and sampling failures become API errors."""
        timeout = self.settings.timeout_s
        try:
            return await self.batcher.run(prompts, params, timeout)
        except QueueFull as err:
            raise APIError(429, str(err), "rate_limit_error", headers={"Retry-After": "1"}) from None
        except TooLarge as err:
            raise APIError(413, str(err), "request_too_large") from None
        except TimeoutError:
            raise APIError(504, f"generation did not finish within {timeout:g} s (--timeout)", "timeout") from None
        except SamplingParamsError as err:  # e.g. a schema the engine cannot compile: the request's fault
            raise APIError(400, str(err)) from None

    def sampling(self, max_tokens: int, temperature: float | None, top_p: float | None, top_k: int | None,
                 seed: int | None, default_t: float = 1.0, default_p: float = 1.0, default_k: int = 0,
                 response_format: ResponseFormat | None = None) -> SamplingParams:
        """A request's ``SamplingParams`` (unset fields take the defaults given); bad values are a 400."""
        try:
            return SamplingParams(max_new_tokens=max_tokens,
                                  temperature=default_t if temperature is None else temperature,
                                  top_p=default_p if top_p is None else top_p,
                                  top_k=default_k if top_k is None else max(0, top_k), seed=seed,
                                  json_schema=response_format.schema_text() if response_format else None)
        except ValueError as err:
            raise APIError(400, str(err)) from None


def server_state(request: Request) -> ServerState:
    """The FastAPI dependency that hands a route its app's ``ServerState``."""
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]
"""A route parameter annotated ``State`` receives its app's ``ServerState``."""
