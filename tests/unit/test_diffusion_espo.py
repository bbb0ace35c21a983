"""ESPO and its baselines (token-elbo, diffu-grpo) on one code path: experience layout, common random
numbers across policy / old / reference, the inner iteration's masks, ratio normalisation, clipping and KL."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.espo import ESPO, DiffuGRPO, DiffuGRPOConfig, ESPOConfig, TokenELBO, TokenELBOConfig
from posttrain.engines.diffusion import DiffusionRolloutEngine, DiffusionSampling
from posttrain.engines.spec import DiffusionSpec
from posttrain.metrics import PhaseTimer
from posttrain.models.diffusion import tiny_diffusion_model
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.base import Example

EXAMPLES = [Example(prompt="12.4", answer="1234"), Example(prompt="4.21", answer="4321")]


def _reward(prompts, completions, **columns):
    return [float(len(c) % 3) for c in completions]  # arbitrary but varied within a group


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def policy(tokenizer):
    return tiny_diffusion_model(tokenizer, seed=5)


def _algo(cls, config_cls, tokenizer, policy, **overrides):
    config = config_cls(seed=0, group_size=4, prompts_per_step=2, micro_batch_size=4, mu=2, max_new_tokens=8,
                        rollout=DiffusionSpec(block_length=4), **overrides)
    engine = DiffusionRolloutEngine(copy.deepcopy(policy), tokenizer, DiffusionSampling(block_length=4))
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=_reward, is_correct=lambda c, e: c == e.answer, rollout=engine,
                      reference=copy.deepcopy(policy), timer=PhaseTimer(), device=torch.device("cpu"))
    return cls(config, ctx)


@pytest.mark.parametrize("cls,config_cls,token", [(ESPO, ESPOConfig, False), (TokenELBO, TokenELBOConfig, True),
                                                  (DiffuGRPO, DiffuGRPOConfig, True)])
def test_experience_and_ratio_one_before_any_update(tokenizer, policy, cls, config_cls, token):
    algo = _algo(cls, config_cls, tokenizer, policy)
    cfg = algo.config
    exp, _ = algo.make_experience(EXAMPLES, policy, step=1)
    batch, length = 8, 8
    assert exp["input_ids"].shape[1] == exp["attention_mask"].shape[1] and exp["completion_mask"].shape == (batch, length)
    expected = (batch, cfg.mu, length) if token else (batch, cfg.mu)
    assert exp["old"].shape == expected and exp["ref"].shape == expected
    if cfg.likelihood == "elbo":
        assert exp["elbo_masks"].shape == (batch, cfg.mu, cfg.num_mc, length)
    else:
        assert exp["prompt_masks"].shape[:2] == (batch, cfg.mu)
    assert exp["advantages"].abs().sum() > 0
    # the trainer's order: mu passes over the micro-batches; nothing updated, so old == current exactly
    seen = []
    for iteration in range(cfg.mu):
        for micro in exp.split(cfg.micro_batch_size):
            out = algo.loss(policy, micro, iteration)
            loss, m = out.loss, out.metrics
            seen.append(int(m["iteration"]))
            assert m["ratio_mean"] == 1.0 and m["kl"] == 0.0 and m["clip_fraction"] == 0.0
            adv, valid = micro["advantages"], micro["valid"].bool()
            if token:
                mask = micro["completion_mask"].bool() & valid[:, None]
                want = -(adv[:, None].expand_as(mask)[mask]).mean()
            else:
                want = -adv[valid].mean()
            assert loss.item() == pytest.approx(want.item(), abs=1e-6)
    assert seen == [0, 0, 1, 1]


def test_sequence_ratio_is_normalised_by_length_and_clipped(tokenizer, policy):
    algo = _algo(ESPO, ESPOConfig, tokenizer, policy, clip_low=0.2, clip_high=0.05, kl_coef=0.5)
    exp, _ = algo.make_experience(EXAMPLES, policy, step=1)
    length = exp["completion_mask"].shape[1]
    micro = exp.split(4)[0]
    # pretend the old policy was less likely by L*log(1.1): ratio exp(log 1.1) = 1.1, clipped at 1.05 for A > 0
    micro.tensors["old"] = micro["old"] - length * math.log(1.1)
    shift = torch.tensor([0.0, 1.0, 2.0, 3.0])
    micro.tensors["ref"] = micro["ref"] + shift[:, None]
    out = algo.loss(policy, micro, iteration=0)
    loss, m = out.loss, out.metrics
    adv = micro["advantages"]
    assert m["ratio_mean"] == pytest.approx(1.1, rel=1e-5)
    surrogate = -torch.minimum(1.1 * adv, 1.05 * adv).mean()
    kl = (0.5 * shift**2 / length).mean()  # k2 on the sequence ELBO, divided by L (ESPO's code)
    assert m["kl"] == pytest.approx(kl.item(), rel=1e-4)
    assert loss.item() == pytest.approx((surrogate + 0.5 * kl).item(), rel=1e-4)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    policy.zero_grad(set_to_none=True)


# Token-level ratios r per completion position and reference offsets s (ref = current + s), cycled.
TOKEN_RATIOS = [1.5, 0.5, 1.1, 1.0, 1.5, 0.5, 1.1, 1.0]
REF_SHIFTS = [0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0, 0.0]


@pytest.mark.parametrize("cls,config_cls,kl", [
    # k2 per token: s^2 / 2 = 0, .5, 2; sums over the kept tokens: 5 + 2.5 + 2.5 = 10, / 16 tokens
    (TokenELBO, TokenELBOConfig, 10 / 16),
    # k3 per token: e^s - 1 - s = 0, e - 2, e^2 - 3; row sums 2 (e^2 + e - 5), (e^2 + e - 5) twice; / 16
    (DiffuGRPO, DiffuGRPOConfig, 4 * (math.e**2 + math.e - 5) / 16),
])
def test_token_ratios_are_clipped_per_token(tokenizer, policy, cls, config_cls, kl):
    """Token level with ratios != 1, clip_low 0.2 / clip_high 0.3, hand-computed. Factor f(r) of -A:
    A > 0: r = 1.5 -> 1.3 (clipped), 0.5 -> 0.5, 1.1 -> 1.1, 1.0 -> 1.0; A < 0: 1.5 -> 1.5, 0.5 -> 0.8
    (clipped). Rows (A, tokens up to EOS): (1, 8), (-2, 3), (0.5, 5), and an invalid row left out.
    Surrogate sums: -(1.3 + .5 + 1.1 + 1) * 2 = -7.8; 2 (1.5 + .8 + 1.1) = 6.8; -.5 (1.3 + .5 + 1.1 + 1 + 1.3)
    = -2.6; mean over the 16 kept tokens: -3.6 / 16 = -0.225."""
    algo = _algo(cls, config_cls, tokenizer, policy, clip_low=0.2, clip_high=0.3, kl_coef=0.1)
    exp, _ = algo.make_experience(EXAMPLES, policy, step=1)
    micro = exp.split(4)[0]
    assert micro["completion_mask"].shape[1] == len(TOKEN_RATIOS)
    micro.tensors["advantages"] = torch.tensor([1.0, -2.0, 0.5, -1.0])
    micro.tensors["valid"] = torch.tensor([1.0, 1.0, 1.0, 0.0])
    micro.tensors["completion_mask"] = (torch.arange(8)[None, :] < torch.tensor([8, 3, 5, 2])[:, None]).float()
    micro.tensors["old"] = micro["old"] - torch.log(torch.tensor(TOKEN_RATIOS))  # [4, mu, L]: ratio = r
    micro.tensors["ref"] = micro["ref"] + torch.tensor(REF_SHIFTS)
    out = algo.loss(policy, micro, iteration=0)
    loss, m = out.loss, out.metrics
    assert m["iteration"] == 0.0
    assert m["ratio_mean"] == pytest.approx((8.2 + 3.1 + 5.6) / 16, rel=1e-5)
    assert m["clip_fraction"] == pytest.approx(5 / 16)  # r = 1.5 at A > 0 (2 + 2 tokens), r = 0.5 at A < 0 (1)
    assert m["kl"] == pytest.approx(kl, rel=1e-4)
    assert loss.item() == pytest.approx(-0.225 + 0.1 * kl, rel=1e-4, abs=1e-6)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    policy.zero_grad(set_to_none=True)


def test_masks_come_from_the_algorithm_generator(tokenizer, policy):
    a = _algo(ESPO, ESPOConfig, tokenizer, policy)
    b = _algo(ESPO, ESPOConfig, tokenizer, policy)
    ea, _ = a.make_experience(EXAMPLES, policy, step=1)
    eb, _ = b.make_experience(EXAMPLES, policy, step=1)
    assert torch.equal(ea["elbo_masks"], eb["elbo_masks"]) and torch.equal(ea["old"], eb["old"])
    again, _ = a.make_experience(EXAMPLES, policy, step=1)
    assert not torch.equal(again["elbo_masks"], ea["elbo_masks"])  # fresh masks each step
    assert not torch.equal(ea["elbo_masks"][:, 0], ea["elbo_masks"][:, 1])  # and each inner iteration


def test_preset_flags():
    assert (ESPOConfig().likelihood, ESPOConfig().action, ESPOConfig().kl_estimator, ESPOConfig().advantage) == \
        ("elbo", "sequence", "k2", "rloo")
    assert (TokenELBOConfig().likelihood, TokenELBOConfig().action) == ("elbo", "token")
    d1 = DiffuGRPOConfig()
    assert (d1.likelihood, d1.action, d1.kl_estimator, d1.kl_coef, d1.clip_low, d1.prompt_mask_prob) == \
        ("mean-field", "token", "k3", 0.04, 0.5, 0.15)
