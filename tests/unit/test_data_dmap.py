"""DMAP math by hand (tied tokens share one interval), and Proposition 3.1 exactly: pure samples map to
Uniform(0,1), also with bf16 ties; truncated ones don't."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from data_pipelines.dmap.core import (
    chi2_sf,
    chi2_uniform,
    dmap_intervals,
    dmap_samples,
    intervals_from_scores,
    terrell_scott_bins,
    weighted_histogram,
)
from posttrain.engines.scores import mass_above_from_logits, tied_mass_from_logits, topk_tied_mass

ALPHA = 0.01  # significance level of the uniformity test in these tests


def test_intervals_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.5, 0.3, 0.2]]))
    a, b, h = dmap_intervals(logits, torch.tensor([1, 0, 1, 2]))
    assert torch.allclose(a, torch.tensor([0.5, 0.0, 0.0, 0.8]), atol=1e-6)  # ties are not "above"
    # row 2: tokens 0 and 1 tie at 0.4, so they share [0, 0.8], not [0, 0.4] each
    assert torch.allclose(b, torch.tensor([0.8, 0.5, 0.8, 1.0]), atol=1e-6)
    expected_h = -(0.5 * math.log(0.5) + 0.3 * math.log(0.3) + 0.2 * math.log(0.2))
    assert h[0].item() == pytest.approx(expected_h, abs=1e-5)
    three_way = torch.log(torch.tensor([[0.2, 0.4, 0.2, 0.2]]))
    assert tied_mass_from_logits(three_way, torch.tensor([2])).item() == pytest.approx(0.6, abs=1e-6)
    assert mass_above_from_logits(three_way, torch.tensor([2])).item() == pytest.approx(0.4, abs=1e-6)
    assert tied_mass_from_logits(three_way, torch.tensor([1])).item() == pytest.approx(0.4, abs=1e-6)


def test_topk_tied_mass_by_hand():
    top = [math.log(0.4), math.log(0.2), math.log(0.2), math.log(0.1)]
    assert topk_tied_mass(top, math.log(0.2)) == (pytest.approx(0.4), True)
    assert topk_tied_mass(top, math.log(0.4)) == (pytest.approx(0.4), True)
    # the last of the top-k: a token tied with it may be cut off, so only a lower bound
    assert topk_tied_mass(top, math.log(0.1)) == (pytest.approx(0.1), False)
    assert topk_tied_mass(top, math.log(0.05)) == (pytest.approx(0.05), False)  # not in the top-k


def test_bf16_ties_keep_the_map_uniform():
    """Proposition 3.1 with bf16 logits: a peaked distribution whose top tokens collide in bf16 (half the
    sampled tokens are tied with another). Giving each tied token the paper's own interval
    [a, a + p] piles the map up at the left of the tied block (chi-square p ~ 1e-35); sharing the tied
    mass makes it uniform again."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4000, 64, generator=g) * 2.0
    logits[:, :6] = 20.0 + 0.25 * torch.randn(4000, 6, generator=g)
    logits = logits.to(torch.bfloat16)
    probs = torch.softmax(logits.float(), -1)
    targets = torch.multinomial(probs, 1, generator=g).squeeze(-1)
    mass_above = mass_above_from_logits(logits, targets)
    tied = tied_mass_from_logits(logits, targets)
    logprobs = probs.gather(-1, targets[:, None]).squeeze(-1).log()
    assert float((tied > 1.001 * logprobs.exp()).float().mean()) > 0.4
    p_values = {}
    for label, width in (("paper", None), ("split", tied)):
        a, b = intervals_from_scores(mass_above, logprobs, width)
        p_values[label] = chi2_uniform(dmap_samples(a, b, torch.Generator().manual_seed(1))).p_value
    assert p_values["paper"] < 1e-10 and p_values["split"] > ALPHA, p_values
    a, b, _ = dmap_intervals(logits, targets)  # the logits path splits ties the same way
    assert torch.allclose(b.double(), intervals_from_scores(mass_above, logprobs, tied)[1], atol=1e-6)


