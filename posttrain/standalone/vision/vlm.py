"""Inputs of Hugging Face multimodal LLMs for AttWarp ("Constructive Distortion: Improving MLLMs with
Attention-Guided Image Warping", ICLR 2026): image batches -> model keyword arguments, and where the image
tokens sit on the visual-token grid.

Two families: Llava-style (``llava``: a fixed-size image, (S/P)^2 image tokens in the prompt, a square grid)
and Qwen-VL-style (``qwen2_vl``, ``qwen2_5_vl``: flattened patches, ``image_grid_thw``, a grid of
(h / merge, w / merge) tokens). Config-built models take images as tensors (``TensorPrompter``: the prompt
is token ids written by hand); real checkpoints go through their processor (``ProcessorPrompter``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from posttrain.common.padding import left_pad
from posttrain.standalone.vision.tiny import TOKENS

FAMILIES = {"llava": "llava", "qwen2_vl": "qwen-vl", "qwen2_5_vl": "qwen-vl"}
"""``config.model_type`` -> the input family AttWarp knows."""


def family(model: torch.nn.Module) -> str:
    """``llava`` or ``qwen-vl`` for ``model``; other families are refused naming the model type."""
    model_type = getattr(model.config, "model_type", None)
    if model_type not in FAMILIES:
        raise ValueError(f"AttWarp supports model types {sorted(FAMILIES)}, got {model_type!r}")
    return FAMILIES[model_type]


def qwen_patchify(images: torch.Tensor, patch: int, merge: int, temporal: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (B, C, H, W) -> Qwen-VL's (B*gh*gw, C*temporal*patch*patch) patches and ``image_grid_thw`` (B, 3).

    Each image is one frame repeated ``temporal`` times; patches are ordered merge-window by merge-window, as
    Qwen's image processor orders them."""
    b, c, h, w = images.shape
    if h % (patch * merge) or w % (patch * merge):
        raise ValueError(f"image size {h}x{w} must be a multiple of patch*merge = {patch * merge}")
    gh, gw = h // patch, w // patch
    x = images.unsqueeze(1).expand(b, temporal, c, h, w)
    x = x.reshape(b, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    grid = torch.tensor([[1, gh, gw]] * b, dtype=torch.long)
    return x.reshape(b * gh * gw, c * temporal * patch * patch), grid


def image_grid(model: torch.nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, tuple[int, int]]:
    """(positions (B, N) of the image tokens in ``inputs["input_ids"]``, the token grid (h, w), h * w = N)."""
    ids = inputs["input_ids"]
    is_image = ids == model.config.image_token_id
    counts = is_image.sum(dim=-1)
    if int(counts.min()) != int(counts.max()) or int(counts[0]) == 0:
        raise ValueError(f"every sample needs the same, non-zero number of image tokens; got {counts.tolist()}")
    n = int(counts[0])
    positions = is_image.nonzero()[:, 1].view(ids.shape[0], n)
    if family(model) == "llava":
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"a Llava image of {n} tokens is not a square grid")
        return positions, (side, side)
    merge = model.config.vision_config.spatial_merge_size
    thw = inputs["image_grid_thw"]
    if thw.shape[0] != ids.shape[0] or bool((thw != thw[:1]).any()):
        raise ValueError("one image per sample, all of one size, is what the AttWarp map needs")
    h, w = int(thw[0, 1]) // merge, int(thw[0, 2]) // merge
    if h * w * int(thw[0, 0]) != n:
        raise ValueError(f"image_grid_thw {thw[0].tolist()} does not match the {n} image tokens")
    return positions, (h, w)


class TensorPrompter:
    """Model inputs for a config-built model: images (B, 3, H, W) in [0, 1] plus one question (token ids) each.

    The prompt is [bos, image tokens, question] (Llava) or [bos, vision_start, image tokens, vision_end,
    question] (Qwen-VL), left-padded; pixels are normalised as (x - 0.5) / 0.5."""

    def __init__(self, model: torch.nn.Module, questions: Sequence[Sequence[int]]) -> None:
        self.model, self.family = model, family(model)
        self.questions = [list(q) for q in questions]
        if not self.questions:
            raise ValueError("TensorPrompter needs at least one question")

    def __call__(self, images: torch.Tensor) -> dict[str, Any]:
        if images.dim() != 4 or images.shape[0] != len(self.questions):
            raise ValueError(f"images must be (B={len(self.questions)}, 3, H, W), got {tuple(images.shape)}")
        device = next(self.model.parameters()).device
        pixels = (images.to(device) - 0.5) / 0.5
        image_id = self.model.config.image_token_id
        if self.family == "llava":
            vision = self.model.config.vision_config
            n = (vision.image_size // vision.patch_size) ** 2
            heads = [[TOKENS["bos"]] + [image_id] * n] * len(self.questions)
            extra: dict[str, Any] = {"pixel_values": pixels}
        else:
            vision = self.model.config.vision_config
            values, thw = qwen_patchify(pixels, vision.patch_size, vision.spatial_merge_size,
                                        vision.temporal_patch_size)
            n = int(thw[0, 1] * thw[0, 2]) // vision.spatial_merge_size ** 2
            head = [TOKENS["bos"], TOKENS["vision_start"]] + [image_id] * n + [TOKENS["vision_end"]]
            heads = [head] * len(self.questions)
            extra = {"pixel_values": values, "image_grid_thw": thw.to(device)}
        ids, mask = left_pad([h + q for h, q in zip(heads, self.questions, strict=True)], TOKENS["pad"])
        inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), **extra}
        if self.family == "qwen-vl":
            inputs["mm_token_type_ids"] = (inputs["input_ids"] == image_id).long()
        return inputs


class ProcessorPrompter:
    """Model inputs for a real checkpoint through its processor: images (B, 3, H, W) in [0, 1] -> PIL, each
    with its question rendered by the processor's chat template (a user turn holding the image and the text)."""

    def __init__(self, processor: Any, questions: Sequence[str]) -> None:
        self.processor, self.questions = processor, list(questions)

    def __call__(self, images: torch.Tensor) -> dict[str, Any]:
        from PIL import Image

        pils = [Image.fromarray((img.clamp(0, 1).permute(1, 2, 0).cpu().numpy() * 255).round().astype("uint8"))
                for img in images]
        texts = [self.processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]}],
            add_generation_prompt=True) for q in self.questions]
        return dict(self.processor(images=pils, text=texts, return_tensors="pt", padding=True))
