"""GPO's pure loss terms against hand-computed values (posttrain/algos/gpo/core.py)."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.gpo import core as g


def t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64)


def test_categorical_kl_by_hand() -> None:
    # KL([.5,.5] || [.25,.75]) = .5 ln 2 + .5 ln(2/3) = .5 ln(4/3)
    p = torch.log(t(0.5, 0.5))[None]
    q = torch.log(t(0.25, 0.75))[None]
    assert g.categorical_kl(p, q).item() == pytest.approx(0.5 * math.log(4 / 3))
    # a zero-probability action in p contributes nothing: KL([1,0] || [.5,.5]) = ln 2
    p0 = torch.tensor([[0.0, -math.inf]], dtype=torch.float64)
    assert g.categorical_kl(p0, torch.zeros(1, 2, dtype=torch.float64)).item() == pytest.approx(math.log(2))
    assert g.categorical_kl(q, q).item() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        g.categorical_kl(p, torch.zeros(1, 3))


def test_gaussian_kl_is_averaged_over_dims() -> None:
    # KL(N(0,1) || N(1,2^2)) = ln 2 + (1 + 1) / 8 - 1/2 ; second dim identical -> 0; mean over dims
    kl = g.gaussian_kl(t(0.0, 0.0)[None], t(1.0, 1.0)[None], t(1.0, 0.0)[None], t(2.0, 1.0)[None])
    assert kl.item() == pytest.approx((math.log(2) + 0.25 - 0.5) / 2)


def test_backtrack_mask_marks_ratios_outside_inner_clip() -> None:
    ratios = t(1.1, 1.25, 0.75, 0.85, 1.0)  # mu / pi at the sampled action, delta = 0.2
    learner = torch.log(t(0.2, 0.2, 0.4, 0.4, 0.3))
    guider = learner + torch.log(ratios)
    assert g.backtrack_mask(guider, learner, 0.2).tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]


def test_guider_clip_surrogate_by_hand() -> None:
    beta = torch.log(t(0.5, 0.5, 0.5, 0.5))
    # rows: (mu/beta, pi/beta, A) = (1.5, 1, +1), (0.6, 1, -1), (1.1, 1.05, 2), (1.0, 2.0, 1)
    mu = (beta + torch.log(t(1.5, 0.6, 1.1, 1.0))).requires_grad_(True)
    pi = (beta + torch.log(t(1.0, 1.0, 1.05, 2.0))).requires_grad_(True)
    adv = t(1.0, -1.0, 2.0, 1.0)
    loss, ratio = g.guider_clip_surrogate(mu, pi, beta, adv, ppo_clip=0.3, inner_clip=0.2)
    # row 0: clip(1.5 -> 1.2) * 1 = 1.2 (inside 1 +- 0.3): -min(1.5, 1.2) = -1.2 (plain PPO would give -1.3)
    # row 1: clip(0.6 -> 0.8) * 1 = 0.8: -min(-0.6, -0.8) = 0.8
    # row 2: mu/pi = 1.0476 inside, rho_clip = 1.1: -2.2
    # row 3: clip(0.5 -> 0.8) * 2 = 1.6 -> 1.3: -min(1.0, 1.3) = -1.0
    assert loss.tolist() == pytest.approx([-1.2, 0.8, -2.2, -1.0])
    assert ratio.tolist() == pytest.approx([1.5, 0.6, 1.1, 1.0])
    loss.sum().backward()
    # d/d log mu: 0 where the clipped branch is active, -rho_mu A where the unclipped one is
    assert mu.grad.tolist() == pytest.approx([0.0, 0.0, -2.2, -1.0])
    assert pi.grad is None  # the learner is detached inside the guider's surrogate


def test_guider_clip_loss_adds_masked_kl_counted_over_all_samples() -> None:
    beta = torch.log(t(0.5, 0.5))
    mu = beta + torch.log(t(1.5, 1.0))
    pi = beta.clone()
    kl = t(0.3, 0.7)
    loss, info = g.guider_clip_loss(mu, pi, beta, t(0.0, 0.0), kl, 0.3, 0.2)
    assert info["mask"].tolist() == [1.0, 0.0]
    assert loss.tolist() == pytest.approx([0.3, 0.0])
    assert loss.mean().item() == pytest.approx(0.15)  # mean over all samples, not over masked ones


def test_learner_rl_aux_caps_log_ratio_at_10() -> None:
    beta = t(-1.0, -1.0, -1.0)
    pi = (beta + t(12.0, 12.0, math.log(0.5))).requires_grad_(True)
    loss, ratio = g.learner_rl_aux_loss(pi, beta, t(-1.0, 1.0, 1.0), ppo_clip=0.3)
    assert ratio.tolist() == pytest.approx([math.exp(10), math.exp(10), 0.5])
    # A<0: -min(-e^10, -0.7*... ) = e^10 ; A>0: -min(e^10, 1.3) = -1.3 ; pi/beta = .5: -min(.5, .7) = -.5
    assert loss.tolist() == pytest.approx([math.exp(10), -1.3, -0.5])
    loss.sum().backward()
    assert pi.grad.tolist() == pytest.approx([0.0, 0.0, -0.5])  # no gradient through the cap or the clip


def test_learner_loss_and_gradient_routing() -> None:
    guider_logits = torch.tensor([[1.0, 0.0, -1.0]], requires_grad=True)
    learner_logits = torch.tensor([[0.0, 0.0, 0.0]], requires_grad=True)
    kl_l = g.categorical_kl(guider_logits.detach(), learner_logits)
    a = torch.tensor([1]); beta = torch.log_softmax(guider_logits.detach(), -1).gather(1, a[:, None])[:, 0]
    learner_logp = torch.log_softmax(learner_logits, -1).gather(1, a[:, None])[:, 0]
    naive = g.learner_loss(kl_l, learner_logp, beta, torch.tensor([1.0]), alpha=0.0)
    assert naive.item() == pytest.approx(kl_l.item())
    full = g.learner_loss(kl_l, learner_logp, beta, torch.tensor([1.0]), alpha=2.0, ppo_clip=0.3)
    rho = math.exp(learner_logp.item() - beta.item())  # (1/3) / p_mu(1) = (1/3) / 0.2447 = 1.362
    assert rho == pytest.approx((1 / 3) * (math.e + 1 + 1 / math.e))
    assert full.item() == pytest.approx(kl_l.item() - 2.0 * 1.3)  # clipped at 1 + 0.3
    full.backward()
    assert guider_logits.grad is None  # the guider is a stop-gradient target for the learner


def test_gpo_variants_compose_the_terms() -> None:
    beta = torch.log(t(0.5, 0.5))
    mu = beta + torch.log(t(1.5, 1.0))
    pi = beta + torch.log(t(1.0, 1.2))
    adv, klg, kll = t(1.0, 1.0), t(0.3, 0.1), t(0.2, 0.4)
    c = g.GPOCoefs(ppo_clip=0.3, inner_clip=0.2, alpha=2.0)
    gl, ll, _ = g.gpo_clip_losses(mu, pi, beta, adv, klg, kll, c)
    assert gl.tolist() == pytest.approx([-1.2 + 0.3, -1.0])  # row 1: mu/pi = .833 inside (.8, 1.2)
    assert ll.tolist() == pytest.approx([0.2 - 2 * 1.0, 0.4 - 2 * 1.2])
    gp, lp, _ = g.gpo_penalty_losses(mu, pi, beta, adv, klg, kll, alpha=0.5, coefs=c)
    assert gp.tolist() == pytest.approx([-1.3 + 0.5 * 0.3, -1.0 + 0.5 * 0.1])
    assert lp.tolist() == pytest.approx([0.2 - 0.5 * 1.0, 0.4 - 0.5 * 1.2])


def test_update_penalty_alpha_follows_the_code_schedule() -> None:
    assert g.update_penalty_alpha(0.0, 0.01, 0.001) == pytest.approx(0.12)  # kick to 0.1, then * 1.2
    assert g.update_penalty_alpha(0.0, 0.0, 0.001) == 0.0
    assert g.update_penalty_alpha(1.0, 0.0005, 0.001) == pytest.approx(1 / 1.2)
    assert g.update_penalty_alpha(1.0, 0.001, 0.001) == 1.0
    assert g.update_penalty_alpha(9.0, 1.0, 0.001) == 10.0  # capped


def test_defaults_are_the_papers() -> None:
    c = g.GPOCoefs()
    assert (c.ppo_clip, c.alpha, c.target_kl, c.alpha_max, c.log_ratio_cap) == (0.3, 2.0, 0.001, 10.0, 10.0)
    with pytest.raises(ValueError):
        g.guider_clip_surrogate(t(0.0), t(0.0), t(0.0), t(1.0), inner_clip=1.5)
