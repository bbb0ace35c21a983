"""AttWarp and AttWarp-Chain: "Constructive Distortion: Improving MLLMs with Attention-Guided Image Warping"
(Dalal et al., ICLR 2026, arXiv 2510.09741).

Pass 1 reads a query-conditioned attention map over the image tokens from a multimodal LLM (``extract_map``);
the image is warped rectilinearly by the map's marginals (``posttrain.standalone.vision.warp``); pass 2 answers on the
warped image. AttWarp-Chain repeats extract -> warp on the warped image until the maps of consecutive rounds
agree, D_KL(P_d || P_{d-1}) < ``kl_eps``, or ``max_rounds`` warps are done.

Map recipes:
- ``last_token`` (the released code's, the default): in each tapped layer, at every generation step, the last
  query position's attention row, sliced to the image keys, renormalised to sum 1 per head, averaged over heads,
  then over generated tokens (``max_new_tokens``, 20 in the code; greedy) and over the tapped layers;
- ``relative`` (ViCrop's, the code's README points to it): that map under the real question divided by the map
  under a generic prompt ("write a general description of the image"), renormalised.
Post-processing (the code's ``revise_mask``): min-max normalise, standardise, times ``enhance_coe`` (10),
sigmoid, ``blur`` x ``blur`` box blur with replicate padding, resize to the image.

Deviations, stated: the map is resized with bilinear interpolation, not PIL's LANCZOS (which can overshoot
below zero); the image is warped straight into the model's input size (``out_hw``) from the original, and
the chain composes its warps so the final image is one resampling of the original pixels (the code warps at
the original size, and a chain would resample twice). That resampling is area-exact (``Warp.apply``): each
model-input pixel is the average of its source cell, so with a uniform map the warp is exactly an area resize,
and a magnifying or compressing warp never skips source pixels the way a 4x point-sampled downsample does. The paper gives no epsilon for the chain: the default
``kl_eps`` = 0.05 nats is ours. Layer 20 of a 32-layer LLaVA-1.5 is the code's default layer; for other models
pick a late-middle layer (``layers``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from posttrain.standalone.vision.tap import AttentionTap
from posttrain.standalone.vision.vlm import image_grid
from posttrain.standalone.vision.warp import TRANSFORMS, Warp

RECIPES = ("last_token", "relative")
Prompter = Callable[[torch.Tensor], dict[str, Any]]
"""Images (B, 3, H, W) in [0, 1] -> the model's keyword arguments (``posttrain.standalone.vision.vlm``)."""


@dataclass
class AttWarpConfig:
    """AttWarp's options; the defaults are the released code's (LLaVA-1.5-7B) except where marked ours."""

    layers: tuple[int, ...] = (20,)
    """Decoder layers whose attention makes the map (negative: from the end)."""
    recipe: str = "last_token"
    """Map recipe: last_token (the released code's) or relative (ViCrop's, needs a generic prompt)."""
    max_new_tokens: int = 20
    """Greedy tokens whose attention rows are averaged (1 = the prompt's last position only)."""
    enhance_coe: float = 10.0
    """Sigmoid sharpness of the post-processing (0 = no post-processing: the raw map)."""
    blur: int = 3
    """Box-blur size of the post-processing (odd; 1 = none)."""
    transform: str = "identity"
    """Map transform before the marginals: identity, square, sqrt, exp or log."""
    floor: float = 0.0
    """Uniform share mixed into each marginal (ours): bounds the compression of low-attention rows/columns."""
    max_rounds: int = 1
    """Warps at most; 1 = AttWarp, more = AttWarp-Chain."""
    kl_eps: float = 0.05
    """AttWarp-Chain stops when the map's KL divergence to the previous round's is below this (ours)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if not self.layers:
            raise ValueError("layers: give at least one decoder layer")
        if self.recipe not in RECIPES:
            raise ValueError(f"recipe must be one of {RECIPES}, got {self.recipe!r}")
        if self.transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {sorted(TRANSFORMS)}, got {self.transform!r}")
        for name in ("max_new_tokens", "max_rounds", "blur"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.blur % 2 == 0:
            raise ValueError(f"blur must be odd, got {self.blur}")
        if self.enhance_coe < 0:
            raise ValueError(f"enhance_coe must be >= 0, got {self.enhance_coe}")
        if not 0.0 <= self.floor < 1.0:
            raise ValueError(f"floor must be in [0, 1), got {self.floor}")
        if self.kl_eps <= 0:
            raise ValueError(f"kl_eps must be > 0, got {self.kl_eps}")


@torch.no_grad()
def image_attention(model: torch.nn.Module, inputs: dict[str, Any], layers: Sequence[int],
                    max_new_tokens: int = 1) -> torch.Tensor:
    """The ``last_token`` map (B, h, w) on the visual-token grid; each sample's map sums to 1."""
    device = next(model.parameters()).device
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    positions, (h, w) = image_grid(model, inputs)
    with AttentionTap(model, layers) as tap:
        if max_new_tokens == 1:
            model(**inputs)
        else:
            model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    per_layer = []
    for layer in tap.layers:
        steps = []
        for probs in tap.records[layer]:
            row = probs[:, :, -1, :]
            img = row.gather(-1, positions.to(row.device).unsqueeze(1).expand(-1, row.shape[1], -1))
            steps.append((img / img.sum(dim=-1, keepdim=True).clamp_min(1e-30)).mean(dim=1))
        per_layer.append(torch.stack(steps).mean(dim=0))
    return torch.stack(per_layer).mean(dim=0).view(-1, h, w).cpu()


