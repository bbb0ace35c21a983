"""The masked-diffusion likelihood estimators: stratified counts, coupling, MC, common random numbers,
exact enumeration against the any-order-autoregressive likelihood, and d1's mean-field estimate."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch

from posttrain.algos.elbo import (
    draw_elbo_masks,
    draw_prompt_masks,
    elbo_terms,
    exact_elbo,
    mean_field_logprobs,
    model_logits_fn,
    sequence_elbo,
    stratified_mask_counts,
)
from posttrain.models.diffusion import tiny_diffusion_model
from posttrain.models.tiny import build_tokenizer

MASK = 4  # only used by the table models below, which ignore their input


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_diffusion_model(tokenizer, hidden_size=32, num_layers=2, seed=1)


def _batch(tokenizer, length: int, rows: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts of different lengths followed by random completions of ``length`` tokens."""
    g = torch.Generator().manual_seed(seed)
    prompts = [tokenizer("12+3=", add_special_tokens=False)["input_ids"], tokenizer("7*", add_special_tokens=False)["input_ids"]]
    prompts = (prompts * rows)[:rows]
    width = max(map(len, prompts))
    ids = torch.full((rows, width + length), tokenizer.pad_token_id)
    am = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) : width] = torch.tensor(p)
        am[r, width - len(p) :] = 1
    ids[:, width:] = torch.randint(10, 60, (rows, length), generator=g)
    return ids, am


def _table_fn(table: torch.Tensor):
    """A factorised model: logits at completion position i are table[i] whatever the input."""
    length = table.shape[0]

    def fn(ids, am, keep):
        start = ids.shape[1] - length
        rows = table[(keep - start)] if keep is not None else table
        return rows.unsqueeze(0).expand(ids.shape[0], -1, -1)

    return fn


# --- randomness -----------------------------------------------------------------------------------

def test_stratified_counts_cover_range_and_spread_over_batch():
    g = torch.Generator().manual_seed(0)
    counts = stratified_mask_counts(batch_size=4, length=7, num_mc=3, generator=g, stratify="batch")
    assert counts.shape == (4, 3) and counts.min() >= 0 and counts.max() <= 7
    for m in range(3):  # rows are k, k+2, k+4, k+6 (mod 8): evenly spread
        diffs = sorted(((counts[1:, m] - counts[:-1, m]) % 8).tolist())
        assert diffs == [2, 2, 2]
    mc = stratified_mask_counts(batch_size=2, length=7, num_mc=4, generator=g, stratify="mc")
    assert sorted(((mc[:, 1:] - mc[:, :-1]) % 8).flatten().tolist()) == [2] * 6
    # each count is marginally uniform on {0..L}
    many = stratified_mask_counts(batch_size=3, length=4, num_mc=4000, generator=g, stratify="batch")
    freq = torch.bincount(many.flatten(), minlength=5).float() / many.numel()
    assert torch.allclose(freq, torch.full((5,), 0.2), atol=0.02)


