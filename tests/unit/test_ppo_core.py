"""PPO's pure math (``posttrain.algos.ppo.core``) against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.ppo.core import (
    AdaptiveKLController,
    clipped_value_loss,
    full_kl,
    gae,
    gae_recursion,
    last_token_index,
    token_rewards,
    whiten,
)


def test_gae_by_hand() -> None:
    # gamma 1, lambda 0.5: deltas 0.1, 0.1, 0.3 (V after the last token is 0); A2 = 0.3, A1 = 0.1 + 0.5 * 0.3,
    # A0 = 0.1 + 0.5 * 0.25. Row 2 has one real token: A0 = 2 - 0.5, and its padding stays 0 (values 9 ignored).
    rewards = torch.tensor([[0.0, 0.0, 1.0], [2.0, 5.0, 5.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [0.5, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    advantages, returns = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert torch.allclose(advantages, torch.tensor([[0.225, 0.25, 0.3], [1.5, 0.0, 0.0]]))
    assert torch.allclose(returns, torch.tensor([[0.725, 0.85, 1.0], [2.0, 0.0, 0.0]]))


def test_gae_recursion_by_hand() -> None:
    # gamma 0.5, lambda 0.5 (gamma * lambda 0.25). Row 1 ends at its last step (done), so the bootstrap 10 is
    # ignored: A2 = 2 - 0; A1 = (0 + 0.5 * 0 - 1) + 0.25 * 2 = -0.5; A0 = (1 + 0.5 * 1 - 0.5) + 0.25 * -0.5 = 0.875.
    # Row 2 runs on (no done): A2 = 1 + 0.5 * 4 - 1 = 2, A1 = (0 + 0.5 * 1 - 0) + 0.25 * 2 = 1; its done at step 0 cuts
    # the recursion there: A0 = 3 - 2 = 1.
    rewards = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 1.0, 0.0], [2.0, 0.0, 1.0]])
    dones = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    advantages = gae_recursion(rewards, values, dones, torch.tensor([10.0, 4.0]), gamma=0.5, lam=0.5)
    assert torch.allclose(advantages, torch.tensor([[0.875, -0.5, 2.0], [1.0, 1.0, 2.0]]))


def test_gae_discount() -> None:
    # gamma 0.9, lambda 1, zero values: A1 = 2, A0 = 1 + 0.9 * 2 (the discounted return).
    advantages, returns = gae(torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2), torch.ones(1, 2), gamma=0.9, lam=1.0)
    assert torch.allclose(advantages, torch.tensor([[2.8, 2.0]]))
    assert torch.allclose(returns, advantages)
    with pytest.raises(ValueError, match="gamma and lam"):
        gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), gamma=1.5, lam=0.9)
    with pytest.raises(ValueError, match="one shape"):
        gae(torch.zeros(1, 2), torch.zeros(1, 3), torch.ones(1, 2), gamma=1.0, lam=0.9)


def test_whiten_over_the_mask() -> None:
    # mean 2 and unbiased variance 1 over the three kept entries; the padded 100 takes no part and stays 0.
    x = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert torch.allclose(whiten(x, mask), torch.tensor([[-1.0, 0.0], [1.0, 0.0]]), atol=1e-6)
    assert torch.allclose(whiten(x, mask, shift_mean=False), torch.tensor([[1.0, 2.0], [3.0, 0.0]]), atol=1e-6)
    assert torch.equal(whiten(torch.zeros(2, 2), mask), torch.zeros(2, 2))  # no spread: zeros, not NaN


def test_clipped_value_loss_by_hand() -> None:
    values, old, returns = torch.tensor([1.0, 0.6]), torch.tensor([0.5, 0.5]), torch.tensor([2.0, 0.0])
    loss, clipped = clipped_value_loss(values, old, returns, clip=0.2)
    # first: V moved 0.5 past the clip, V_clip = 0.7, 0.5 * max(1, 1.69); second: inside the range, 0.5 * 0.36
    assert torch.allclose(loss, torch.tensor([0.845, 0.18]))
    assert clipped.tolist() == [True, False]
    plain, none_clipped = clipped_value_loss(values, old, returns, clip=0.0)
    assert torch.allclose(plain, torch.tensor([0.5, 0.18])) and not none_clipped.any()


def test_token_rewards_fold_kl_and_terminal() -> None:
    dense = torch.tensor([[0.5, -1.0, 0.0], [0.0, 0.0, 0.0]])
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.4, 0.4]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    rewards = token_rewards(dense, kl, 0.5, mask, terminal=torch.tensor([2.0, 7.0]))
    # row 1: 0.5 - 0.05, then -1 - 0.1 + 2 on its last real token; row 2 has no token: all 0 (terminal dropped)
    assert torch.allclose(rewards, torch.tensor([[0.45, 0.9, 0.0], [0.0, 0.0, 0.0]]))
    assert torch.allclose(token_rewards(dense, kl, 0.0, mask), torch.tensor([[0.5, -1.0, 0.0], [0.0, 0.0, 0.0]]))
    assert last_token_index(torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]])).tolist() == [1, -1, 2]


def test_full_kl_by_hand() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)]])  # p = (1/4, 3/4)
    ref = torch.zeros(1, 2)  # q = (1/2, 1/2)
    expected = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    assert full_kl(logits, ref).item() == pytest.approx(expected, abs=1e-6)
    assert full_kl(logits, logits).item() == 0.0


def test_adaptive_kl_controller() -> None:
    controller = AdaptiveKLController(0.1, target=6.0, horizon=10_000)
    # KL twice the target: error clipped to 0.2, beta *= 1 + 0.2 * 100 / 10000
    assert controller.update(12.0, 100) == pytest.approx(0.1 * 1.002)
    # KL half the target: error -0.5 clipped to -0.2
    assert controller.update(3.0, 100) == pytest.approx(0.1 * 1.002 * 0.998)
    restored = AdaptiveKLController(0.5, target=6.0, horizon=10_000)
    restored.load_state_dict(controller.state_dict())
    assert restored.value == controller.value
    fixed = AdaptiveKLController(0.1, target=None, horizon=1.0)
    assert fixed.update(100.0, 10) == 0.1
    with pytest.raises(ValueError, match="target"):
        AdaptiveKLController(0.1, target=0.0, horizon=1.0)


def test_kl_controller_stops_at_its_floor() -> None:
    controller = AdaptiveKLController(0.05, target=6.0, horizon=640, floor=0.05)
    assert controller.update(60.0, 64) == pytest.approx(0.05 * 1.02)  # 0.2 x 64 / 640
    for _ in range(10):  # KL far below the target: 0.98x a step, but never below the floor
        controller.update(0.0, 64)
    assert controller.value == 0.05
    assert AdaptiveKLController(0.01, target=6.0, horizon=640, floor=0.05).floor == 0.01  # capped at beta
    with pytest.raises(ValueError, match="floor"):
        AdaptiveKLController(0.1, target=6.0, horizon=640, floor=-1.0)
