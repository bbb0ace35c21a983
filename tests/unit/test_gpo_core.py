"""GPO's pure loss terms (posttrain/algos/gpo/core.py) and ``--algo gpo``'s LLM loss (llm.py) against
hand-computed values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from posttrain.algos.base import AlgoContext, Experience
from posttrain.algos.gpo import core as g
from posttrain.algos.gpo.llm import GPO, GPOConfig
from posttrain.metrics import PhaseTimer


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


# ---------------------------------------------------------------------------------------------------
# --algo gpo's LLM loss (posttrain/algos/gpo/llm.py) on a two-token vocabulary, by hand
# ---------------------------------------------------------------------------------------------------

def bernoulli_kl(p: float, q: float) -> float:
    """KL between two-token distributions (p, 1 - p) and (q, 1 - q)."""
    return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))


# Per (row, completion token): probability of the sampled token (id 0) under the guider mu (hinted
# prompt), the learner pi (plain prompt) and the behaviour policy beta; rows have advantages +1 and -1.
MU = [[0.8, 0.5], [0.3, 0.5]]
PI = [[0.5, 0.5], [0.5, 0.25]]
BETA = [[0.5, 0.4], [0.5, 0.5]]
ADVANTAGES = [1.0, -1.0]


class TwoTableModel(torch.nn.Module):
    """A stand-in causal LM: the completion logits are a guider table for the (longer) hinted inputs and a
    learner table for the plain ones, laid out as ``completion_logits`` reads them (the last position,
    which predicts nothing, is dropped)."""

    def __init__(self, hinted_width: int) -> None:
        super().__init__()
        self.hinted_width = hinted_width
        self.guider = torch.nn.Parameter(torch.log(torch.tensor([[[p, 1 - p] for p in row] for row in MU])))
        self.learner = torch.nn.Parameter(torch.log(torch.tensor([[[p, 1 - p] for p in row] for row in PI])))

    def forward(self, input_ids, attention_mask, position_ids, logits_to_keep):
        table = self.guider if input_ids.shape[1] == self.hinted_width else self.learner
        assert logits_to_keep == table.shape[1] + 1
        return SimpleNamespace(logits=torch.cat([table, torch.zeros_like(table[:, :1])], dim=1))


def _gpo_batch() -> Experience:
    completion = torch.zeros((2, 2), dtype=torch.long)  # token 0 sampled everywhere
    hinted = torch.cat([torch.full((2, 5), 7), completion], 1)
    plain = torch.cat([torch.full((2, 3), 7), completion], 1)
    return Experience({"input_ids": hinted, "attention_mask": torch.ones_like(hinted),
                       "learner_input_ids": plain, "learner_attention_mask": torch.ones_like(plain),
                       "completion_mask": torch.ones((2, 2)), "valid": torch.ones(2),
                       "old_logprobs": torch.log(torch.tensor(BETA)), "advantages": torch.tensor(ADVANTAGES)})


def _gpo(variant: str) -> GPO:
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, rollout=None, reference=None,
                      timer=PhaseTimer(), device=torch.device("cpu"))
    return GPO(GPOConfig(algo="gpo", gpo_variant=variant, max_new_tokens=2), ctx)


def test_gpo_llm_clip_loss_by_hand() -> None:
    """GPO-clip with eps 0.3, delta 0.2, alpha 2, token-mean over the 4 tokens. Per token (guider; learner):
    (0,0) rho_mu 1.6, mu/pi 1.6 -> 1.2: -min(1.6, 1.2) + KL = -1.2 + kl1; rho_pi 1: kl1 - 2 * 1
    (0,1) rho_mu 1.25, mu/pi 1 inside: -1.25, no KL; rho_pi 1.25: 0 - 2 * 1.25
    (1,0) rho_mu 0.6, mu/pi 0.6 -> 0.8: -min(-0.6, -0.8) + KL = 0.8 + kl2; rho_pi 1: kl2 + 2 * 1
    (1,1) rho_mu 1, mu/pi 2 -> 1.2, 1.2 * pi/beta = 0.6 -> 0.7: -min(-1, -0.7) + KL = 1 + kl3;
          rho_pi 0.5 -> -min(-0.5, -0.7) = 0.7: kl3 + 2 * 0.7
    """
    kl1, kl2, kl3 = bernoulli_kl(0.8, 0.5), bernoulli_kl(0.3, 0.5), bernoulli_kl(0.5, 0.25)
    guider = [-1.2 + kl1, -1.25, 0.8 + kl2, 1.0 + kl3]
    learner = [kl1 - 2.0, -2.5, kl2 + 2.0, kl3 + 1.4]
    batch = _gpo_batch()
    model = TwoTableModel(hinted_width=batch["input_ids"].shape[1])
    algo = _gpo("clip")
    out = algo.loss(model, batch, iteration=0)
    loss, metrics = out.loss, out.metrics
    assert loss.item() == pytest.approx(sum(guider + learner) / 4, rel=1e-5)
    assert metrics["gpo/backtrack_fraction"] == pytest.approx(3 / 4)
    assert metrics["gpo/kl_guider_learner"] == pytest.approx((kl1 + kl2 + kl3) / 4, rel=1e-5)
    assert metrics["gpo/learner_ratio_mean"] == pytest.approx((1 + 1.25 + 1 + 0.5) / 4, rel=1e-5)
    loss.backward()
    # every guider token has a gradient (an unclipped surrogate or the backtracking KL), every learner one too
    assert model.guider.grad.abs().sum(-1).gt(0).all() and model.learner.grad.abs().sum(-1).gt(0).all()


def test_gpo_llm_penalty_loss_by_hand() -> None:
    """GPO-penalty with alpha 0.5: guider -L1 + alpha KL (plain PPO on mu/beta, eps 0.3), learner KL - alpha L4.
    -L1: -min(1.6, 1.3) = -1.3; -1.25; -min(-0.6, -0.7) = 0.7; -min(-1, -1) = 1. L4 as in the clip test."""
    kl1, kl2, kl3 = bernoulli_kl(0.8, 0.5), bernoulli_kl(0.3, 0.5), bernoulli_kl(0.5, 0.25)
    guider = [-1.3 + 0.5 * kl1, -1.25, 0.7 + 0.5 * kl2, 1.0 + 0.5 * kl3]
    learner = [kl1 - 0.5, -0.5 * 1.25, kl2 + 0.5, kl3 + 0.5 * 0.7]
    batch = _gpo_batch()
    algo = _gpo("penalty")
    algo.alpha = 0.5
    out = algo.loss(TwoTableModel(hinted_width=batch["input_ids"].shape[1]), batch, iteration=0)
    loss, metrics = out.loss, out.metrics
    assert loss.item() == pytest.approx(sum(guider + learner) / 4, rel=1e-5)
    assert "gpo/backtrack_fraction" not in metrics
    assert metrics["gpo/kl_guider_learner"] == pytest.approx((kl1 + kl2 + kl3) / 4, rel=1e-5)


@pytest.mark.parametrize(("variant", "alpha_after"), [("penalty", 0.12), ("clip", 2.0), ("naive", 0.0)])
def test_gpo_alpha_adapts_from_the_steps_metrics_not_from_loss_calls(variant: str, alpha_after: float) -> None:
    """Loss calls leave the algorithm as it was; ``end_step`` adapts the penalty variant's alpha from the step's
    mean KL (0 -> 0.1 -> 0.12 for a KL above 1.2 x the target 0.001), and the checkpointed state is alpha alone."""
    batch = _gpo_batch()
    algo = _gpo(variant)
    before = dict(vars(algo))
    for _ in range(2):
        algo.loss(TwoTableModel(hinted_width=batch["input_ids"].shape[1]), batch, iteration=0)
    assert vars(algo) == before
    assert algo.end_step(1, {"gpo/kl_guider_learner": 0.01}) == {}
    assert algo.alpha == pytest.approx(alpha_after)
    assert algo.state_dict() == {"alpha": pytest.approx(alpha_after)}