@pytest.mark.parametrize("stratify", ["batch", "mc"])
@pytest.mark.parametrize("size,length", [(2, 4), (4, 6), (2, 3), (6, 4)])
def test_stratified_counts_are_exactly_uniform_for_every_row(stratify, size, length):
    """Every row (or MC sample) is the shared draw k shifted by a fixed offset, so it is distributed exactly
    like k, even when size and length are both even (where round-half-to-even made the offset of a middle
    row depend on k's parity: B = 2, L = 4 gave row 1 the counts {2, 4, 4, 1, 1})."""
    span, draws = length + 1, 3000
    g = torch.Generator().manual_seed(11)
    if stratify == "batch":
        counts = stratified_mask_counts(size, length, draws, g, "batch")  # [size, draws]
    else:
        counts = stratified_mask_counts(draws, length, size, g, "mc").T  # [size, draws]
    shifts = (counts - counts[0]) % span
    expected = [j * span // size for j in range(size)]  # floor(j (L+1) / B): spread as evenly as possible
    assert [set(row.tolist()) for row in shifts] == [{e} for e in expected]
    for row in counts:
        freq = torch.bincount(row, minlength=span).float() / draws
        assert torch.allclose(freq, torch.full((span,), 1 / span), atol=0.03)


def test_stratified_elbo_is_unbiased_in_every_row_at_even_batch_and_length():
    """A context-free model with every log-prob c = -log 12: pass 1 with l > 0 masked tokens scores exactly
    (L+1)/l * l * c = (L+1) c, and l = 0 scores 0. With counts uniform on {0..L} the mean is L/(L+1) of
    that, the exact ELBO L c; a row that never gets l = 0 (row 1 of B = 2, L = 4 under rounding) averages
    (L+1) c = -12.42 instead of -9.94."""
    length, draws = 4, 3000
    table = torch.zeros(length, 12)
    ids = torch.cat([torch.tensor([[7, 8]]), torch.tensor([[1, 3, 0, 11]])], dim=1).expand(2, -1)
    masks = draw_elbo_masks(2, length, draws, torch.Generator().manual_seed(4), stratify="batch")
    c = -math.log(12)
    per_sample = elbo_terms(_table_fn(table), ids, masks[:, :1], MASK, coupled=False).sum(-1)
    assert per_sample.tolist() == pytest.approx([(length + 1) * c if masks[r, 0].any() else 0.0 for r in range(2)])
    estimate = sequence_elbo(_table_fn(table), ids, masks, MASK, coupled=False)
    exact = exact_elbo(_table_fn(table), ids, length, MASK)
    assert exact.tolist() == pytest.approx([length * c] * 2, abs=1e-5)
    assert estimate.tolist() == pytest.approx(exact.tolist(), rel=0.03)


def test_masks_have_exact_counts_and_are_seeded():
    masks = draw_elbo_masks(5, 9, 2, torch.Generator().manual_seed(3))
    again = draw_elbo_masks(5, 9, 2, torch.Generator().manual_seed(3))
    counts = stratified_mask_counts(5, 9, 2, torch.Generator().manual_seed(3))
    assert torch.equal(masks, again)
    assert torch.equal(masks.sum(-1), counts)


def test_prompt_masks_touch_only_real_prompt_tokens():
    valid = torch.tensor([[0, 0, 1, 1, 1, 1] * 50])
    pm = draw_prompt_masks(valid, 0.15, torch.Generator().manual_seed(0), num_draws=3)
    assert pm.shape == (1, 3, 300)
    assert not pm[:, :, valid[0] == 0].any()
    rate = pm[:, :, valid[0] == 1].float().mean().item()
    assert 0.1 < rate < 0.2


# --- ratio and common random numbers --------------------------------------------------------------

def test_ratio_is_exactly_one_when_model_equals_old_model(model, tokenizer):
    ids, am = _batch(tokenizer, length=8, rows=4)
    old = copy.deepcopy(model)
    masks = draw_elbo_masks(4, 8, 2, torch.Generator().manual_seed(7))
    current = sequence_elbo(model_logits_fn(model), ids, masks, tokenizer.mask_token_id, am)
    with torch.no_grad():
        old_elbo = sequence_elbo(model_logits_fn(old), ids, masks, tokenizer.mask_token_id, am)
    ratio = torch.exp((current - old_elbo) / 8)
    assert torch.equal(ratio.detach(), torch.ones(4))
    ratio.sum().backward()  # differentiable through the current model only
    assert next(model.parameters()).grad is not None
    model.zero_grad(set_to_none=True)
    # with different (not shared) masks the same model gives a different estimate
    other = draw_elbo_masks(4, 8, 2, torch.Generator().manual_seed(8))
    with torch.no_grad():
        moved = sequence_elbo(model_logits_fn(old), ids, other, tokenizer.mask_token_id, am)
    assert not torch.equal(moved, old_elbo)


def test_mean_field_ratio_is_one_with_shared_prompt_masks(model, tokenizer):
    ids, am = _batch(tokenizer, length=6, rows=2)
    prompt_len = ids.shape[1] - 6
    pm = draw_prompt_masks(am[:, :prompt_len], 0.5, torch.Generator().manual_seed(1))
    a = mean_field_logprobs(model_logits_fn(model), ids, 6, tokenizer.mask_token_id, pm, am)
    b = mean_field_logprobs(model_logits_fn(copy.deepcopy(model)), ids, 6, tokenizer.mask_token_id, pm, am)
    assert a.shape == (2, 6) and torch.equal(a.detach(), b.detach())


# --- exactness ------------------------------------------------------------------------------------

def _estimator_expectation(fn, ids, length, coupled, am=None):
    """E over l ~ U{0..L} and uniform subsets of size l of the estimator, by enumeration."""
    batch = ids.shape[0]
    total = torch.zeros(batch, dtype=torch.float64)
    for l in range(length + 1):
        subsets = list(itertools.combinations(range(length), l))
        masks = torch.zeros((batch, len(subsets), length), dtype=torch.bool)
        for s, subset in enumerate(subsets):
            masks[:, s, list(subset)] = True
        total += sequence_elbo(fn, ids, masks, MASK, am, coupled=coupled).double().detach() / (length + 1)
    return total


@pytest.mark.parametrize("coupled", [False, True])
def test_elbo_is_exact_on_a_factorised_model(coupled):
    """For a model whose conditionals ignore the context, log p(y) = sum_i log p_i(y_i) exactly, and the
    ELBO equals it; the estimator's expectation (enumerated) must too."""
    length = 5
    table = torch.randn(length, 12, generator=torch.Generator().manual_seed(0))
    ids = torch.cat([torch.tensor([[7, 8]]), torch.tensor([[1, 3, 0, 11, 5]])], dim=1)
    truth = torch.log_softmax(table.double(), -1)[torch.arange(length), ids[0, 2:]].sum()
    fn = _table_fn(table)
    assert _estimator_expectation(fn, ids, length, coupled).item() == pytest.approx(truth.item(), abs=1e-5)
    assert exact_elbo(fn, ids, length, MASK).item() == pytest.approx(truth.item(), abs=1e-5)


def test_estimator_is_unbiased_for_any_order_autoregressive_likelihood(model, tokenizer):
    """On a context-dependent model, the ELBO is the any-order AR log-likelihood averaged over orders
    (computed here independently, by enumerating all L! orders); the estimator's enumerated
    expectation, coupled or not, equals it."""
    length = 4
    ids, am = _batch(tokenizer, length=length, rows=2)
    fn = model_logits_fn(model)
    mask = tokenizer.mask_token_id
    start = ids.shape[1] - length
    orders = list(itertools.permutations(range(length)))
    n = len(orders)
    big_ids, big_am = ids.repeat(n, 1), am.repeat(n, 1)  # row = order * 2 + sample
    positions = torch.tensor(orders).repeat_interleave(2, dim=0) + start  # [n*2, L]
    rows = torch.arange(2 * n)
    canvas = big_ids.clone()
    canvas[:, start:] = mask
    total = torch.zeros(2 * n, dtype=torch.float64)
    with torch.no_grad():
        for k in range(length):  # reveal tokens one at a time, in each row's order
            pos = positions[:, k]
            logp = torch.log_softmax(fn(canvas, big_am, None)[rows, pos].double(), -1)
            total += logp[rows, big_ids[rows, pos]]
            canvas[rows, pos] = big_ids[rows, pos]
    truth = total.view(n, 2).mean(0)

    for coupled in (False, True):
        est = torch.zeros(2, dtype=torch.float64)
        for l in range(length + 1):
            subsets = list(itertools.combinations(range(length), l))
            masks = torch.zeros((2, len(subsets), length), dtype=torch.bool)
            for s, subset in enumerate(subsets):
                masks[:, s, list(subset)] = True
            with torch.no_grad():
                est += sequence_elbo(fn, ids, masks, mask, am, coupled=coupled).double() / (length + 1)
        assert torch.allclose(est, truth, atol=1e-4), (coupled, est, truth)
    with torch.no_grad():
        assert torch.allclose(exact_elbo(fn, ids, length, mask, am), truth, atol=1e-4)
    assert (truth < 0).all()


# --- variance -------------------------------------------------------------------------------------

def test_variance_falls_with_mc_samples(model, tokenizer):
    length, draws = 8, 160
    ids, am = _batch(tokenizer, length=length, rows=1, seed=2)
    ids, am = ids.expand(draws, -1).contiguous(), am.expand(draws, -1).contiguous()
    fn = model_logits_fn(model)

    def var(num_mc, coupled, seed):
        masks = draw_elbo_masks(draws, length, num_mc, torch.Generator().manual_seed(seed), stratify="none")
        with torch.no_grad():
            return sequence_elbo(fn, ids, masks, tokenizer.mask_token_id, am, coupled=coupled).var().item()

    assert var(4, False, 1) < 0.5 * var(1, False, 0)
    assert var(4, True, 3) < 0.5 * var(1, True, 2)


def test_variance_falls_with_coupling():
    """Tokens of very different log-likelihood: uncoupled passes score a random subset, the coupled pair
    scores every token exactly once, so only the weights vary."""
    length, draws = 8, 400
    table = torch.randn(length, 12, generator=torch.Generator().manual_seed(1)) * 4
    # seeded: the global RNG's state depends on which tests ran before on this worker
    tokens = torch.randint(0, 12, (1, length), generator=torch.Generator().manual_seed(2))
    ids = torch.cat([torch.tensor([[7, 8]]), tokens], dim=1).expand(draws, -1)
    fn = _table_fn(table)

    def var(num_mc, coupled, seed):
        masks = draw_elbo_masks(draws, length, num_mc, torch.Generator().manual_seed(seed), stratify="none")
        return sequence_elbo(fn, ids, masks, MASK, coupled=coupled).var().item()

    assert var(1, True, 0) < 0.5 * var(1, False, 1)
    assert var(2, True, 2) < 0.5 * var(2, False, 3)


def test_elbo_terms_cover_every_token_once_when_coupled(tokenizer):
    length = 6
    table = torch.zeros(length, 12)  # uniform: every log-prob is -log 12
    ids = torch.cat([torch.tensor([[7, 8, 9]]), torch.randint(0, 12, (1, length))], dim=1)
    masks = draw_elbo_masks(1, length, 1, torch.Generator().manual_seed(5))
    terms = elbo_terms(_table_fn(table), ids, masks, MASK, coupled=True)
    l = masks.sum().item()
    w1 = (length + 1) / l if l else 0.0
    w2 = (length + 1) / (length - l) if l < length else 0.0
    expected = torch.where(masks[0, 0], torch.tensor(w1), torch.tensor(w2)) * (-math.log(12)) / 2
    assert torch.allclose(terms[0], expected.float(), atol=1e-6)


def test_mean_field_masks_completion_and_chosen_prompt_tokens(tokenizer):
    seen = {}
    length = 4

    def spy(ids, am, keep):
        seen["ids"] = ids.clone()
        return torch.zeros(ids.shape[0], keep.numel(), 20)

    ids = torch.tensor([[1, 9, 10, 11, 12, 13, 14]])
    pm = torch.tensor([[[False, True, False]]])
    out = mean_field_logprobs(spy, ids, length, MASK, pm)
    assert torch.equal(seen["ids"], torch.tensor([[1, MASK, 10, MASK, MASK, MASK, MASK]]))
    assert torch.allclose(out, torch.full((1, length), -math.log(20)))
