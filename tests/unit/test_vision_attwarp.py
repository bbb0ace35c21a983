"""AttWarp on config-built tiny models: the attention tap, the map recipes, the chain's stopping rule."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.standalone.vision.attwarp import (
    AttWarpConfig,
    attwarp,
    attwarp_chain,
    image_attention,
    kl_divergence,
    postprocess_map,
    relative_attention,
)
from posttrain.standalone.vision.tap import AttentionTap
from posttrain.standalone.vision.tiny import tiny_llava, tiny_qwen_vl
from posttrain.standalone.vision.vlm import TensorPrompter, image_grid

QUESTIONS = [[10, 11, 12], [13, 14]]


@pytest.fixture(scope="module")
def llava_pair():
    return tiny_llava(seed=0, attn_implementation="sdpa"), tiny_llava(seed=0, attn_implementation="eager")


def _images(seed: int = 0, size: int = 32) -> torch.Tensor:
    return torch.rand(2, 3, size, size, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("which", [0, 1])
def test_tap_leaves_logits_bit_identical(llava_pair, which):
    model = llava_pair[which]
    inputs = TensorPrompter(model, QUESTIONS)(_images())
    with torch.no_grad():
        plain = model(**inputs).logits
        with AttentionTap(model, [0, 1]) as tap:
            tapped = model(**inputs).logits
        after = model(**inputs).logits
    assert torch.equal(plain, tapped) and torch.equal(plain, after)
    assert len(tap.records[0]) == 1 and tap.records[1][0].shape[:3] == (2, 4, 1)
    assert model.config.text_config._attn_implementation == ("sdpa", "eager")[which]


def test_tap_rows_equal_eager_output_attentions(llava_pair):
    model = llava_pair[1]
    inputs = TensorPrompter(model, QUESTIONS)(_images())
    with torch.no_grad(), AttentionTap(model, [-1], rows="all") as tap:
        out = model(**inputs, output_attentions=True)
    reference = out.attentions[-1]
    assert torch.allclose(tap.records[1][0], reference, atol=1e-6)


def test_map_shape_mass_and_same_under_sdpa_and_eager(llava_pair):
    maps = [image_attention(m, TensorPrompter(m, QUESTIONS)(_images()), [1]) for m in llava_pair]
    assert maps[0].shape == (2, 4, 4)
    assert bool((maps[0] >= 0).all())
    assert torch.allclose(maps[0].sum(dim=(1, 2)), torch.ones(2), atol=1e-5)
    assert torch.allclose(maps[0], maps[1], atol=1e-6)


def test_generation_steps_are_averaged(llava_pair):
    model = llava_pair[0]
    inputs = TensorPrompter(model, QUESTIONS)(_images())
    with torch.no_grad(), AttentionTap(model, [1]) as tap:
        model.generate(**inputs, max_new_tokens=3, do_sample=False, min_new_tokens=3)
    assert len(tap.records[1]) == 3
    m = image_attention(model, inputs, [1], max_new_tokens=3)
    assert torch.allclose(m.sum(dim=(1, 2)), torch.ones(2), atol=1e-5)


@pytest.mark.parametrize("version", ["2", "2.5"])
def test_qwen_vl_map_on_its_merged_grid(version):
    model = tiny_qwen_vl(version)
    inputs = TensorPrompter(model, QUESTIONS)(_images(size=24))  # 24 px / patch 4 / merge 2 = 3 x 3 tokens
    positions, grid = image_grid(model, inputs)
    assert grid == (3, 3) and positions.shape == (2, 9)
    with torch.no_grad():
        plain = model(**inputs).logits
        with AttentionTap(model, [1]):
            tapped = model(**inputs).logits
    assert torch.equal(plain, tapped)
    m = image_attention(model, inputs, [1])
    assert m.shape == (2, 3, 3) and torch.allclose(m.sum(dim=(1, 2)), torch.ones(2), atol=1e-5)


def test_tap_refuses_bad_layers(llava_pair):
    with pytest.raises(ValueError, match="out of range"):
        AttentionTap(llava_pair[0], [5])
    with pytest.raises(ValueError, match="rows"):
        AttentionTap(llava_pair[0], [0], rows="first")


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flex_attention"])
def test_tap_refuses_attention_without_4d_masks(implementation):
    # flash-attention's mask is 2-D padding (or none) and flex attention's a BlockMask: the tap would index them
    # as (B, 1, Q, K). It refuses on entry and leaves the model's implementation as it was.
    model = tiny_llava(seed=0)
    config = model.config.text_config
    config._attn_implementation = implementation
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"), AttentionTap(model, [0]):
        pass
    assert config._attn_implementation == implementation


def test_kl_and_relative_by_hand():
    p = torch.tensor([[[0.5, 0.5]]])
    q = torch.tensor([[[0.25, 0.75]]])
    expected = 0.5 * math.log(2.0) + 0.5 * math.log(0.5 / 0.75)
    assert kl_divergence(p, q).item() == pytest.approx(expected)
    assert relative_attention(p, q).flatten().tolist() == pytest.approx([2 / (2 + 2 / 3), (2 / 3) / (2 + 2 / 3)])


def test_postprocess_by_hand():
    # min-max gives [[0, 1], [0, 1]]; mean 0.5, std (unbiased) sqrt(1/3); z = +-0.866; sigmoid(+-8.66).
    m = torch.tensor([[[0.2, 0.6], [0.2, 0.6]]])
    out = postprocess_map(m, (2, 2), enhance_coe=10.0, blur=1)
    hi = 1 / (1 + math.exp(-10 * 0.5 / math.sqrt(1 / 3)))
    assert out[0].flatten().tolist() == pytest.approx([1 - hi, hi, 1 - hi, hi], abs=1e-6)
    assert postprocess_map(m, (4, 4), enhance_coe=0.0).shape == (1, 4, 4)


def test_chain_stops_when_the_map_repeats_and_respects_the_cap():
    fixed = torch.zeros(1, 4, 4)
    fixed[0, 1, 2] = 1.0
    fixed = (fixed + 0.01) / (fixed + 0.01).sum()
    calls = []

    def same_map(view: torch.Tensor) -> torch.Tensor:
        calls.append(view)
        return fixed

    images = torch.rand(1, 3, 16, 16)
    res = attwarp_chain(images, same_map, (8, 8), AttWarpConfig(max_rounds=5))
    assert len(calls) == 2 and res.rounds.tolist() == [1] and res.kls[0].item() == pytest.approx(0.0)
    g = torch.Generator().manual_seed(0)

    def new_map(view: torch.Tensor) -> torch.Tensor:
        m = torch.rand(1, 4, 4, generator=g) ** 6
        return m / m.sum()

    res = attwarp_chain(images, new_map, (8, 8), AttWarpConfig(max_rounds=3, kl_eps=1e-6))
    assert len(res.maps) == 3 and res.rounds.tolist() == [3] and res.warped.shape == (1, 3, 8, 8)


def test_attwarp_end_to_end_and_config_errors(llava_pair):
    model = llava_pair[0]
    images = _images(size=64)
    res = attwarp(model, TensorPrompter(model, QUESTIONS), images, (32, 32), AttWarpConfig(layers=(1,),
                                                                                           max_new_tokens=1))
    assert res.warped.shape == (2, 3, 32, 32) and res.warp.in_hw == (64, 64)
    with pytest.raises(ValueError, match="generic"):
        attwarp(model, TensorPrompter(model, QUESTIONS), images, (32, 32), AttWarpConfig(recipe="relative"))
    for field, value in (("recipe", "max"), ("max_rounds", 0), ("blur", 2), ("floor", 1.0), ("kl_eps", 0.0)):
        with pytest.raises(ValueError, match=field):
            AttWarpConfig(**{field: value}).validate()
