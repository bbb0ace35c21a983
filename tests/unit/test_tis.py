"""Hand-computed checks of the sampler-mismatch math: truncated importance weights and the mismatch metrics."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.core import sampler_mismatch, truncated_importance_weights


def close(actual: torch.Tensor, expected: list[float] | float) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-6, rtol=1e-6)


# trainer p = 0.5, 0.2, 0.9 against sampler p = 0.25, 0.4, 0.3: ratios 2, 0.5, 3
TRAINER = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.9)]])
SAMPLER = torch.tensor([[math.log(0.25), math.log(0.4), math.log(0.3)]])


@pytest.mark.parametrize(("cap", "expected"), [(2.0, [[2.0, 0.5, 2.0]]), (2.5, [[2.0, 0.5, 2.5]]),
                                               (10.0, [[2.0, 0.5, 3.0]]), (0.4, [[0.4, 0.4, 0.4]])])
def test_weights_are_ratios_truncated_at_the_cap(cap: float, expected: list[list[float]]) -> None:
    close(truncated_importance_weights(TRAINER, SAMPLER, cap), expected)


def test_weights_carry_no_gradient() -> None:
    old = TRAINER.clone().requires_grad_(True)
    assert not truncated_importance_weights(old, SAMPLER, 2.0).requires_grad


def test_equal_distributions_give_weight_one() -> None:
    close(truncated_importance_weights(SAMPLER, SAMPLER, 2.0), [[1.0, 1.0, 1.0]])


def test_bad_cap_and_shapes_fail() -> None:
    with pytest.raises(ValueError, match="cap must be > 0"):
        truncated_importance_weights(TRAINER, SAMPLER, 0.0)
    with pytest.raises(ValueError, match="differ in shape"):
        truncated_importance_weights(TRAINER, SAMPLER[:, :2], 2.0)


def test_mismatch_metrics_over_masked_tokens() -> None:
    # tokens 1 and 2 (ratios 2 and 0.5): |diff| = log 2 each; k3 = (r - 1) - log r = 0.306853, 0.193147
    abs_diff, kl = sampler_mismatch(TRAINER, SAMPLER, torch.tensor([[1.0, 1.0, 0.0]]))
    close(abs_diff, math.log(2))
    close(kl, ((1 - math.log(2)) + (-0.5 + math.log(2))) / 2)  # = 0.25


def test_mismatch_is_zero_for_identical_log_probs() -> None:
    abs_diff, kl = sampler_mismatch(SAMPLER, SAMPLER, torch.ones(1, 3))
    close(abs_diff, 0.0)
    close(kl, 0.0)
