"""DeLeaker's attention reweighting rule: "Dynamic Inference-Time Reweighting for Semantic Leakage Mitigation in
Text-to-Image Models" (Ventura et al., ICLR 2026, arXiv 2510.15015), as the official code applies it.

Joint attention over [T text tokens ; N image tokens], scaled logits S (B, H, L, L), probabilities P.

A. Entity image masks: for entity e with text tokens K_e, the image-query rows of P (or of the running history)
   at K_e, averaged over K_e and over heads -> a_e (B, N); mask_e = a_e > mean(a_e) + ``std_mul_text`` std(a_e);
   optionally cleaned on the latent grid by a 3x3 opening then a 3x3 closing of 2 iterations.
B. For every unordered entity pair (i, j), image-query rows only:
   1. image->text weakening: S[mask_i, K_j] = S[mask_j, K_i] = -inf;
   2. image->text strengthening: S[mask_i, K_i] *= ``k_strength``, S[mask_j, K_j] *= ``k_strength`` (a logit
      scaling: it sharpens, so a negative logit becomes more negative; with n entities each takes part in n - 1
      pairs and is scaled k_strength^(n - 1), as in the code);
   3. image->image weakening: W = head-mean of P[image, image]; for each cross block mask_i x mask_j and
      mask_j x mask_i, the entries of W above mean + ``std_mul_image_image`` std of the block's non-zero
      entries get -inf (all heads);
   4. text->text weakening (off by default): -inf between the first tokens of the two entities.
   Then P' = softmax(S').
C. History: a running mean over block-steps [``start_aggregating_from``, ``stop_aggregating_at``) of the
   head-averaged image->entity-text slices (the only part of the code's full-matrix store that is read); masks
   read it once the block-step is past ``start_aggregating_from``.

Deviations, stated: mean/std for the thresholds are per sample (the code pools them over the batch, which
mixes prompts and CFG halves); morphology is max-pooling on the real latent grid (the code uses OpenCV and
skips non-square grids); the history holds the unedited P's slices (the code's store is unconfirmed on that
point); the code's unused ``use_binary_history`` / ``history_sliding_window`` are left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import torch
import torch.nn.functional as F

FLUX_BLOCKS_PER_STEP = 57
"""FLUX.1's attention calls per denoising step (19 double-stream + 38 single-stream blocks)."""


