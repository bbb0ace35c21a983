"""Hand-computed checks of the composed policy loss (``posttrain.algos.policy_loss``): the ratio is against pi_prox,
TIS weights the surrogate by min(pi_prox / pi_sampler, C) before the KL term, and the mismatch is pi_prox's."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.policy_loss import PolicyLossSettings, PolicyTokens, policy_loss

# pi_theta p = 0.55, 0.3; pi_prox 0.5, 0.5; pi_sampler 0.25, 0.5; reference 0.55, 0.6; advantage +1.
# ratio pi_theta / pi_prox = 1.1, 0.6 (clip 0.2: token 1's clipped branch -0.8 is not the max, so no clipping);
# TIS weight pi_prox / pi_sampler = 2, 1, truncated at C = 1.5 to 1.5, 1.
THETA = [math.log(0.55), math.log(0.3)]
PROX = torch.tensor([[math.log(0.5), math.log(0.5)]])
SAMPLER = torch.tensor([[math.log(0.25), math.log(0.5)]])
REF = torch.tensor([[math.log(0.55), math.log(0.6)]])
SETTINGS = PolicyLossSettings(clip_low=0.2, clip_high=0.2, tis_cap=1.5, kl_coef=0.1, kl_estimator="k1")


def _tokens(sampler: torch.Tensor | None = SAMPLER) -> PolicyTokens:
    logp = torch.tensor([THETA], requires_grad=True)
    return PolicyTokens(logp, PROX, torch.tensor([1.0]), torch.ones(1, 2), sampling_logp=sampler, ref_logp=REF)


def close(actual: torch.Tensor | float, expected: list[list[float]] | float) -> None:
    actual = torch.as_tensor(actual, dtype=torch.float32)
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=1e-6)


def test_surrogate_alone_is_the_ratio_against_the_proximal_policy() -> None:
    per_token, metrics = policy_loss(("clipped_surrogate",), _tokens(), SETTINGS)
    close(per_token.detach(), [[-1.1, -0.6]])
    close(metrics["ratio_mean"], 0.85)
    close(metrics["clip_fraction"], 0.0)


def test_tis_weights_the_surrogate_and_its_gradient() -> None:
    tokens = _tokens()
    per_token, metrics = policy_loss(("clipped_surrogate", "tis"), tokens, SETTINGS)
    close(per_token.detach(), [[-1.65, -0.6]])
    per_token.sum().backward()
    close(tokens.logp.grad, [[-1.65, -0.6]])  # d(-w r A) / d log pi_theta = -w r A
    close(metrics["rollout/tis_weight_mean"], 1.25)
    close(metrics["rollout/tis_truncated_fraction"], 0.5)


def test_kl_is_added_after_the_weighting() -> None:
    # k1 = log pi_theta - log ref = 0, log 0.5; beta 0.1 adds 0, -0.0693147, not weighted by TIS
    per_token, metrics = policy_loss(("clipped_surrogate", "tis", "kl_penalty"), _tokens(), SETTINGS)
    close(per_token.detach(), [[-1.65, -0.6 + 0.1 * math.log(0.5)]])
    close(metrics["kl"], math.log(0.5) / 2)


def test_mismatch_is_measured_between_proximal_and_sampler() -> None:
    # |log 0.5 - log 0.25| = log 2 and 0; k3 of log r = log 2: (2 - 1) - log 2
    _, metrics = policy_loss(("clipped_surrogate",), _tokens(), SETTINGS)
    close(metrics["rollout/logprob_abs_diff"], math.log(2) / 2)
    close(metrics["rollout/logprob_kl"], (1 - math.log(2)) / 2)


def test_a_sampler_equal_to_the_proximal_policy_leaves_the_loss_unchanged() -> None:
    plain, _ = policy_loss(("clipped_surrogate",), _tokens(PROX), SETTINGS)
    weighted, metrics = policy_loss(("clipped_surrogate", "tis"), _tokens(PROX), SETTINGS)
    close(weighted.detach(), plain.detach().tolist())
    close(metrics["rollout/tis_weight_mean"], 1.0)


def test_missing_inputs_and_unknown_terms_fail_by_name() -> None:
    with pytest.raises(ValueError, match="sampling_logp"):
        policy_loss(("tis",), _tokens(None), SETTINGS)
    with pytest.raises(KeyError, match="policy loss term 'entropy_bonus'"):
        policy_loss(("entropy_bonus",), _tokens(), SETTINGS)
