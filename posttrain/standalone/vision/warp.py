"""AttWarp's rectilinear warp: image resampling by the inverse CDFs of an attention map's marginals.

From "Constructive Distortion: Improving MLLMs with Attention-Guided Image Warping" (Dalal et al., ICLR 2026,
arXiv 2510.09741), section 3 and the released code's ``warp`` routine. Given a non-negative map A (H x W):

1. optional transform of A (identity by default), plus a tiny bias (1e-9);
2. marginals m_x(j) = sum_i A(i, j), m_y(i) = sum_j A(i, j);
3. the forward map of each axis sends source coordinate 0 to 0 and j + 1 to W_out * M(j), M the normalised
   cumulative sum (so W goes to W_out);
4. the inverse map, by linear interpolation of the forward one (the code's ``np.interp``), gives the source
   coordinate of every output knot 0..W_out; the released code samples the image there (bilinear remap).

High-mass columns get a steep CDF and so more output pixels; the map is separable and monotone, so straight
lines stay straight and nothing is cropped. Coordinates follow the released code: pixel (row i, column j) has
its centre at (x=j, y=i); points and boxes use the same convention.

Resampling (``Warp.apply``): by default **area-exact** (ours; the released code point-samples). Output pixel k
covers the output interval [k, k + 1], whose source interval is [src_x[k], src_x[k + 1]] with source pixel j
covering [j, j + 1]; its value is the source image's average over that interval, per axis (the warp is
separable, so the 2-D cell average is the product of the two 1-D averages). A uniform map is then exactly an
area resize, every source pixel's mass reaches the output (sum over k of out[k] * cell length = sum of the
source), and a small object is never skipped the way a point sample that downsamples 4x skips it. ``mode
="bilinear"`` is the released code's point sampling (``grid_sample`` at the knots 0..W_out - 1, pixel centres
at integers, border replicated), kept for comparison.

Deviations, stated: pure torch (``torch.searchsorted``, matrix products, ``grid_sample``) instead of
numpy/OpenCV, batched, maps held in float64; area-exact resampling by default (above); a ``floor`` option (not in the paper) mixes each marginal with the uniform one,
m <- (1 - floor) m + floor / n, which bounds the compression: every source column keeps at least
floor * W_out / W output pixels. The ``log`` transform is log1p (log of a map with zeros is undefined).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda a: a,
    "square": torch.square,
    "sqrt": torch.sqrt,
    "exp": torch.exp,
    "log": torch.log1p,
}
"""Map transforms T applied before the marginals (the released code's options; the paper's scripts use identity)."""
DEFAULT_BIAS = 1e-9
"""Added to the transformed map, as in the released code, so no marginal is exactly zero."""


def interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """Batched ``np.interp``: piecewise-linear f with knots (xp, fp), evaluated at x, clamped to the ends.

    ``xp`` and ``fp`` are (B, K) with ``xp`` non-decreasing along the last axis; ``x`` is (B, M) or (M,)."""
    if xp.shape != fp.shape or xp.dim() != 2 or xp.shape[-1] < 2:
        raise ValueError(f"xp and fp must both be (B, K>=2); got {tuple(xp.shape)} and {tuple(fp.shape)}")
    x = x.to(xp.dtype).expand(xp.shape[0], -1) if x.dim() == 1 else x.to(xp.dtype)
    k = xp.shape[-1]
    idx = torch.searchsorted(xp.contiguous(), x.contiguous(), right=True).clamp(1, k - 1)
    x0, x1 = xp.gather(-1, idx - 1), xp.gather(-1, idx)
    f0, f1 = fp.gather(-1, idx - 1), fp.gather(-1, idx)
    span = x1 - x0
    w = torch.where(span > 0, (x - x0) / torch.where(span > 0, span, torch.ones_like(span)), torch.zeros_like(x))
    out = f0 + w.clamp(0.0, 1.0) * (f1 - f0)
    out = torch.where(x <= xp[:, :1], fp[:, :1], out)
    return torch.where(x >= xp[:, -1:], fp[:, -1:], out)


def map_marginals(attn: torch.Tensor, transform: str = "identity",
                  bias: float = DEFAULT_BIAS) -> tuple[torch.Tensor, torch.Tensor]:
    """(m_x (B, W), m_y (B, H)) of a non-negative map (B, H, W) after ``transform`` and ``bias``."""
    if attn.dim() != 3:
        raise ValueError(f"attention map must be (B, H, W), got shape {tuple(attn.shape)}")
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {sorted(TRANSFORMS)}, got {transform!r}")
    if bool((attn < 0).any()) or not bool(torch.isfinite(attn).all()):
        raise ValueError("attention map must be finite and non-negative")
    a = TRANSFORMS[transform](attn.double()) + bias
    return a.sum(dim=1), a.sum(dim=2)


def forward_knots(marginal: torch.Tensor, out_len: int, floor: float = 0.0) -> torch.Tensor:
    """The forward map at source coordinates 0..n: (B, n + 1), from 0 to ``out_len``.

    Knot j + 1 is ``out_len * M(j)``, M the normalised CDF of ``marginal`` (B, n) after the uniform ``floor``."""
    if marginal.dim() != 2 or marginal.shape[-1] < 1:
        raise ValueError(f"marginal must be (B, n>=1), got shape {tuple(marginal.shape)}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor}")
    if out_len < 1:
        raise ValueError(f"output length must be >= 1, got {out_len}")
    m = marginal.double()
    total = m.sum(dim=-1, keepdim=True)
    if bool((total <= 0).any()):
        raise ValueError("a marginal has no mass; the CDF is undefined")
    m = (1.0 - floor) * m / total + floor / m.shape[-1]
    cdf = torch.cumsum(m, dim=-1)
    cdf = cdf / cdf[:, -1:]
    knots = torch.cat([torch.zeros_like(cdf[:, :1]), out_len * cdf], dim=-1)
    knots[:, -1] = float(out_len)
    return knots


@dataclass(frozen=True)
class Warp:
    """A batched rectilinear warp: for each output knot 0..W_out (0..H_out), the source coordinate it samples.

    ``src_x`` is (B, W_out + 1) and ``src_y`` (B, H_out + 1), both non-decreasing, from 0 to W (H); output pixel
    k samples source coordinate ``src_x[:, k]``. ``in_hw`` is the source size (H, W)."""

    src_x: torch.Tensor
    src_y: torch.Tensor
    in_hw: tuple[int, int]

    @property
    def out_hw(self) -> tuple[int, int]:
        return self.src_y.shape[-1] - 1, self.src_x.shape[-1] - 1

    @classmethod
    def identity(cls, batch: int, in_hw: tuple[int, int], out_hw: tuple[int, int] | None = None) -> Warp:
        """The uniform warp: a plain resize from ``in_hw`` to ``out_hw`` (default: the same size)."""
        (h, w), (ho, wo) = in_hw, out_hw or in_hw
        return cls.from_marginals(torch.ones(batch, w), torch.ones(batch, h), (ho, wo))

    @classmethod
    def from_marginals(cls, m_x: torch.Tensor, m_y: torch.Tensor, out_hw: tuple[int, int],
                       floor: float = 0.0) -> Warp:
        """The warp whose output width (height) per source column (row) is proportional to ``m_x`` (``m_y``)."""
        (ho, wo), w, h = out_hw, m_x.shape[-1], m_y.shape[-1]
        src_x = _inverse(forward_knots(m_x, wo, floor), w, wo)
        src_y = _inverse(forward_knots(m_y, ho, floor), h, ho)
        return cls(src_x, src_y, (h, w))

    @classmethod
    def from_map(cls, attn: torch.Tensor, out_hw: tuple[int, int] | None = None, *, transform: str = "identity",
                 bias: float = DEFAULT_BIAS, floor: float = 0.0) -> Warp:
        """The warp of a map (B, H, W) given at the source image's resolution."""
        m_x, m_y = map_marginals(attn, transform, bias)
        return cls.from_marginals(m_x, m_y, out_hw or tuple(attn.shape[-2:]), floor)

    def apply(self, image: torch.Tensor, mode: str = "area") -> torch.Tensor:
        """Resample ``image`` (B, C, H, W) onto the output grid: ``area`` (exact cell averages, the default) or
        ``bilinear`` (the released code's point sampling at the knots, border replicated)."""
        if image.dim() != 4 or tuple(image.shape[-2:]) != self.in_hw or image.shape[0] != self.src_x.shape[0]:
            raise ValueError(f"image must be (B={self.src_x.shape[0]}, C, {self.in_hw[0]}, {self.in_hw[1]}), "
                             f"got {tuple(image.shape)}")
        if mode == "area":
            wx = area_weights(self.src_x, self.in_hw[1]).to(image.device, image.dtype)
            wy = area_weights(self.src_y, self.in_hw[0]).to(image.device, image.dtype)
            return wy.unsqueeze(1) @ image @ wx.transpose(-1, -2).unsqueeze(1)
        if mode != "bilinear":
            raise ValueError(f"mode must be 'area' or 'bilinear', got {mode!r}")
        (h, w), (ho, wo) = self.in_hw, self.out_hw
        gx = _normalise(self.src_x[:, :wo], w).view(-1, 1, wo, 1).expand(-1, ho, wo, 1)
        gy = _normalise(self.src_y[:, :ho], h).view(-1, ho, 1, 1).expand(-1, ho, wo, 1)
        grid = torch.cat([gx, gy], dim=-1).to(image.device, image.dtype)
        return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=True)

    def to_source(self, points: torch.Tensor) -> torch.Tensor:
        """Points (B, P, 2) as (x, y) in the warped image -> the source image."""
        return self._map_points(points, to_source=True)

    def to_warped(self, points: torch.Tensor) -> torch.Tensor:
        """Points (B, P, 2) as (x, y) in the source image -> the warped image."""
        return self._map_points(points, to_source=False)

    def boxes_to_source(self, boxes: torch.Tensor) -> torch.Tensor:
        """Boxes (B, N, 4) as (x0, y0, x1, y1) in the warped image -> the source image (a box stays a box)."""
        return self.to_source(boxes.reshape(boxes.shape[0], -1, 2)).reshape(boxes.shape)

    def boxes_to_warped(self, boxes: torch.Tensor) -> torch.Tensor:
        """Boxes (B, N, 4) as (x0, y0, x1, y1) in the source image -> the warped image."""
        return self.to_warped(boxes.reshape(boxes.shape[0], -1, 2)).reshape(boxes.shape)

    def _map_points(self, points: torch.Tensor, to_source: bool) -> torch.Tensor:
        if points.dim() != 3 or points.shape[-1] != 2 or points.shape[0] != self.src_x.shape[0]:
            raise ValueError(f"points must be (B={self.src_x.shape[0]}, P, 2), got {tuple(points.shape)}")
        out = []
        for axis, src in ((0, self.src_x), (1, self.src_y)):
            knots = torch.arange(src.shape[-1], dtype=src.dtype).expand_as(src)
            p = points[..., axis].double()
            out.append(interp(p, knots, src) if to_source else interp(p, src, knots))
        return torch.stack(out, dim=-1).to(points.dtype)

    def then(self, second: Warp) -> Warp:
        """The single warp equal to applying ``self`` and then ``second`` to its output (one resampling)."""
        if second.in_hw != self.out_hw or second.src_x.shape[0] != self.src_x.shape[0]:
            raise ValueError(f"second warp must take this warp's output {self.out_hw}, takes {second.in_hw}")
        src = []
        for first, nxt in ((self.src_x, second.src_x), (self.src_y, second.src_y)):
            knots = torch.arange(first.shape[-1], dtype=first.dtype).expand_as(first)
            src.append(interp(nxt, knots, first))
        return Warp(src[0], src[1], self.in_hw)

    def select(self, keep: torch.Tensor, other: Warp) -> Warp:
        """Per sample: this warp where ``keep`` (B,) is true, else ``other`` (same sizes)."""
        k = keep.view(-1, 1)
        return Warp(torch.where(k, self.src_x, other.src_x), torch.where(k, self.src_y, other.src_y), self.in_hw)


