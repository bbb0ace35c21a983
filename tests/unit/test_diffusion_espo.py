"""ESPO and its baselines (token-elbo, diffu-grpo) on one code path: experience layout, common random
numbers across policy / old / reference, the iteration counter, ratio normalisation, clipping and KL."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.espo import ESPO, DiffuGRPO, DiffuGRPOConfig, ESPOConfig, TokenELBO, TokenELBOConfig
from posttrain.metrics import PhaseTimer
from posttrain.models.diffusion import tiny_diffusion_model
from posttrain.models.tiny import build_tokenizer
from posttrain.rollout.diffusion import DiffusionRolloutEngine, DiffusionSampling
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
                        block_length=4, **overrides)
    engine = DiffusionRolloutEngine(copy.deepcopy(policy), tokenizer, DiffusionSampling(block_length=4))
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=_reward, is_correct=lambda c, e: c == e.answer, rollout=engine,
                      reference=copy.deepcopy(policy), timer=PhaseTimer(), device=torch.device("cpu"))
    return cls(config, ctx)


@pytest.mark.parametrize("cls,config_cls,token", [(ESPO, ESPOConfig, False), (TokenELBO, TokenELBOConfig, True),
                                                  (DiffuGRPO, DiffuGRPOConfig, True)])
def test_experience_and_ratio_one_before_any_update(tokenizer, policy, cls, config_cls, token):
    algo = _algo(cls, config_cls, tokenizer, policy)
    cfg = algo.config
    exp, _ = algo.make_experience(EXAMPLES, policy)
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
    for _ in range(cfg.mu):
        for micro in exp.split(cfg.micro_batch_size):
            loss, m = algo.loss(policy, micro)
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
    exp, _ = algo.make_experience(EXAMPLES, policy)
    length = exp["completion_mask"].shape[1]
    micro = exp.split(4)[0]
    # pretend the old policy was less likely by L*log(1.1): ratio exp(log 1.1) = 1.1, clipped at 1.05 for A > 0
    micro.tensors["old"] = micro["old"] - length * math.log(1.1)
    shift = torch.tensor([0.0, 1.0, 2.0, 3.0])
    micro.tensors["ref"] = micro["ref"] + shift[:, None]
    loss, m = algo.loss(policy, micro)
    adv = micro["advantages"]
    assert m["ratio_mean"] == pytest.approx(1.1, rel=1e-5)
    surrogate = -torch.minimum(1.1 * adv, 1.05 * adv).mean()
    kl = (0.5 * shift**2 / length).mean()  # k2 on the sequence ELBO, divided by L (ESPO's code)
    assert m["kl"] == pytest.approx(kl.item(), rel=1e-4)
    assert loss.item() == pytest.approx((surrogate + 0.5 * kl).item(), rel=1e-4)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    policy.zero_grad(set_to_none=True)


def test_masks_come_from_the_algorithm_generator(tokenizer, policy):
    a = _algo(ESPO, ESPOConfig, tokenizer, policy)
    b = _algo(ESPO, ESPOConfig, tokenizer, policy)
    ea, _ = a.make_experience(EXAMPLES, policy)
    eb, _ = b.make_experience(EXAMPLES, policy)
    assert torch.equal(ea["elbo_masks"], eb["elbo_masks"]) and torch.equal(ea["old"], eb["old"])
    again, _ = a.make_experience(EXAMPLES, policy)
    assert not torch.equal(again["elbo_masks"], ea["elbo_masks"])  # fresh masks each step
    assert not torch.equal(ea["elbo_masks"][:, 0], ea["elbo_masks"][:, 1])  # and each inner iteration


def test_preset_flags():
    assert (ESPOConfig().likelihood, ESPOConfig().action, ESPOConfig().kl_estimator, ESPOConfig().advantage) == \
        ("elbo", "sequence", "k2", "rloo")
    assert (TokenELBOConfig().likelihood, TokenELBOConfig().action) == ("elbo", "token")
    d1 = DiffuGRPOConfig()
    assert (d1.likelihood, d1.action, d1.kl_estimator, d1.kl_coef, d1.clip_low, d1.prompt_mask_prob) == \
        ("mean-field", "token", "k3", 0.04, 0.5, 0.15)
