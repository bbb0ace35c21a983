"""Hand-computed checks of the pure RL math in posttrain.algos.core."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posttrain.algos.core import (
    ADVANTAGES,
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate_loss,
    clipped_surrogate,
    group_advantages,
    kl_estimate,
    masked_mean,
    masked_sum,
    pass_at_k,
    rewards_to_tensor,
    sft_loss,
)

REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # two groups of 4


def close(actual: torch.Tensor, expected: list[float] | float) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-5, rtol=1e-5)


# --- advantages ------------------------------------------------------------------------------------

def test_registry_holds_the_three_estimators() -> None:
    assert ADVANTAGES.names() == ["dr_grpo", "grpo", "rloo"]


def test_grpo_uses_unbiased_std() -> None:
    # group 1: mean 0.5, deviations +-0.5, sum of squares 1, unbiased var 1/3, std 0.577350
    # -> +-0.5 / (0.577350 + 1e-4) = +-0.865875 ; group 2: all equal -> 0
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    close(group_advantages(REWARDS, 4, "grpo"), [a, -a, -a, a, 0, 0, 0, 0])


def test_rloo_leave_one_out() -> None:
    # r=1: 1 - (0+0+1)/3 = 2/3 ; r=0: 0 - (1+0+1)/3 = -2/3 ; group 2: 1 - 3/3 = 0
    t = 2 / 3
    close(group_advantages(REWARDS, 4, "rloo"), [t, -t, -t, t, 0, 0, 0, 0])


def test_dr_grpo_centres_without_scaling() -> None:
    # r - 0.5 in group 1, r - 1 in group 2
    close(group_advantages(REWARDS, 4, "dr_grpo"), [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "dr_grpo"])
def test_equal_rewards_give_exact_zero_even_with_rounding(estimator: str) -> None:
    # 0.1 is not exact in float32: the group mean can differ from 0.1 by an ulp; with eps = 0 that
    # residue would be blown up by GRPO's division, so equal groups are zeroed explicitly.
    rewards = torch.full((6,), 0.1)
    assert torch.equal(group_advantages(rewards, 3, estimator, eps=0.0), torch.zeros(6))


def test_rewards_to_tensor_marks_none() -> None:
    rewards, valid = rewards_to_tensor([1, None, 0.5])
    assert torch.isnan(rewards[1]) and rewards.dtype == torch.float32
    assert valid.tolist() == [True, False, True]
    with pytest.raises(ValueError, match=r"rewards\[0\]"):
        rewards_to_tensor([math.inf])


def test_missing_rewards_are_ignored_by_statistics() -> None:
    rewards, valid = rewards_to_tensor([1, None, 0, 0.5, None, None, 2, None])
    # group 1 valid [1, 0, 0.5]: mean 0.5, deviations [0.5, -0.5, 0], unbiased var 0.5/2 = 0.25, std 0.5
    close(group_advantages(rewards, 4, "grpo", valid, eps=0.0), [1, 0, -1, 0, 0, 0, 0, 0])
    # rloo: 1 - (0+0.5)/2 = 0.75 ; 0 - (1+0.5)/2 = -0.75 ; 0.5 - (1+0)/2 = 0 ; group 2 has one valid -> 0
    close(group_advantages(rewards, 4, "rloo", valid), [0.75, 0, -0.75, 0, 0, 0, 0, 0])
    # dr_grpo: r - 0.5 ; lone valid sample: 2 - 2 = 0
    close(group_advantages(rewards, 4, "dr_grpo", valid), [0.5, 0, -0.5, 0, 0, 0, 0, 0])


def test_group_advantages_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="estimator"):
        group_advantages(REWARDS, 4, "ppo")
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(REWARDS, 3, "grpo")
    with pytest.raises(ValueError, match="float"):
        group_advantages(torch.tensor([1, 0]), 2, "grpo")
    with pytest.raises(ValueError, match="not finite"):
        group_advantages(torch.tensor([1.0, math.nan]), 2, "grpo")
    with pytest.raises(ValueError, match="valid"):
        group_advantages(REWARDS, 4, "grpo", valid=torch.ones(4, dtype=torch.bool))


# --- clipped surrogate -----------------------------------------------------------------------------

def surrogate(ratio: float, advantage: float) -> tuple[float, bool]:
    logp = torch.tensor([[math.log(ratio)]])
    loss, clipped, r = clipped_surrogate(logp, torch.zeros(1, 1), torch.tensor([advantage]), 0.2, 0.28)
    close(r, [[ratio]])
    return loss.item(), bool(clipped.item())


@pytest.mark.parametrize(
    ("ratio", "advantage", "loss", "clipped"),
    [
        (1.5, 2.0, -1.28 * 2.0, True),  # A > 0, ratio above 1 + 0.28: capped at 1.28, no gradient
        (1.2, 2.0, -1.2 * 2.0, False),  # A > 0, inside the clip-higher range
        (0.5, 2.0, -0.5 * 2.0, False),  # A > 0, ratio below 0.8: min picks the unclipped (worse) term
        (0.5, -2.0, 0.8 * 2.0, True),  # A < 0, ratio below 1 - 0.2: floored at 0.8, no gradient
        (1.5, -2.0, 1.5 * 2.0, False),  # A < 0, ratio above 1.28: unclipped (pessimistic) term
        (1.5, 0.0, 0.0, False),  # A = 0: nothing is clipped
    ],
)
def test_clipped_surrogate_both_sides(ratio: float, advantage: float, loss: float, clipped: bool) -> None:
    got_loss, got_clipped = surrogate(ratio, advantage)
    assert got_loss == pytest.approx(loss, rel=1e-5)
    assert got_clipped is clipped


def test_clipped_surrogate_broadcasts_sequence_advantages_and_gradient() -> None:
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, clipped, _ = clipped_surrogate(logp, torch.zeros(2, 3), torch.tensor([1.0, -2.0]), 0.2, 0.2)
    close(loss.detach(), [[-1.0] * 3, [2.0] * 3])  # ratio 1: loss = -A on every token
    loss.sum().backward()
    close(logp.grad, [[-1.0] * 3, [2.0] * 3])  # d(-ratio * A)/dlogp = -A at ratio 1
    assert not clipped.any()
    with pytest.raises(ValueError, match="advantages"):
        clipped_surrogate(logp, logp, torch.zeros(3), 0.2, 0.2)
    with pytest.raises(ValueError, match="clip_low"):
        clipped_surrogate(logp, logp, torch.zeros(2), 1.0, 0.2)


# --- aggregation -----------------------------------------------------------------------------------

LOSS = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 9.0, 9.0, 9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)  # ragged + one empty


def test_token_mean() -> None:
    # kept tokens 1, 2, 3, 5 -> 11 / 4
    close(aggregate_loss(LOSS, MASK, "token-mean"), 11 / 4)


def test_seq_mean_skips_empty_sequences() -> None:
    # sequence means 6/3 = 2 and 5/1 = 5; the empty third sequence has no mean -> (2 + 5) / 2
    close(aggregate_loss(LOSS, MASK, "seq-mean"), 3.5)


def test_constant_normaliser() -> None:
    # 11 / (B=3 * constant=4)
    close(aggregate_loss(LOSS, MASK, "constant", constant=4), 11 / 12)
    with pytest.raises(ValueError, match="constant"):
        aggregate_loss(LOSS, MASK, "constant")


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_empty_mask_gives_zero_not_nan(mode: str) -> None:
    nan_loss = torch.full((2, 3), math.nan)  # masked-out NaN must not leak either
    assert aggregate_loss(nan_loss, torch.zeros(2, 3, dtype=torch.bool), mode, constant=3).item() == 0.0


def test_aggregate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="mode"):
        aggregate_loss(LOSS, MASK, "sum")
    with pytest.raises(ValueError, match="mask"):
        aggregate_loss(LOSS, MASK[:, :2], "token-mean")


def test_masked_reductions() -> None:
    x = torch.tensor([[1.0, math.nan], [3.0, 4.0]])
    mask = torch.tensor([[True, False], [True, True]])
    close(masked_sum(x, mask), 8.0)
    close(masked_mean(x, mask), 8 / 3)
    close(masked_mean(x, mask, dim=1), [1.0, 3.5])
    close(masked_mean(x, mask, dim=0), [2.0, 4.0])


def test_sft_loss_is_mean_nll_over_masked_tokens() -> None:
    logp = torch.tensor([[-1.0, -2.0], [-3.0, -100.0]])
    # (1 + 2 + 3) / 3
    close(sft_loss(logp, torch.tensor([[1, 1], [1, 0]])), 2.0)


# --- KL estimators ---------------------------------------------------------------------------------

def test_kl_estimators_on_chosen_values() -> None:
    logp = torch.tensor([0.0, -1.0, math.log(2.0)])
    ref = torch.tensor([0.0, 0.0, 0.0])
    # log r = ref - logp = [0, 1, -ln 2]
    close(kl_estimate(logp, ref, "k1"), [0.0, -1.0, math.log(2)])
    close(kl_estimate(logp, ref, "k2"), [0.0, 0.5, 0.5 * math.log(2) ** 2])
    # k3 = (r - 1) - log r: [0, e - 2, (0.5 - 1) + ln 2]
    close(kl_estimate(logp, ref, "k3"), [0.0, math.e - 2, -0.5 + math.log(2)])
    assert KL_ESTIMATORS == ("k1", "k2", "k3")
    with pytest.raises(ValueError, match="kind"):
        kl_estimate(logp, ref, "k4")


def test_kl_estimators_unbiasedness_on_a_known_pair() -> None:
    # pi = [0.5, 0.5], ref = [0.25, 0.75]: KL = 0.5 ln 2 + 0.5 ln(2/3); E_pi[k1] = E_pi[k3] = KL exactly
    pi, ref = torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75])
    kl = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    for kind in ("k1", "k3"):
        close((pi * kl_estimate(pi.log(), ref.log(), kind)).sum(), kl)


@given(
    st.floats(-30, 30, allow_nan=False),
    st.floats(-30, 30, allow_nan=False),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_k3_is_never_negative(logp: float, ref_logp: float, dtype: torch.dtype) -> None:
    value = kl_estimate(torch.tensor(logp, dtype=dtype), torch.tensor(ref_logp, dtype=dtype), "k3")
    assert value.item() >= 0.0


# --- pass@k ----------------------------------------------------------------------------------------

def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    draws = list(itertools.combinations(range(n), k))  # samples 0..c-1 are the correct ones
    return sum(any(i < c for i in d) for d in draws) / len(draws)


@pytest.mark.parametrize(("n", "c", "k"), sorted({(n, c, k) for n in (1, 4, 7) for c in range(n + 1)
                                                  for k in (1, 2, n) if k <= n}))
def test_pass_at_k_matches_enumeration(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_hand_values_and_errors() -> None:
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c / n
    with pytest.raises(ValueError, match="k"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="num_correct"):
        pass_at_k(4, 5, 1)
