"""Hand-computed checks of the sampler-mismatch metrics (the behaviour weights are in test_policy_loss.py)."""

from __future__ import annotations

import math

import torch

from posttrain.algos.core import sampler_mismatch


def close(actual: torch.Tensor, expected: list[float] | float) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-6, rtol=1e-6)


# trainer p = 0.5, 0.2, 0.9 against sampler p = 0.25, 0.4, 0.3: ratios 2, 0.5, 3
TRAINER = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.9)]])
SAMPLER = torch.tensor([[math.log(0.25), math.log(0.4), math.log(0.3)]])


def test_mismatch_metrics_over_masked_tokens() -> None:
    # tokens 1 and 2 (ratios 2 and 0.5): |diff| = log 2 each; k3 = (r - 1) - log r = 0.306853, 0.193147
    abs_diff, kl = sampler_mismatch(TRAINER, SAMPLER, torch.tensor([[1.0, 1.0, 0.0]]))
    close(abs_diff, math.log(2))
    close(kl, ((1 - math.log(2)) + (-0.5 + math.log(2))) / 2)  # = 0.25


def test_mismatch_is_zero_for_identical_log_probs() -> None:
    abs_diff, kl = sampler_mismatch(SAMPLER, SAMPLER, torch.ones(1, 3))
    close(abs_diff, 0.0)
    close(kl, 0.0)