def test_samples_inside_intervals():
    a, b = torch.tensor([0.0, 0.5, 0.9]), torch.tensor([0.1, 0.5, 1.0])
    x = dmap_samples(a, b, torch.Generator().manual_seed(0))
    assert ((x >= a) & (x <= b)).all() and x[1] == 0.5


def test_chi2_by_hand():
    r = chi2_uniform(torch.tensor([0.1, 0.2, 0.3, 0.9]), bins=2)  # freqs .75/.25
    assert r.statistic == pytest.approx(4 * 2 * (0.25**2 + 0.25**2))
    assert r.p_value == pytest.approx(0.31731, abs=1e-4)  # P(chi2_1 > 1)
    assert chi2_sf(3.841459, 1) == pytest.approx(0.05, abs=1e-5)
    perfect = chi2_uniform((torch.arange(1000) + 0.5) / 1000, bins=10)
    assert perfect.statistic == pytest.approx(0.0, abs=1e-9) and perfect.p_value == pytest.approx(1.0)
    assert perfect.reliable
    auto = chi2_uniform(torch.rand(1000, generator=torch.Generator().manual_seed(0)))
    assert terrell_scott_bins(4000) == 20 and auto.bins == terrell_scott_bins(1000) == 13


def test_weighted_histogram_by_hand():
    assert torch.allclose(weighted_histogram(torch.tensor([0.0]), torch.tensor([1.0]), bins=4), torch.ones(4, dtype=torch.float64))
    d = weighted_histogram(torch.tensor([0.0, 0.5]), torch.tensor([0.5, 1.0]), torch.tensor([1.0, 3.0]), bins=2, lam=2.0)
    assert torch.allclose(d, torch.tensor([2 / 3, 4 / 3], dtype=torch.float64))  # weights 1 and min(3, 2)
    point = weighted_histogram(torch.tensor([0.3]), torch.tensor([0.3]), bins=2)
    assert torch.allclose(point, torch.tensor([2.0, 0.0], dtype=torch.float64))


@pytest.fixture(scope="module")
def peaky_backend():
    from posttrain.engines.hf import HFRolloutEngine
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, seed=3)
    model = build_model(recipe, tok)
    with torch.no_grad():  # sharpen the random model so truncation and temperature matter
        model.get_input_embeddings().weight.mul_(8.0)
    return HFRolloutEngine(model, tok, max_batch_size=32)


def _dmap_pvalue(backend, params, n=24, seed=7):
    from data_pipelines.dmap.pipeline import map_texts

    bos = backend.tokenizer.bos_token_id
    seqs = [[bos] + ids for ids in backend.generate([[bos]] * n, params).completion_ids]
    return map_texts(backend, seqs, seed=seed)


def test_pure_sampling_is_uniform_and_truncation_is_not(peaky_backend):
    from posttrain.engines.base import SamplingParams

    pure = _dmap_pvalue(peaky_backend, SamplingParams(max_new_tokens=64, temperature=1.0, seed=11))
    mean_h = float(pure.h.mean())
    assert 0.5 < mean_h < 4.0, mean_h  # neither degenerate nor uniform over the vocabulary
    assert pure.chi2.reliable and pure.chi2.n >= 1200
    assert pure.chi2.p_value > ALPHA, pure.chi2
    topk = _dmap_pvalue(peaky_backend, SamplingParams(max_new_tokens=64, temperature=1.0, top_k=3, seed=11))
    assert topk.chi2.p_value < 1e-6, topk.chi2
    cold = _dmap_pvalue(peaky_backend, SamplingParams(max_new_tokens=64, temperature=0.5, seed=11))
    assert cold.chi2.p_value < 1e-6, cold.chi2
    # head bias: truncated / cold text puts its mass near 0
    assert float(topk.x.mean()) < 0.4 and float(cold.x.mean()) < 0.4 and abs(float(pure.x.mean()) - 0.5) < 0.05
