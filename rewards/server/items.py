"""The request handling shared by the reward server's item routes (``rubric``: mR3 scoring, ``span_feedback``:
Text2Grad feedback): each item's prompts get the item's sampling params (its budget or the route's default, every
prompt's context checked, seeds from ``batching.sample_params``), all the prompts of a request go to the batcher
in one call, and a ``/batch`` route answers its items in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from posttrain.engines.base import SamplingParams
from rewards.server.batching import Generated, sample_params
from rewards.server.state import ServerState


class ItemRequest(Protocol):
    """The fields every item request carries (``RubricScoreRequest``, ``SpanFeedbackRequest``)."""

    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    top_k: int | None
    seed: int | None


@dataclass
class ItemPrompts:
    """The prompts of one request's items, each with its sampling params and the index of its item."""

    state: ServerState
    ids: list[list[int]] = field(default_factory=list)
    params: list[SamplingParams] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)

    def add(self, index: int, item: ItemRequest, prompt_ids: list[list[int]], default_max_tokens: Callable[[int], int],
            defaults: tuple[float, float, int]) -> None:
        """Item ``index``'s prompts (its ``model`` already checked): its ``max_tokens`` (checked) or ``default_max_tokens`` of its longest prompt's length,
        each prompt's context checked (a 400 naming the item), unset sampling fields from ``defaults``
        (temperature, top_p, top_k)."""
        state = self.state
        if item.max_tokens is not None:
            state.check_tokens(item.max_tokens, "max_tokens")
            max_tokens = item.max_tokens
        else:
            max_tokens = default_max_tokens(max(map(len, prompt_ids)))
        for ids in prompt_ids:
            state.check_context(ids, max_tokens, index)
        params = state.sampling(max_tokens, item.temperature, item.top_p, item.top_k, item.seed, *defaults)
        self.ids.extend(prompt_ids)
        self.params.extend(sample_params(params, prompt_ids))
        self.owners.extend([index] * len(prompt_ids))

    async def generate(self, items: int) -> list[list[Generated]]:
        """Every prompt through the batcher in one call (a 413 when they exceed the queue); the outputs of each
        of the ``items`` items, in prompt order."""
        self.state.check_queue(len(self.ids))
        outputs = await self.state.generate(self.ids, self.params)
        per_item: list[list[Generated]] = [[] for _ in range(items)]
        for owner, output in zip(self.owners, outputs, strict=True):
            per_item[owner].append(output)
        return per_item


async def answer_batch(requests: Sequence[Any], state: ServerState,
                       answer: Callable[[Sequence[Any], ServerState], Awaitable[list[dict]]]) -> dict:
    """A ``/batch`` route's body: the item count checked (413), then ``answer``'s results in order."""
    state.check_batch_items(len(requests))
    return {"object": "list", "model": state.model_name, "results": await answer(requests, state)}