def relative_attention(question_map: torch.Tensor, generic_map: torch.Tensor) -> torch.Tensor:
    """ViCrop's relative attention: the question's map over the generic prompt's, renormalised to sum 1."""
    ratio = question_map / generic_map.clamp_min(1e-12)
    return ratio / ratio.sum(dim=(-2, -1), keepdim=True)


def postprocess_map(grid_map: torch.Tensor, size: tuple[int, int], enhance_coe: float = 10.0,
                    blur: int = 3) -> torch.Tensor:
    """The released code's ``revise_mask`` on (B, h, w): min-max, z-score, x coe, sigmoid, box blur; then
    resized to ``size`` (bilinear). ``enhance_coe`` 0 skips the enhancement (the map is only resized)."""
    m = grid_map.float().unsqueeze(1)
    if enhance_coe > 0:
        flat = m.flatten(1)
        lo, hi = flat.min(dim=1).values.view(-1, 1, 1, 1), flat.max(dim=1).values.view(-1, 1, 1, 1)
        m = (m - lo) / (hi - lo).clamp_min(1e-12)
        flat = m.flatten(1)
        mean, std = flat.mean(dim=1).view(-1, 1, 1, 1), flat.std(dim=1).view(-1, 1, 1, 1)
        m = torch.sigmoid(enhance_coe * (m - mean) / std.clamp_min(1e-12))
        if blur > 1:
            m = F.avg_pool2d(F.pad(m, [blur // 2] * 4, mode="replicate"), blur, stride=1)
    return F.interpolate(m, size=size, mode="bilinear", align_corners=False).squeeze(1).clamp_min(0.0)


def kl_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """D_KL(p || q) per sample for maps (B, h, w) that each sum to 1 (natural log)."""
    p, q = p.flatten(1).double(), q.flatten(1).double()
    return (p * (p.clamp_min(1e-12).log() - q.clamp_min(1e-12).log())).sum(dim=1)


@dataclass
class AttWarpResult:
    """The final warp (source image -> model input), the warped images, every round's token-grid map, the KL
    of each round to the previous one, and how many warps each sample received."""

    warp: Warp
    warped: torch.Tensor
    maps: list[torch.Tensor] = field(default_factory=list)
    kls: list[torch.Tensor] = field(default_factory=list)
    rounds: torch.Tensor | None = None


def attwarp_chain(images: torch.Tensor, map_fn: Callable[[torch.Tensor], torch.Tensor], out_hw: tuple[int, int],
                  config: AttWarpConfig) -> AttWarpResult:
    """AttWarp (``max_rounds`` 1) or AttWarp-Chain on ``images`` (B, 3, H, W); ``map_fn`` maps model-input images
    (B, 3, *out_hw) to token-grid maps (B, h, w) summing to 1. Round 1 reads the plainly (area-)resized image; each
    round's warp is composed onto the previous ones; a sample stops when its KL to the last round drops below
    ``kl_eps``, the whole batch when all have stopped or after ``max_rounds`` warps."""
    config.validate()
    b = images.shape[0]
    warp = Warp.identity(b, tuple(images.shape[-2:]), out_hw)
    active = torch.ones(b, dtype=torch.bool)
    rounds = torch.zeros(b, dtype=torch.long)
    result = AttWarpResult(warp, warp.apply(images))
    for d in range(config.max_rounds):
        grid_map = map_fn(result.warped)
        result.maps.append(grid_map)
        if d > 0:
            kl = kl_divergence(grid_map, result.maps[-2])
            result.kls.append(kl)
            active &= kl >= config.kl_eps
            if not bool(active.any()):
                break
        dense = postprocess_map(grid_map, out_hw, config.enhance_coe, config.blur)
        step = Warp.from_map(dense, out_hw, transform=config.transform, floor=config.floor)
        warp = warp.then(step).select(active, warp)
        rounds += active.long()
        result.warp, result.warped = warp, warp.apply(images)
    result.rounds = rounds
    return result


def attwarp(model: torch.nn.Module, prompter: Prompter, images: torch.Tensor, out_hw: tuple[int, int],
            config: AttWarpConfig, generic_prompter: Prompter | None = None) -> AttWarpResult:
    """AttWarp(-Chain) with ``model``'s own attention as the map (``config.recipe``); ``generic_prompter``
    (the same images with a generic description prompt) is required by the relative recipe."""
    config.validate()
    if config.recipe == "relative" and generic_prompter is None:
        raise ValueError("recipe 'relative' needs a generic prompt (generic_prompter)")

    def map_fn(view: torch.Tensor) -> torch.Tensor:
        m = image_attention(model, prompter(view), config.layers, config.max_new_tokens)
        if config.recipe == "relative":
            generic = image_attention(model, generic_prompter(view), config.layers, config.max_new_tokens)
            m = relative_attention(m, generic)
        return m

    return attwarp_chain(images, map_fn, out_hw, config)


@torch.no_grad()
def next_token_logits(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    """The logits (B, V) of the token after each prompt: the answer of a one-token question."""
    device = next(model.parameters()).device
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return model(**inputs).logits[:, -1].float().cpu()
