"""The chunked token log-prob and entropy of ``posttrain.models.likelihood`` equal the plain full-vocabulary
computations (values and gradients), across chunk boundaries, temperatures, dtypes and non-contiguous views."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posttrain.models import likelihood
from posttrain.models.likelihood import entropy_from_logits, logprobs_from_logits


@pytest.fixture(params=[2**24, 2 * 17 * 5, 7 * 5], ids=["one-chunk", "two-rows-a-chunk", "position-chunks"])
def chunk_elements(request, monkeypatch) -> int:
    """Whole batch at once; two rows of 17 x 5 a chunk; 7 positions of a 5-token vocabulary a chunk."""
    monkeypatch.setattr(likelihood, "_CHUNK_ELEMENTS", request.param)
    return request.param


def test_hand_computed_value():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # softmax = (1/4, 3/4)
    assert logprobs_from_logits(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    assert logprobs_from_logits(logits, torch.tensor([[0]]), temperature=0.5).item() == pytest.approx(math.log(0.1))
    assert entropy_from_logits(logits).item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_values_and_gradients_equal_the_plain_computation(chunk_elements, temperature, dtype):
    generator = torch.Generator().manual_seed(0)
    full = (3 * torch.randn(3, 17, 5, generator=generator)).to(dtype).requires_grad_()
    targets = torch.randint(0, 5, (3, 16), generator=generator)
    weights = torch.randn(3, 16, generator=generator)

    logits = full[:, :-1]  # non-contiguous, as in causal_token_logprobs
    ours = logprobs_from_logits(logits, targets, temperature)
    (ours * weights).sum().backward()
    grad_ours, full.grad = full.grad.clone(), None

    plain = torch.gather(F.log_softmax(full[:, :-1].float() / temperature, -1), -1, targets.unsqueeze(-1)).squeeze(-1)
    (plain * weights).sum().backward()
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, plain, atol=1e-6, rtol=0)
    torch.testing.assert_close(grad_ours, full.grad, atol=1e-6 if dtype == torch.float32 else 1e-2, rtol=0)

    expected_entropy = -(F.softmax(logits.float() / temperature, -1) * F.log_softmax(logits.float() / temperature, -1)).sum(-1)
    entropy = entropy_from_logits(logits, temperature)
    assert not entropy.requires_grad
    torch.testing.assert_close(entropy, expected_entropy, atol=1e-5, rtol=0)


def test_two_dimensional_logits(chunk_elements):
    logits = torch.randn(9, 5, generator=torch.Generator().manual_seed(1))
    targets = torch.arange(9) % 5
    expected = F.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(logprobs_from_logits(logits, targets), expected)
    assert entropy_from_logits(logits).shape == (9,)