def area_weights(src: torch.Tensor, n: int) -> torch.Tensor:
    """Area-exact resampling weights (B, n_out, n) of one axis: row k is the share of output cell k's source
    interval [src[k], src[k + 1]] that falls on each source pixel [j, j + 1], so each row sums to 1. A cell
    whose interval is shorter than 1e-9 source pixels takes the pixel its start falls on."""
    if src.dim() != 2 or src.shape[-1] < 2:
        raise ValueError(f"src must be (B, n_out + 1 >= 2), got shape {tuple(src.shape)}")
    lo, hi = src[:, :-1].unsqueeze(-1), src[:, 1:].unsqueeze(-1)
    j = torch.arange(n, dtype=src.dtype, device=src.device)
    overlap = (torch.minimum(hi, j + 1) - torch.maximum(lo, j)).clamp_min(0.0)
    length = overlap.sum(dim=-1, keepdim=True)
    point = F.one_hot(lo.squeeze(-1).floor().long().clamp(0, n - 1), n).to(src.dtype)
    return torch.where(length > 1e-9, overlap / length.clamp_min(1e-30), point)


def _inverse(knots: torch.Tensor, n: int, out_len: int) -> torch.Tensor:
    """Source coordinate of every output coordinate 0..out_len, inverting the forward ``knots`` (B, n + 1)."""
    source = torch.arange(n + 1, dtype=knots.dtype).expand_as(knots)
    return interp(torch.arange(out_len + 1, dtype=knots.dtype), knots, source)


def _normalise(coord: torch.Tensor, n: int) -> torch.Tensor:
    """Pixel-centre coordinates (0..n-1) -> grid_sample's [-1, 1] with align_corners=True."""
    return coord * (2.0 / (n - 1)) - 1.0 if n > 1 else torch.zeros_like(coord)
