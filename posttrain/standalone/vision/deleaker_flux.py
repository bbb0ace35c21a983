"""DeLeaker on diffusers' Flux: an attention processor for ``FluxAttention`` (diffusers 0.42's (B, L, H, D)
layout) that applies the reweighting rule of ``posttrain.standalone.vision.deleaker``; from "Dynamic Inference-Time
Reweighting for Semantic Leakage Mitigation in Text-to-Image Models" (Ventura et al., ICLR 2026).

``with install_deleaker(transformer):`` puts ``DeleakerFluxProcessor`` on every attention module (and a
pre-hook that counts denoising steps); each forward that should be reweighted passes a ``DeleakerState`` in
``joint_attention_kwargs={"deleaker_state": state}``. Without a state, with fewer than two entities or outside
the state's windows, a processor runs diffusers' stock ``FluxAttnProcessor`` unchanged, so the output is
bit-identical to stock; only inside the windows does it materialise the joint logits (B, H, L, L).
``flux_sample`` is a plain Euler flow-matching loop over the transformer (no VAE, no text encoder: it takes
prompt embeddings), enough to run the schedule over denoising steps on a config-built model.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from diffusers.models.embeddings import apply_rotary_emb
from diffusers.models.transformers.transformer_flux import FluxAttnProcessor, _get_qkv_projections

from posttrain.standalone.vision.deleaker import (
    DeleakerConfig,
    entity_mass,
    image_text_slice,
    leakage_score,
    open_close,
    reweight_logits,
    threshold_mask,
)
from posttrain.standalone.vision.processors import swap_processors


@dataclass
class CallRecord:
    """One observed attention call: its block-step, whether the rule edited it, the rule's masks (B, N) and,
    per entity, the image queries' attention mass on its tokens (B, N) before (``natural``) and after
    (``used``, edited calls only) the edit. Kept on the CPU; a few KB per call."""

    block_step: int
    edited: bool
    rule_masks: list[torch.Tensor]
    natural: list[torch.Tensor]
    used: list[torch.Tensor] | None

    @property
    def masks_nonempty(self) -> bool:
        """Whether every entity's rule mask has a pixel: only then can the rule edit anything."""
        return all(bool(m.any()) for m in self.rule_masks)


class DeleakerState:
    """One generation's DeLeaker state: config, entities (text token positions), step counter, history, records.

    ``enabled`` False keeps the stock attention but, with ``record``, still records every call (the baseline of
    the benchmark); ``calls`` holds a ``CallRecord`` per observed call, scored afterwards with any masks
    (``leakage_summary``)."""

    def __init__(self, config: DeleakerConfig, entities: Sequence[Sequence[int]], *, blocks_per_step: int,
                 text_len: int | None = None, grid: tuple[int, int] | None = None, enabled: bool = True,
                 record: bool = False) -> None:
        config.validate()
        self.config, self.entities = config, [list(e) for e in entities]
        self.text_len = config.num_text_tokens if text_len is None else text_len
        for e, tokens in enumerate(self.entities):
            if not tokens or min(tokens) < 0 or max(tokens) >= self.text_len:
                raise ValueError(f"entity {e}: token positions {tokens} must be non-empty and < {self.text_len}")
        self.blocks_per_step, self.grid, self.enabled, self.record = blocks_per_step, grid, enabled, record
        self.step = -1
        self.history: list[torch.Tensor] | None = None
        self.history_count = 0
        self.calls: list[CallRecord] = []
        self.edited_calls = 0

    def begin_step(self) -> None:
        self.step += 1

    def block_step(self, index: int) -> int:
        return max(self.step, 0) * self.blocks_per_step + index

    def aggregating(self, b: int) -> bool:
        c = self.config
        return c.use_history and c.start_aggregating_from <= b < c.stop_aggregating_at

    def intervening(self, b: int) -> bool:
        c = self.config
        return self.enabled and c.start_intervention_from <= b < c.stop_intervention_at

    def needs_attention(self, b: int) -> bool:
        """Whether block-step ``b`` must materialise the attention (else the stock path runs)."""
        return len(self.entities) >= 2 and (self.aggregating(b) or self.intervening(b) or self.record)

    def masks(self, probs: torch.Tensor, b: int) -> list[torch.Tensor]:
        """The entities' image masks (B, N) at block-step ``b``, updating the history first."""
        c, t = self.config, self.text_len
        current = [image_text_slice(probs, t, tokens) for tokens in self.entities]
        if self.aggregating(b):
            n = self.history_count
            self.history = current if self.history is None else [
                (h * n + x) / (n + 1) for h, x in zip(self.history, current, strict=True)]
            self.history_count += 1
        use = c.use_history and b > c.start_aggregating_from and self.history is not None
        return self._threshold(self.history if use else current)

    def history_masks(self) -> list[torch.Tensor]:
        """The masks the running history gives at the end of a run (the entities' regions as this run's
        attention saw them); raises if nothing was aggregated."""
        if self.history is None:
            raise ValueError("no attention history: the run aggregated no block-step (use_history, windows)")
        return self._threshold(self.history)

    def _threshold(self, source: list[torch.Tensor]) -> list[torch.Tensor]:
        masks = [threshold_mask(s.mean(dim=-1), self.config.std_mul_text) for s in source]
        if self.config.do_smoothing:
            masks = [open_close(m, self._grid(m.shape[-1])) for m in masks]
        return masks

    def _grid(self, n: int) -> tuple[int, int]:
        if self.grid is not None:
            return self.grid
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"{n} image tokens are not a square grid: give the state its grid for do_smoothing")
        return side, side


