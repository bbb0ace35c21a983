"""An attention tap for Hugging Face transformers models: record chosen decoder layers' attention rows.

Needed by AttWarp ("Constructive Distortion: Improving MLLMs with Attention-Guided Image Warping", ICLR 2026),
whose map is the attention of the query's last position to the image tokens. Rather than running the whole
model with ``output_attentions=True`` (every layer's full L x L matrix), the tap registers, through
transformers' ``AttentionInterface``, an attention function that calls the model's own implementation (sdpa,
eager, ...) unchanged for every layer, so the logits are bit-identical, and for the tapped layers only also
computes softmax(q k^T * scaling + mask) for the requested query rows (the last one by default) and keeps it.

The tapped model's text config is switched to the tap's implementation name only inside the ``with`` block.
Not supported (a clear error): layers with a sliding window or logit soft-capping, whose probabilities the
plain softmax here would not reproduce; and attention implementations other than ``eager`` and ``sdpa``
(flash-attention 2/3/4, flex attention, paged), whose masks are not the 4-D (B, 1, Q, K) tensors the tap adds
to its scores (flash-attention takes a 2-D padding mask or none, flex attention a ``BlockMask``): load the model
with ``attn_implementation="sdpa"`` (or ``"eager"``) to tap it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Self

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

_PREFIX = "posttrain-tap-"
_ACTIVE: list[AttentionTap] = []


def decoder_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The self-attention module of every decoder layer of ``model``'s language model, in layer order."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no decoder layers found (get_decoder().layers)")
    return [layer.self_attn for layer in layers]


def _delegate(base: str, module: torch.nn.Module) -> Any:
    if base == "eager":
        eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if eager is None:
            raise ValueError(f"{type(module).__name__}: its modeling file has no eager_attention_forward")
        return eager
    return ALL_ATTENTION_FUNCTIONS[base]


def _tapped_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    base = module.config._attn_implementation.removeprefix(_PREFIX)
    out = _delegate(base, module)(module, query, key, value, attention_mask, **kwargs)
    for tap in _ACTIVE:
        tap.record(module, query, key, attention_mask, kwargs.get("scaling"))
    return out


SUPPORTED = ("eager", "sdpa")
"""Attention implementations whose masks are 4-D additive/boolean tensors (B, 1, Q, K), which the tap reads."""


def _register(base: str) -> str:
    if base not in SUPPORTED:
        raise ValueError(f"the attention tap supports attn_implementation {SUPPORTED}, got {base!r}: its attention "
                         "mask is not a 4-D (B, 1, Q, K) tensor; load the model with attn_implementation='sdpa'")
    name = _PREFIX + base
    if name not in ALL_ATTENTION_FUNCTIONS:
        AttentionInterface.register(name, _tapped_attention)
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    return name


class AttentionTap:
    """``with AttentionTap(model, layers=[20]) as tap: model(...)``; then ``tap.records[20]`` is a list, one entry
    per forward call of that layer (each generation step), of probabilities (B, H, R, L_keys) in float32.

    ``rows``: ``"last"`` (the last query position of each call) or ``"all"``. Negative layer indices count
    from the end. Several taps may be active at once."""

    def __init__(self, model: torch.nn.Module, layers: Sequence[int], rows: str = "last") -> None:
        if rows not in ("last", "all"):
            raise ValueError(f"rows must be 'last' or 'all', got {rows!r}")
        modules = decoder_attention_modules(model)
        n = len(modules)
        if not layers:
            raise ValueError("layers must name at least one decoder layer")
        self.layers = [i + n if i < 0 else i for i in layers]
        for given, i in zip(layers, self.layers, strict=True):
            if not 0 <= i < n:
                raise ValueError(f"layer {given} out of range: the model has {n} decoder layers")
            module = modules[i]
            if getattr(module, "sliding_window", None) is not None:
                raise ValueError(f"layer {given} uses a sliding window, which the tap does not reproduce")
            if getattr(module.config, "attn_logit_softcapping", None):
                raise ValueError("attention logit soft-capping is not supported by the tap")
        self.rows = rows
        self._by_module = {id(modules[i]): i for i in self.layers}
        self._config = modules[0].config
        self._saved: str | None = None
        self.records: dict[int, list[torch.Tensor]] = {i: [] for i in self.layers}

    def __enter__(self) -> Self:
        self._saved = self._config._attn_implementation
        base = self._saved.removeprefix(_PREFIX)
        self._config._attn_implementation = _register(base)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.remove(self)
        if not any(t._config is self._config for t in _ACTIVE):
            self._config._attn_implementation = self._saved.removeprefix(_PREFIX)

    @torch.no_grad()
    def record(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
               attention_mask: torch.Tensor | None, scaling: float | None) -> None:
        """Keep softmax attention of the chosen rows of ``module``'s call (a no-op for untapped modules)."""
        layer = self._by_module.get(id(module))
        if layer is None:
            return
        q_len, k_len = query.shape[-2], key.shape[-2]
        rows = torch.arange(q_len - 1, q_len) if self.rows == "last" else torch.arange(q_len)
        q = query[:, :, rows].float()
        k = key.float().repeat_interleave(query.shape[1] // key.shape[1], dim=1)
        scale = scaling if scaling is not None else getattr(module, "scaling", q.shape[-1] ** -0.5)
        scores = q @ k.transpose(-1, -2) * scale
        if attention_mask is None:
            positions = rows + (k_len - q_len)
            causal = torch.arange(k_len).view(1, -1) > positions.view(-1, 1)
            scores = scores.masked_fill(causal.to(scores.device), float("-inf"))
        else:
            mask = attention_mask[..., rows.to(attention_mask.device), :k_len]
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, float("-inf"))
            else:
                scores = scores + mask.float()
        self.records[layer].append(torch.softmax(scores, dim=-1))
