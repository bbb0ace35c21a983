"""Turn task examples into prompt token ids through the tokenizer's chat template.

A tokenizer without a chat template gets the raw prompt text (after the system prompt and a blank
line, when one is given); that fallback is logged once per process. A ``RawPromptExample`` (the dataset
task with ``raw_prompts``) is already the full text the model continues and skips the template. A
``TextExample`` (the dataset task with ``text_column``) has no prompt at all: encoding one is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from posttrain.models.chat import has_chat_template, render_chat
from posttrain.tasks.base import Example

logger = logging.getLogger(__name__)
_warned_no_template = False


@dataclass(frozen=True)
class RawPromptExample(Example):
    """An example whose prompt is already fully rendered (chat markers, special tokens and all), such as
    a row of ``python -m rewards.mr3.data``: it is tokenized as is, with no chat template or system prompt."""


@dataclass(frozen=True)
class TextExample(Example):
    """A plain-text document for language modelling (``--text_column``): ``text`` is trained on, every
    token of it; it has no prompt to answer (``prompt`` and ``answer`` are empty)."""

    text: str = ""


def render_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str, system_prompt: str | None) -> str:
    """The text the model sees before its answer: chat template + generation prompt, or the raw text."""
    global _warned_no_template
    if has_chat_template(tokenizer):
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": prompt})
        return render_chat(tokenizer, messages)
    if not _warned_no_template:
        logger.warning("tokenizer %s has no chat template; prompts are fed as raw text",
                       getattr(tokenizer, "name_or_path", type(tokenizer).__name__))
        _warned_no_template = True
    return f"{system_prompt}\n\n{prompt}" if system_prompt else prompt


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Example],
    system_prompt: str | None,
    max_prompt_tokens: int,
) -> list[list[int]]:
    """Token ids of each example's prompt, ready for generation; an over-long prompt raises.

    Templated text is tokenized without adding special tokens (the template holds them); raw text
    gets the tokenizer's usual special tokens (e.g. a BOS), except that a ``RawPromptExample`` starting
    with the BOS text does not get a second one. A system prompt cannot apply to a ``RawPromptExample``.
    """
    templated = has_chat_template(tokenizer)
    bos = getattr(tokenizer, "bos_token", None)
    encoded: list[list[int]] = []
    for index, example in enumerate(examples):
        if isinstance(example, TextExample):
            raise ValueError(f"example {index} is plain text (--text_column) with no prompt: train it with --algo sft "
                             "and --eval_every 0")
        if isinstance(example, RawPromptExample):
            if system_prompt:
                raise ValueError(f"example {index} has a fully rendered (raw) prompt; a system prompt cannot apply")
            text, special = example.prompt, not (bos and example.prompt.startswith(bos))
        else:
            text, special = render_prompt(tokenizer, example.prompt, system_prompt), not templated
        ids = list(tokenizer(text, add_special_tokens=special)["input_ids"])
        if len(ids) > max_prompt_tokens:
            raise ValueError(f"prompt of example {index} is {len(ids)} tokens, over max_prompt_tokens="
                             f"{max_prompt_tokens}: {example.prompt[:80]!r}")
        encoded.append(ids)
    return encoded
