"""AttWarp's rectilinear warp (posttrain.standalone.vision.warp): hand-computed maps and the invariants of the paper's warp."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from posttrain.standalone.vision.warp import Warp, area_weights, forward_knots, interp, map_marginals


def test_interp_matches_numpy_and_clamps():
    xp = torch.tensor([[0.0, 1.0, 4.0]], dtype=torch.float64)
    fp = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    x = torch.tensor([-1.0, 0.0, 0.5, 2.5, 4.0, 9.0])
    expected = np.interp(x.numpy(), xp[0].numpy(), fp[0].numpy())
    assert torch.allclose(interp(x, xp, fp)[0], torch.from_numpy(expected))


def test_forward_and_inverse_by_hand():
    # m = [1, 3], W_out = 4: CDF [0.25, 1] -> forward knots [0, 1, 4]; inverse at 0..4 = [0, 1, 4/3, 5/3, 2].
    knots = forward_knots(torch.tensor([[1.0, 3.0]]), 4)
    assert knots.tolist() == [[0.0, 1.0, 4.0]]
    warp = Warp.from_marginals(torch.tensor([[1.0, 3.0]]), torch.tensor([[1.0, 1.0]]), (2, 4))
    assert torch.allclose(warp.src_x, torch.tensor([[0.0, 1.0, 4 / 3, 5 / 3, 2.0]], dtype=torch.float64))
    assert torch.allclose(warp.src_y, torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64))


def test_marginals_and_bad_maps():
    a = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    m_x, m_y = map_marginals(a, bias=0.0)
    assert m_x.tolist() == [[4.0, 6.0]] and m_y.tolist() == [[3.0, 7.0]]
    assert map_marginals(a, "square", bias=0.0)[0].tolist() == [[10.0, 20.0]]
    with pytest.raises(ValueError, match="non-negative"):
        map_marginals(-a)
    with pytest.raises(ValueError, match="transform"):
        map_marginals(a, "cube")
    with pytest.raises(ValueError, match="floor"):
        forward_knots(torch.ones(1, 3), 3, floor=1.5)


def test_uniform_map_is_identity():
    image = torch.rand(2, 3, 13, 17)
    warp = Warp.from_map(torch.ones(2, 13, 17))
    assert torch.allclose(warp.apply(image), image, atol=1e-5, rtol=0)
    assert torch.allclose(warp.apply(image, mode="bilinear"), image, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="mode"):
        warp.apply(image, mode="nearest")


def test_area_weights_by_hand():
    # Source pixels [j, j+1], j = 0..3; cells [0, 1.5] and [1.5, 4]: overlaps (1, 0.5) / 1.5 and (0.5, 1, 1) / 2.5.
    w = area_weights(torch.tensor([[0.0, 1.5, 4.0]], dtype=torch.float64), 4)
    assert torch.allclose(w, torch.tensor([[[2 / 3, 1 / 3, 0, 0], [0, 0.2, 0.4, 0.4]]], dtype=torch.float64))
    # A cell of zero length takes the pixel its start falls on.
    w = area_weights(torch.tensor([[0.0, 2.5, 2.5, 4.0]], dtype=torch.float64), 4)
    assert w[0, 1].tolist() == [0.0, 0.0, 1.0, 0.0]


def test_area_resample_by_hand():
    # Row [1, 2, 3] into 2 pixels: [0, 1.5] -> (1 + 0.5 * 2) / 1.5 = 4/3; [1.5, 3] -> (0.5 * 2 + 3) / 1.5 = 8/3.
    image = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).view(1, 1, 1, 3)
    out = Warp.identity(1, (1, 3), (1, 2)).apply(image)
    assert torch.allclose(out.flatten(), torch.tensor([4 / 3, 8 / 3], dtype=torch.float64))


def test_uniform_map_downsample_is_an_area_resize():
    g = torch.Generator().manual_seed(4)
    image = torch.rand(2, 3, 32, 48, generator=g)
    warp = Warp.from_map(torch.ones(2, 32, 48), (8, 12))
    assert torch.allclose(warp.apply(image), F.interpolate(image, size=(8, 12), mode="area"), atol=1e-6)


def test_area_resample_conserves_mass():
    # sum over output cells of value x cell area (in source pixels) = the source's sum, for any map.
    g = torch.Generator().manual_seed(5)
    image = torch.rand(2, 1, 20, 30, generator=g, dtype=torch.float64)
    warp = Warp.from_map(torch.rand(2, 20, 30, generator=g) ** 4, (7, 9))
    out = warp.apply(image)
    area = warp.src_y.diff(dim=-1).view(2, 1, 7, 1) * warp.src_x.diff(dim=-1).view(2, 1, 1, 9)
    assert torch.allclose((out * area).sum(dim=(-2, -1)), image.sum(dim=(-2, -1)))


def test_area_keeps_a_one_pixel_object_that_point_sampling_skips():
    # A bright source column 2 of 16, resized 4x by a uniform map: area keeps a quarter of it in output column 0;
    # point sampling reads source columns 0, 4, 8, 12 only and loses it.
    image = torch.zeros(1, 1, 16, 16)
    image[..., 2] = 1.0
    warp = Warp.identity(1, (16, 16), (4, 4))
    assert torch.allclose(warp.apply(image)[0, 0, :, 0], torch.full((4,), 0.25))
    assert float(warp.apply(image, mode="bilinear").abs().max()) == 0.0


def test_monotone_bijection_without_cropping_and_point_roundtrip():
    g = torch.Generator().manual_seed(0)
    attn = torch.rand(3, 20, 30, generator=g) ** 4
    warp = Warp.from_map(attn, (24, 24))
    for src, n in ((warp.src_x, 30), (warp.src_y, 20)):
        assert bool((src[:, 1:] >= src[:, :-1]).all())
        assert torch.allclose(src[:, 0], torch.zeros(3, dtype=src.dtype))
        assert torch.allclose(src[:, -1], torch.full((3,), float(n), dtype=src.dtype))
    points = torch.rand(3, 50, 2, generator=g, dtype=torch.float64) * torch.tensor([30.0, 20.0], dtype=torch.float64)
    assert torch.allclose(warp.to_source(warp.to_warped(points)), points, atol=1e-5)
    boxes = torch.tensor([[[0.0, 0.0, 30.0, 20.0]]], dtype=torch.float64).expand(3, 1, 4)
    assert torch.allclose(warp.boxes_to_warped(boxes), torch.tensor([0.0, 0.0, 24.0, 24.0], dtype=torch.float64))


def test_mass_becomes_width():
    # 80% of the mass on the middle 20% of 50 columns (20..29): that band takes ~80% of the 100 output columns.
    m = torch.full((1, 50), 0.2 / 40)
    m[0, 20:30] = 0.8 / 10
    warp = Warp.from_marginals(m, torch.ones(1, 10), (10, 100))
    inside = ((warp.src_x[0, :100] >= 20) & (warp.src_x[0, :100] < 30)).sum().item()
    assert abs(inside - 80) <= 1


def test_rectilinear_stripes_stay_stripes():
    g = torch.Generator().manual_seed(1)
    warp = Warp.from_map(torch.rand(1, 16, 16, generator=g) ** 3, (20, 20))
    vertical = torch.arange(16.0).view(1, 1, 1, 16).expand(1, 1, 16, 16)
    out = warp.apply(vertical.contiguous())
    assert torch.allclose(out, out[:, :, :1, :].expand_as(out))
    horizontal = vertical.transpose(-1, -2).contiguous()
    out = warp.apply(horizontal)
    assert torch.allclose(out, out[:, :, :, :1].expand_as(out))


def _numpy_reference(image: np.ndarray, attn: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """The released code's warp, rewritten with numpy: np.interp inverse maps, bilinear remap, border replicate."""
    a = attn + 1e-9
    (h, w), (ho, wo) = a.shape, out_hw
    fx = np.concatenate([[0.0], wo * np.cumsum(a.sum(0)) / a.sum()])
    fy = np.concatenate([[0.0], ho * np.cumsum(a.sum(1)) / a.sum()])
    map_x = np.interp(np.arange(wo), fx, np.arange(w + 1))
    map_y = np.interp(np.arange(ho), fy, np.arange(h + 1))
    out = np.zeros((image.shape[0], ho, wo))
    for r in range(ho):
        for c in range(wo):
            x, y = min(max(map_x[c], 0), w - 1), min(max(map_y[r], 0), h - 1)
            x0, y0 = int(np.floor(x)), int(np.floor(y))
            x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
            dx, dy = x - x0, y - y0
            out[:, r, c] = ((1 - dx) * (1 - dy) * image[:, y0, x0] + dx * (1 - dy) * image[:, y0, x1]
                            + (1 - dx) * dy * image[:, y1, x0] + dx * dy * image[:, y1, x1])
    return out


