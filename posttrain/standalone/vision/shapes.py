"""Generated images for the vision methods' embedded defaults and miniatures (AttWarp, FGA; ICLR 2026): coloured
shapes, scenes with one small object, and the distribution shifts (noise, blur, colour) of the FGA miniature.
Everything is drawn with torch from an explicit ``torch.Generator``; images are (B, 3, S, S) in [0, 1].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

COLOURS = {"red": (0.9, 0.15, 0.1), "green": (0.1, 0.8, 0.2), "blue": (0.15, 0.25, 0.95), "yellow": (0.95, 0.85, 0.1)}
SHAPES = ("circle", "square", "triangle")
SHIFTS = ("noise", "blur", "colour")


def _shape_mask(shape: str, size: int, cx: torch.Tensor, cy: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Masks (B, S, S) of one shape per sample, centre (cx, cy) and radius r in pixels."""
    ys, xs = torch.meshgrid(torch.arange(size) + 0.5, torch.arange(size) + 0.5, indexing="ij")
    dx, dy = xs - cx.view(-1, 1, 1), ys - cy.view(-1, 1, 1)
    r = r.view(-1, 1, 1)
    if shape == "circle":
        return dx ** 2 + dy ** 2 <= r ** 2
    if shape == "square":
        return (dx.abs() <= r * 0.85) & (dy.abs() <= r * 0.85)
    if shape == "triangle":
        return (dy <= r * 0.7) & (dy >= -r) & (dx.abs() <= (dy + r) * 0.6)
    raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")


def _paint(images: torch.Tensor, mask: torch.Tensor, colours: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(1).float()
    return images * (1 - m) + colours.view(-1, 3, 1, 1) * m


def shapes_dataset(n: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` images of one coloured shape on a grey textured background: (images, shape ids, colour ids)."""
    palette = torch.tensor(list(COLOURS.values()))
    shape_ids = torch.randint(0, len(SHAPES), (n,), generator=generator)
    colour_ids = torch.randint(0, len(COLOURS), (n,), generator=generator)
    images = 0.45 + 0.1 * torch.rand(n, 1, size, size, generator=generator).expand(n, 3, size, size)
    r = size * (0.2 + 0.15 * torch.rand(n, generator=generator))
    cx = r + (size - 2 * r) * torch.rand(n, generator=generator)
    cy = r + (size - 2 * r) * torch.rand(n, generator=generator)
    for s, shape in enumerate(SHAPES):
        pick = shape_ids == s
        if bool(pick.any()):
            mask = _shape_mask(shape, size, cx[pick], cy[pick], r[pick])
            images[pick] = _paint(images[pick], mask, palette[colour_ids[pick]])
    return images.clamp(0, 1), shape_ids, colour_ids


def small_object_scenes(n: int, size: int, object_px: float, generator: torch.Generator,
                        clutter: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` scenes with one small coloured square (side ``object_px``) among ``clutter`` grey squares of the
    same size: (images, colour ids of the coloured square, its centres (n, 2) as (x, y) pixels)."""
    palette = torch.tensor(list(COLOURS.values()))
    colour_ids = torch.randint(0, len(COLOURS), (n,), generator=generator)
    images = 0.35 + 0.3 * torch.rand(n, 1, 1, 1, generator=generator) + 0.05 * torch.rand(
        n, 1, size, size, generator=generator)
    images = images.expand(n, 3, size, size).clone()
    margin = object_px
    r = torch.full((n,), object_px / 2 / 0.85)
    for _ in range(clutter):
        cx, cy = (margin + (size - 2 * margin) * torch.rand(n, generator=generator) for _ in range(2))
        grey = torch.rand(n, 1, generator=generator).expand(n, 3)
        images = _paint(images, _shape_mask("square", size, cx, cy, r), grey)
    cx, cy = (margin + (size - 2 * margin) * torch.rand(n, generator=generator) for _ in range(2))
    images = _paint(images, _shape_mask("square", size, cx, cy, r), palette[colour_ids])
    return images.clamp(0, 1), colour_ids, torch.stack([cx, cy], dim=-1)


def shift(images: torch.Tensor, kind: str, severity: float, generator: torch.Generator) -> torch.Tensor:
    """A distribution shift of strength ``severity`` in [0, 1]: Gaussian ``noise``, box ``blur``, or a
    ``colour`` cast (random per-image channel gains and offset)."""
    if not 0.0 <= severity <= 1.0:
        raise ValueError(f"severity must be in [0, 1], got {severity}")
    if kind == "noise":
        return (images + 0.5 * severity * torch.randn(images.shape, generator=generator)).clamp(0, 1)
    if kind == "blur":
        k = 1 + 2 * round(3 * severity)
        return F.avg_pool2d(F.pad(images, [k // 2] * 4, mode="replicate"), k, stride=1)
    if kind == "colour":
        gains = 1 + severity * (torch.rand(images.shape[0], 3, 1, 1, generator=generator) - 0.5)
        offset = 0.3 * severity * (torch.rand(images.shape[0], 3, 1, 1, generator=generator) - 0.5)
        return (images * gains + offset).clamp(0, 1)
    raise ValueError(f"shift must be one of {SHIFTS}, got {kind!r}")