@dataclass
class DeleakerConfig:
    """DeLeaker's options; defaults are the official ``DeleakerConfig`` (FLUX.1-dev, 20 steps). Windows count
    block-steps b = step * blocks_per_step + block index (57 blocks per FLUX.1 step)."""

    std_mul_text: float = 1.0
    """Entity-mask threshold: mean + this * std of the entity's image attention."""
    std_mul_image_image: float = 1.0
    """Image-image threshold: mean + this * std of the cross block's non-zero attention."""
    k_strength: float = 1.2
    """Logit scale of image->own-entity-text attention (strengthening)."""
    start_aggregating_from: int = 12
    """First block-step of the attention history."""
    stop_aggregating_at: int = 684
    """Block-step where the history stops (12 FLUX.1 steps)."""
    start_intervention_from: int = 18
    """First block-step that is reweighted."""
    stop_intervention_at: int = 1140
    """Block-step where reweighting stops (20 FLUX.1 steps: all of them)."""
    use_history: bool = True
    """Masks from the running history instead of the current call's attention."""
    do_smoothing: bool = True
    """3x3 opening then closing (2 iterations) of the masks on the latent grid."""
    do_image_image: bool = True
    """Image->image weakening between the entities' regions."""
    do_image_text_strengthening: bool = True
    """Image->own-text strengthening."""
    do_image_text_weakening: bool = True
    """Image->other-text weakening."""
    do_text_text_weakening: bool = False
    """Text->text weakening between the entities' first tokens."""
    num_text_tokens: int = 256
    """Text tokens in front of the image tokens (FLUX.1's max_sequence_length in the code)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if self.k_strength <= 0:
            raise ValueError(f"k_strength must be > 0, got {self.k_strength}")
        for name in ("start_aggregating_from", "stop_aggregating_at", "start_intervention_from",
                     "stop_intervention_at"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_text_tokens < 1:
            raise ValueError(f"num_text_tokens must be >= 1, got {self.num_text_tokens}")

    def for_blocks(self, blocks_per_step: int) -> DeleakerConfig:
        """The same schedule for a model with ``blocks_per_step`` attention calls per step: every window
        boundary scaled by blocks_per_step / 57 (rounded), so it covers the same share of each step."""
        if blocks_per_step < 1:
            raise ValueError(f"blocks_per_step must be >= 1, got {blocks_per_step}")
        scale = blocks_per_step / FLUX_BLOCKS_PER_STEP
        return dataclasses.replace(self, **{name: round(getattr(self, name) * scale) for name in (
            "start_aggregating_from", "stop_aggregating_at", "start_intervention_from", "stop_intervention_at")})


def entity_token_indices(tokenizer: Any, prompt: str, entity: str) -> list[int]:
    """Positions of ``entity``'s tokens in ``prompt``'s tokenisation (tried as given, lowercased and with a
    leading space, special tokens dropped from the entity, as the official code does); a missing entity raises."""
    ids = tokenizer(prompt)["input_ids"]
    special = set(getattr(tokenizer, "all_special_ids", []))
    for variant in (entity, entity.lower(), " " + entity, " " + entity.lower()):
        sub = [t for t in tokenizer(variant)["input_ids"] if t not in special]
        for start in range(len(ids) - len(sub) + 1) if sub else ():
            if ids[start:start + len(sub)] == sub:
                return list(range(start, start + len(sub)))
    raise ValueError(f"entity {entity!r} does not appear verbatim in the prompt {prompt!r}")


def image_text_slice(probs: torch.Tensor, text_len: int, tokens: list[int]) -> torch.Tensor:
    """Head-averaged attention (B, N, |K|) of the image queries to the text tokens ``tokens``; NaNs -> the mean."""
    s = probs[:, :, text_len:, tokens].float()
    if bool(torch.isnan(s).any()):
        s = torch.nan_to_num(s, nan=float(s.nanmean()))
    return s.mean(dim=1)


def threshold_mask(entity_map: torch.Tensor, std_mul: float) -> torch.Tensor:
    """mask = a > mean(a) + std_mul * std(a), per sample, for an entity map (B, N)."""
    mean = entity_map.mean(dim=-1, keepdim=True)
    std = entity_map.std(dim=-1, keepdim=True)
    return entity_map > mean + std_mul * std


def _dilate(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 3, stride=1, padding=1)


def _erode(x: torch.Tensor) -> torch.Tensor:
    return -F.max_pool2d(-x, 3, stride=1, padding=1)


def open_close(mask: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """A 3x3 opening, then a 3x3 closing of 2 iterations, of masks (B, N) on the latent grid (h, w); outside
    the image counts as neither foreground nor background (OpenCV's default border)."""
    h, w = grid
    if h * w != mask.shape[-1]:
        raise ValueError(f"grid {h}x{w} does not hold the {mask.shape[-1]} image tokens")
    x = mask.float().view(-1, 1, h, w)
    x = _dilate(_erode(x))
    x = _erode(_erode(_dilate(_dilate(x))))
    return x.view(mask.shape) > 0.5


def reweight_logits(scores: torch.Tensor, probs: torch.Tensor, text_len: int, entities: list[list[int]],
                    masks: list[torch.Tensor], config: DeleakerConfig) -> torch.Tensor:
    """DeLeaker's edit of the joint-attention logits ``scores`` (B, H, L, L) given the unedited ``probs``, the
    entities' text token positions and their image masks (B, N); returns the edited logits."""
    if len(entities) != len(masks):
        raise ValueError(f"{len(entities)} entities but {len(masks)} masks")
    b, _, length, _ = scores.shape
    t = text_len
    blocked = torch.zeros(b, length, length, dtype=torch.bool, device=scores.device)
    gain = torch.ones(b, length, length, dtype=scores.dtype, device=scores.device)
    image_image = probs[:, :, t:, t:].float().mean(dim=1) if config.do_image_image else None
    for i, j in combinations(range(len(entities)), 2):
        ki, kj = (torch.tensor(k, device=scores.device) for k in (entities[i], entities[j]))
        mi, mj = masks[i].to(scores.device), masks[j].to(scores.device)
        for rows, own, other in ((mi, ki, kj), (mj, kj, ki)):
            if config.do_image_text_weakening:
                blocked[:, t:, other] |= rows.unsqueeze(-1)
            if config.do_image_text_strengthening:
                gain[:, t:, own] *= torch.where(rows.unsqueeze(-1), config.k_strength, 1.0).to(gain.dtype)
        if image_image is not None:
            for a, c in ((mi, mj), (mj, mi)):
                cross = image_image * (a.unsqueeze(-1) & c.unsqueeze(-2))
                for n in range(b):
                    values = cross[n][cross[n] > 0]
                    if values.numel() < 2:
                        continue
                    tau = values.mean() + config.std_mul_image_image * values.std()
                    blocked[n, t:, t:] |= cross[n] > tau
        if config.do_text_text_weakening:
            blocked[:, ki[0], kj[0]] = True
            blocked[:, kj[0], ki[0]] = True
    edited = torch.where(blocked.unsqueeze(1), torch.full_like(scores, float("-inf")), scores * gain.unsqueeze(1))
    if bool(torch.isneginf(edited).all(dim=-1).any()):
        raise RuntimeError("DeLeaker masked every key of an attention row")
    return edited


def entity_mass(probs: torch.Tensor, text_len: int, entities: list[list[int]]) -> list[torch.Tensor]:
    """Per entity e, the head-averaged attention mass (B, N) that each image query puts on e's text tokens."""
    return [probs[:, :, text_len:, tokens].float().mean(dim=1).sum(dim=-1) for tokens in entities]


def leakage_score(mass: list[torch.Tensor], masks: list[torch.Tensor]) -> float | None:
    """Cross-entity attention mass: over ordered entity pairs (i, j != i) and samples whose mask_i is non-empty,
    the mean over the image queries in mask_i of their mass on entity j (``entity_mass``). None if no mask has
    pixels. Scored with the rule's own masks it is 0 after the edit by construction; a measurement needs masks
    the rule did not choose."""
    if len(mass) != len(masks):
        raise ValueError(f"{len(mass)} entity masses but {len(masks)} masks")
    values = []
    for i, j in ((i, j) for i in range(len(mass)) for j in range(len(mass)) if i != j):
        rows = masks[i].to(mass[j].device)
        for n in range(mass[j].shape[0]):
            if bool(rows[n].any()):
                values.append(float(mass[j][n][rows[n]].mean()))
    return sum(values) / len(values) if values else None
