"""The one chat renderer: messages -> the text a model continues, for the trainer, the reward server and
the data pipelines alike.

With a chat template the tokenizer's own template renders the messages (``enable_thinking=True`` is
passed for templates that read it, e.g. Qwen3's); without one, a plain ``<|role|>`` layout is used, so
every caller renders the same messages to the same text.
"""

from __future__ import annotations

from typing import Any

PLAIN_LAYOUT = "<|{role}|>\n{content}\n"
"""How a message is laid out for a tokenizer without a chat template."""


def has_chat_template(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def render_chat(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True,
                continue_final: bool = False) -> str:
    """The text of ``messages``: with the assistant's turn opened (``add_generation_prompt``), or with the
    final (assistant) message left open so that generation continues it (``continue_final``)."""
    if continue_final and add_generation_prompt:
        raise ValueError("continue_final continues the last message; it cannot also open a new turn")
    if has_chat_template(tokenizer):
        if continue_final:
            return tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                             enable_thinking=True)
    text = "".join(PLAIN_LAYOUT.format(role=m["role"], content=m["content"]) for m in messages)
    if continue_final:
        return text[:-1]
    return text + ("<|assistant|>\n" if add_generation_prompt else "")