def _joint_qkv(attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None,
               image_rotary_emb: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flux's Q, K, V (B, L, H, D) for [text ; image], normalised and rotated as ``FluxAttnProcessor`` does."""
    query, key, value, e_query, e_key, e_value = _get_qkv_projections(attn, hidden_states, encoder_hidden_states)
    query, key, value = (x.unflatten(-1, (-1, attn.head_dim)) for x in (query, key, value))
    query, key = attn.norm_q(query), attn.norm_k(key)
    if attn.added_kv_proj_dim is not None:
        e_query, e_key, e_value = (x.unflatten(-1, (-1, attn.head_dim)) for x in (e_query, e_key, e_value))
        e_query, e_key = attn.norm_added_q(e_query), attn.norm_added_k(e_key)
        query, key = torch.cat([e_query, query], dim=1), torch.cat([e_key, key], dim=1)
        value = torch.cat([e_value, value], dim=1)
    if image_rotary_emb is not None:
        query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
        key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
    return query, key, value


class DeleakerFluxProcessor:
    """``FluxAttention`` processor number ``index`` (its block offset within a step) with DeLeaker's rule."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.stock = FluxAttnProcessor()

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, image_rotary_emb: Any = None,
                 deleaker_state: DeleakerState | None = None) -> Any:
        state = deleaker_state
        b = state.block_step(self.index) if state is not None else -1
        if state is None or not state.needs_attention(b):
            return self.stock(attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)
        if attention_mask is not None:
            raise ValueError("DeLeaker's Flux processor takes no attention_mask (Flux passes none)")
        text_len = state.text_len
        if encoder_hidden_states is not None and encoder_hidden_states.shape[1] != text_len:
            raise ValueError(f"the state says {text_len} text tokens, the block has {encoder_hidden_states.shape[1]}")
        query, key, value = _joint_qkv(attn, hidden_states, encoder_hidden_states, image_rotary_emb)
        scores = torch.einsum("blhd,bmhd->bhlm", query.float(), key.float()) * attn.head_dim ** -0.5
        probs = torch.softmax(scores, dim=-1)
        masks, edited = state.masks(probs, b), state.intervening(b)
        if state.record:
            state.calls.append(CallRecord(b, edited, [m.cpu() for m in masks],
                                          [m.cpu() for m in entity_mass(probs, text_len, state.entities)], None))
        if not edited:
            return self.stock(attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)
        used = torch.softmax(reweight_logits(scores, probs, text_len, state.entities, masks, state.config), dim=-1)
        state.edited_calls += 1
        if state.record:
            state.calls[-1].used = [m.cpu() for m in entity_mass(used, text_len, state.entities)]
        out = torch.einsum("bhlm,bmhd->blhd", used, value.float()).flatten(2, 3).to(query.dtype)
        if encoder_hidden_states is None:
            return out
        text_out, image_out = out.split_with_sizes([text_len, out.shape[1] - text_len], dim=1)
        image_out = attn.to_out[1](attn.to_out[0](image_out.contiguous()))
        return image_out, attn.to_add_out(text_out.contiguous())


@contextmanager
def install_deleaker(transformer: torch.nn.Module) -> Iterator[int]:
    """Put DeLeaker's processor on every attention module of a Flux transformer inside the block; yields the
    number of attention calls per step (the state's ``blocks_per_step``). The stock processors return after."""

    def count_step(kwargs: dict[str, Any]) -> None:
        state = (kwargs.get("joint_attention_kwargs") or {}).get("deleaker_state")
        if state is not None:
            state.begin_step()

    with swap_processors(transformer, lambda _name, index: DeleakerFluxProcessor(index), count_step) as installed:
        yield len(installed)


def latent_ids(grid: tuple[int, int], text_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flux's rotary position ids: (h*w, 3) image ids (0, row, column) and (text_len, 3) zero text ids."""
    h, w = grid
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    img = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).view(-1, 3).float()
    return img, torch.zeros(text_len, 3)


@torch.no_grad()
def flux_sample(transformer: torch.nn.Module, noise: torch.Tensor, text: torch.Tensor, pooled: torch.Tensor,
                grid: tuple[int, int], steps: int, state: DeleakerState | None = None) -> torch.Tensor:
    """Euler flow matching from ``noise`` (B, h*w, C) at t=1 to t=0 in ``steps`` steps, conditioned on prompt
    embeddings ``text`` (B, T, D) and ``pooled`` (B, D'); with ``state``, DeLeaker's processors reweight."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    img_ids, txt_ids = (ids.to(noise.device) for ids in latent_ids(grid, text.shape[1]))
    times = torch.linspace(1.0, 0.0, steps + 1, device=noise.device)
    x = noise
    for t, t_next in itertools.pairwise(times):
        v = transformer(hidden_states=x, encoder_hidden_states=text, pooled_projections=pooled,
                        timestep=t.expand(x.shape[0]), img_ids=img_ids, txt_ids=txt_ids,
                        joint_attention_kwargs={"deleaker_state": state} if state is not None else None).sample
        x = x + (t_next - t) * v
    return x


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.mean(kept) if kept else None


def leakage_summary(stock: DeleakerState, deleaker: DeleakerState, score_masks: list[torch.Tensor]) -> dict:
    """The cross-entity attention mass (``leakage_score``) of a stock and a DeLeaker run of the same inputs,
    scored with ``score_masks`` (B, N) per entity, masks the rule did not choose (e.g. the scene's layout).

    - ``leakage_unedited`` / ``leakage_edited``: the same calls before and after the edit: the edited calls
      whose rule masks are all non-empty (``calls_edited_with_masks`` of ``calls_edited``; with an empty mask
      the rule changes nothing and would only dilute the comparison);
    - ``leakage_stock_window`` / ``leakage_deleaker_window``: the unedited attention of the stock and of the
      DeLeaker run over the intervention window's block-steps (what the earlier edits did to the trajectory);
    - ``leakage_edited_rule_masks``: the edited attention scored with the rule's own masks, 0 by construction
      (a check of the rule, not a measurement)."""
    edited = [c for c in deleaker.calls if c.edited]
    with_masks = [c for c in edited if c.masks_nonempty]
    window = {c.block_step for c in edited}
    return {"calls_edited": len(edited), "calls_edited_with_masks": len(with_masks),
            "leakage_unedited": _mean([leakage_score(c.natural, score_masks) for c in with_masks]),
            "leakage_edited": _mean([leakage_score(c.used, score_masks) for c in with_masks]),
            "leakage_stock_window": _mean([leakage_score(c.natural, score_masks) for c in stock.calls
                                           if c.block_step in window]),
            "leakage_deleaker_window": _mean([leakage_score(c.natural, score_masks) for c in edited]),
            "leakage_edited_rule_masks": _mean([leakage_score(c.used, c.rule_masks) for c in with_masks])}


def tiny_flux_inputs(side: int, text_len: int, n_entities: int, generator: torch.Generator,
                     width: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Inputs for a tiny Flux transformer with a known layout: the side x side latent grid is cut into
    ``n_entities`` vertical bands, each starting from its own base vector (plus noise), so entity e "is" band e.
    Returns (noise (1, N, 4), prompt embeddings (1, text_len, width), pooled (1, width), the bands as masks
    (1, N) per entity: scoring masks the rule never sees)."""
    if not 1 <= n_entities <= side:
        raise ValueError(f"need 1 <= entities <= grid side, got {n_entities} entities on a {side}-grid")
    n = side * side
    band = (torch.arange(n) % side) * n_entities // side
    bases = torch.randn(n_entities, 4, generator=generator)
    noise = (bases[band] + 0.3 * torch.randn(n, 4, generator=generator)).unsqueeze(0)
    text, pooled = torch.randn(1, text_len, width, generator=generator), torch.randn(1, width, generator=generator)
    return noise, text, pooled, [(band == e).unsqueeze(0) for e in range(n_entities)]
