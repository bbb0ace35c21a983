"""Swap a diffusers model's attention processors for custom ones, and put the stock ones back.

Used by DeLeaker ("Dynamic Inference-Time Reweighting for Semantic Leakage Mitigation in Text-to-Image
Models", ICLR 2026), whose processors replace Flux's. ``swap_processors(model, make)`` installs
``make(name, index)`` on every attention module (``index``: its position in ``model.attn_processors``, the
module order, so a Flux model's double-stream blocks come before its single-stream ones), and on exit restores
the processors that were there. Per-call arguments reach a processor through the model's
``joint_attention_kwargs``, which diffusers forwards only to processors whose ``__call__`` declares them.
An optional ``on_call`` runs before every forward of the model (e.g. to count denoising steps) with the
forward's keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def swap_processors(model: torch.nn.Module, make: Callable[[str, int], Any],
                    on_call: Callable[[dict[str, Any]], None] | None = None) -> Iterator[dict[str, Any]]:
    """Install ``make(name, index)`` on every attention module of ``model`` inside the block; yields the new
    processors by name."""
    if not hasattr(model, "attn_processors") or not hasattr(model, "set_attn_processor"):
        raise ValueError(f"{type(model).__name__} has no diffusers attention processors (attn_processors)")
    saved = dict(model.attn_processors)
    installed = {name: make(name, index) for index, name in enumerate(saved)}
    model.set_attn_processor(dict(installed))
    handle = None
    if on_call is not None:
        handle = model.register_forward_pre_hook(lambda _m, _args, kwargs: on_call(kwargs), with_kwargs=True)
    try:
        yield installed
    finally:
        if handle is not None:
            handle.remove()
        model.set_attn_processor(saved)