def test_batched_warp_matches_numpy_reference():
    g = torch.Generator().manual_seed(2)
    images, attn = torch.rand(2, 3, 9, 12, generator=g), torch.rand(2, 9, 12, generator=g) ** 2
    out = Warp.from_map(attn, (10, 8)).apply(images, mode="bilinear")
    for b in range(2):
        ref = _numpy_reference(images[b].double().numpy(), attn[b].double().numpy(), (10, 8))
        assert np.allclose(out[b].numpy(), ref, atol=1e-4)


def test_floor_bounds_compression():
    m = torch.zeros(1, 40)
    m[0, 5] = 1.0
    floor, w_out = 0.25, 80
    widths = forward_knots(m, w_out, floor=floor).diff(dim=-1)
    assert float(widths.min()) >= floor * w_out / 40 - 1e-9
    assert float(forward_knots(m, w_out).diff(dim=-1).min()) < 1e-6


def test_composition_is_one_resampling_of_the_source():
    g = torch.Generator().manual_seed(3)
    first = Warp.from_map(torch.rand(1, 12, 12, generator=g) ** 2, (16, 16))
    second = Warp.from_map(torch.rand(1, 16, 16, generator=g) ** 2, (16, 16))
    both = first.then(second)
    # Exact on the output pixel grid, which is all the resampling reads (between pixels the composite is the
    # linear interpolation of the two piecewise-linear maps' composition).
    points = torch.randint(0, 17, (1, 20, 2), generator=g).double()
    assert torch.allclose(both.to_source(points), first.to_source(second.to_source(points)), atol=1e-9)
    assert both.in_hw == (12, 12) and both.out_hw == (16, 16)
