"""Hand-computed checks of the one policy loss (``posttrain.algos.policy_loss``): the ratio is against pi_prox, the
behaviour weight min(pi_prox / pi_sampler, C) multiplies the surrogate before the KL is added, the mismatch is
pi_prox's, and each option (dual-clip, sequence ratio, sequence-level weights, KL clamp, aggregation, skip)
changes the numbers as its paper or peer says."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.policy_loss import PolicyLossOptions, PolicyTokens, behaviour_weights, policy_loss

# pi_theta p = 0.55, 0.3; pi_prox 0.5, 0.5; pi_sampler 0.25, 0.5; reference 0.55, 0.6; advantage +1.
# ratio pi_theta / pi_prox = 1.1, 0.6 (clip 0.2: token 1's clipped branch -0.8 is not the max, so no clipping);
# TIS weight pi_prox / pi_sampler = 2, 1, truncated at C = 1.5 to 1.5, 1.
THETA = [math.log(0.55), math.log(0.3)]
PROX = torch.tensor([[math.log(0.5), math.log(0.5)]])
SAMPLER = torch.tensor([[math.log(0.25), math.log(0.5)]])
REF = torch.tensor([[math.log(0.55), math.log(0.6)]])
SURROGATE = PolicyLossOptions(clip_low=0.2, clip_high=0.2)
TIS = PolicyLossOptions(clip_low=0.2, clip_high=0.2, tis_cap=1.5)
TIS_KL = PolicyLossOptions(clip_low=0.2, clip_high=0.2, tis_cap=1.5, kl_coef=0.1, kl_estimator="k1")


def _tokens(sampler: torch.Tensor | None = SAMPLER, advantage: float = 1.0, theta: list[float] = THETA,
            ref: torch.Tensor | None = REF) -> PolicyTokens:
    logp = torch.tensor([theta], requires_grad=True)
    return PolicyTokens(logp, PROX, torch.tensor([advantage]), torch.ones(1, 2), sampling_logp=sampler, ref_logp=ref)


def close(actual: torch.Tensor | float, expected: list[list[float]] | list[float] | float) -> None:
    actual = torch.as_tensor(actual, dtype=torch.float32)
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=1e-6)


def test_surrogate_alone_is_the_ratio_against_the_proximal_policy() -> None:
    result = policy_loss(_tokens(), SURROGATE)
    close(result.per_token.detach(), [[-1.1, -0.6]])
    close(result.loss.detach(), -0.85)  # token-mean
    close(result.metrics["ratio_mean"], 0.85)
    close(result.metrics["clip_fraction"], 0.0)
    assert not result.skip and "skipped_batch" not in result.metrics


def test_tis_weights_the_surrogate_and_its_gradient() -> None:
    tokens = _tokens()
    result = policy_loss(tokens, TIS)
    close(result.per_token.detach(), [[-1.65, -0.6]])
    result.per_token.sum().backward()
    close(tokens.logp.grad, [[-1.65, -0.6]])  # d(-w r A) / d log pi_theta = -w r A
    close(result.metrics["rollout/tis_weight_mean"], 1.25)
    close(result.metrics["rollout/tis_truncated_fraction"], 0.5)


def test_kl_is_added_after_the_weighting() -> None:
    # k1 = log pi_theta - log ref = 0, log 0.5; beta 0.1 adds 0, -0.0693147, not weighted by TIS
    result = policy_loss(_tokens(), TIS_KL)
    close(result.per_token.detach(), [[-1.65, -0.6 + 0.1 * math.log(0.5)]])
    close(result.metrics["kl"], math.log(0.5) / 2)


def test_mismatch_is_measured_between_proximal_and_sampler() -> None:
    # |log 0.5 - log 0.25| = log 2 and 0; k3 of log r = log 2: (2 - 1) - log 2
    metrics = policy_loss(_tokens(), SURROGATE).metrics
    close(metrics["rollout/logprob_abs_diff"], math.log(2) / 2)
    close(metrics["rollout/logprob_kl"], (1 - math.log(2)) / 2)


def test_a_sampler_equal_to_the_proximal_policy_leaves_the_loss_unchanged() -> None:
    plain = policy_loss(_tokens(PROX), SURROGATE)
    weighted = policy_loss(_tokens(PROX), TIS)
    close(weighted.per_token.detach(), plain.per_token.detach().tolist())
    close(weighted.metrics["rollout/tis_weight_mean"], 1.0)


def test_missing_inputs_and_bad_options_fail_by_name() -> None:
    with pytest.raises(ValueError, match="sampling_logp"):
        policy_loss(_tokens(None), TIS)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(_tokens(ref=None), TIS_KL)
    for field, value in [("dual_clip", 0.5), ("is_level", "batch"), ("aggregation", "sum"), ("kl_clamp", -1.0),
                         ("ratio_level", "step"), ("clip_low", 1.0)]:
        with pytest.raises(ValueError, match=f"policy loss option {field} = "):
            PolicyLossOptions(**{field: value})
    PolicyLossOptions(kl_estimator="full")  # not read without a KL term (PPO folds its full KL into the rewards)
    with pytest.raises(ValueError, match="kl_estimator"):
        PolicyLossOptions(kl_coef=0.1, kl_estimator="full")


# --- behaviour weights -----------------------------------------------------------------------------

# trainer p = 0.5, 0.2, 0.9 against sampler p = 0.25, 0.4, 0.3: ratios 2, 0.5, 3 (product 3)
TRAINER3 = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.9)]])
SAMPLER3 = torch.tensor([[math.log(0.25), math.log(0.4), math.log(0.3)]])


def _weights(cap: float, level: str = "token", mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = PolicyTokens(TRAINER3.clone().requires_grad_(True), TRAINER3, torch.ones(1),
                          torch.ones(1, 3) if mask is None else mask, sampling_logp=SAMPLER3)
    return behaviour_weights(tokens, PolicyLossOptions(tis_cap=cap, is_level=level))


@pytest.mark.parametrize(("cap", "expected"), [(2.0, [[2.0, 0.5, 2.0]]), (2.5, [[2.0, 0.5, 2.5]]),
                                               (10.0, [[2.0, 0.5, 3.0]]), (0.4, [[0.4, 0.4, 0.4]])])
def test_token_weights_are_ratios_truncated_at_the_cap(cap: float, expected: list[list[float]]) -> None:
    weights, _ = _weights(cap)
    close(weights, expected)
    assert not weights.requires_grad


def test_sequence_weights_take_the_product_of_the_token_ratios() -> None:
    weights, truncated = _weights(2.5, "sequence")  # 2 x 0.5 x 3 = 3, truncated at 2.5 on every token
    close(weights, [[2.5, 2.5, 2.5]])
    assert truncated.all()
    close(_weights(10.0, "sequence")[0], [[3.0, 3.0, 3.0]])
    # the masked-out third token is not in the product: 2 x 0.5 = 1
    close(_weights(2.5, "sequence", torch.tensor([[1.0, 1.0, 0.0]]))[0], [[1.0, 1.0, 1.0]])


def test_sequence_mask_drops_a_sequence_above_the_cap() -> None:
    close(_weights(2.5, "sequence-mask")[0], [[0.0, 0.0, 0.0]])  # product 3 > 2.5: dropped, not truncated
    close(_weights(3.5, "sequence-mask")[0], [[3.0, 3.0, 3.0]])


def test_weights_of_a_bad_shape_fail() -> None:
    tokens = PolicyTokens(TRAINER3, TRAINER3, torch.ones(1), torch.ones(1, 3), sampling_logp=SAMPLER3[:, :2])
    with pytest.raises(ValueError, match="differ in shape"):
        behaviour_weights(tokens, PolicyLossOptions(tis_cap=2.0))


# --- the options -----------------------------------------------------------------------------------

def test_dual_clip_bounds_a_negative_advantage_token_at_c_times_its_advantage() -> None:
    # A = -1; pi_theta 2.0 and 1.05 against pi_prox 0.5: ratios 4 and 2.1 (log-probs may exceed 0 here: only the
    # ratio matters). The clipped surrogate is max(-rA, -clip(r)A) = 4 and 2.1; dual-clip c = 3 caps it at 3.
    theta = [math.log(2.0), math.log(1.05)]
    plain = policy_loss(_tokens(None, advantage=-1.0, theta=theta), SURROGATE)
    close(plain.per_token.detach(), [[4.0, 2.1]])
    tokens = _tokens(None, advantage=-1.0, theta=theta)
    dual = policy_loss(tokens, PolicyLossOptions(dual_clip=3.0))
    close(dual.per_token.detach(), [[3.0, 2.1]])
    close(dual.metrics["dual_clip_fraction"], 0.5)
    dual.per_token.sum().backward()
    close(tokens.logp.grad, [[0.0, 2.1]])  # the bound c |A| carries no gradient; -rA's gradient is -rA = 2.1
    # a positive advantage is never dual-clipped
    close(policy_loss(_tokens(None, advantage=1.0, theta=theta), PolicyLossOptions(dual_clip=3.0)).per_token.detach(),
          [[-1.2, -1.2]])


def test_sequence_ratio_is_the_exp_of_the_mean_log_ratio_with_token_gradients() -> None:
    # log ratios log 1.1 and log 0.6: sequence ratio sqrt(1.1 x 0.6) = 0.812404, inside [0.8, 1.2]: unclipped
    tokens = _tokens(None)
    result = policy_loss(tokens, PolicyLossOptions(ratio_level="sequence"))
    s = math.sqrt(1.1 * 0.6)
    close(result.per_token.detach(), [[-s, -s]])
    close(result.metrics["ratio_mean"], s)
    result.per_token.sum().backward()
    close(tokens.logp.grad, [[-s, -s]])  # GSPO-token: d(-s A)/d log pi_t = -s A for each token


def test_kl_clamp_bounds_the_estimate_and_its_gradient() -> None:
    # k3 at log r = ref - logp = 15 is e^15 - 16, far past float32 comfort; clamped at 10 it is 10, no gradient
    logp = torch.tensor([[0.0, 0.0]], requires_grad=True)
    ref = torch.tensor([[15.0, 0.5]])
    tokens = PolicyTokens(logp, torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), ref_logp=ref)
    result = policy_loss(tokens, PolicyLossOptions(kl_coef=1.0, kl_estimator="k3", kl_clamp=10.0))
    close(result.per_token.detach(), [[10.0, math.expm1(0.5) - 0.5]])
    result.per_token.sum().backward()
    close(logp.grad, [[0.0, -(math.exp(0.5) - 1)]])  # d k3 / d logp = -(e^x - 1), x = ref - logp


def test_k1_gradient_correction_gives_the_score_function_gradient() -> None:
    # ESPO's k1: value logp - ref; gradient (1 + logp - ref) instead of 1
    logp = torch.tensor([[-1.0]], requires_grad=True)
    tokens = PolicyTokens(logp, torch.tensor([[-1.0]]), torch.zeros(1), torch.ones(1, 1), ref_logp=torch.tensor([[-1.5]]))
    result = policy_loss(tokens, PolicyLossOptions(kl_coef=1.0, kl_estimator="k1", k1_gradient_correction=True))
    close(result.per_token.detach(), [[0.5]])
    result.per_token.sum().backward()
    close(logp.grad, [[1.5]])


def test_scale_divides_the_ratio_and_the_kl_as_espo_does() -> None:
    # ESPO's sequence action: E = -4, E_old = -6, L = 4: rho = exp(2 / 4); k2 on E against ref -8: 0.5 x 16 / 4 = 2
    tokens = PolicyTokens(torch.tensor([[-4.0]]), torch.tensor([[-6.0]]), torch.tensor([1.0]), torch.ones(1, 1),
                          ref_logp=torch.tensor([[-8.0]]), scale=4.0)
    result = policy_loss(tokens, PolicyLossOptions(clip_low=0.2, clip_high=1.0, kl_coef=0.5, kl_estimator="k2"))
    close(result.metrics["ratio_mean"], math.exp(0.5))
    close(result.metrics["kl"], 2.0)
    close(result.loss, -math.exp(0.5) + 0.5 * 2.0)


@pytest.mark.parametrize(("aggregation", "expected"), [
    ("token-mean", (1 + 2 + 3) / 3),
    ("seq-mean", (1.5 + 3) / 2),
    ("seq-mean-token-sum", (3 + 3) / 2),
    ("constant", 6 / (2 * 4)),
])
def test_aggregations_of_a_ragged_batch(aggregation: str, expected: float) -> None:
    # ratio 1 and A = -1 give a loss of 1 per token; advantages -1, -2, -3 over tokens make the losses 1, 2 | 3
    advantages = torch.tensor([[-1.0, -2.0], [-3.0, 0.0]])
    tokens = PolicyTokens(torch.zeros(2, 2), torch.zeros(2, 2), advantages, torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    result = policy_loss(tokens, PolicyLossOptions(aggregation=aggregation, aggregation_constant=4.0))
    close(result.loss, expected)


def test_a_batch_whose_mean_ratio_passes_the_threshold_is_skipped() -> None:
    assert policy_loss(_tokens(), PolicyLossOptions(skip_ratio=0.8)).skip  # mean ratio 0.85
    kept = policy_loss(_tokens(), PolicyLossOptions(skip_ratio=0.9))
    assert not kept.skip and kept.metrics["skipped_batch"] == 0.0


def test_a_non_finite_sampler_log_prob_gets_weight_one_and_is_counted() -> None:
    sampler = torch.tensor([[math.nan, math.log(0.5)]])
    result = policy_loss(_tokens(sampler), TIS)
    close(result.per_token.detach(), [[-1.1, -0.6]])  # weight 1 on the NaN token, 1 on the honest one
    assert result.metrics["rollout/nonfinite_sampler_logprobs"] == 1.0
    assert policy_loss(_tokens(), TIS).metrics["rollout/nonfinite_sampler_logprobs"] == 0.0
