"""``--algo ppo`` (``posttrain.algos.ppo.algo``) on tiny random models: its roles, that a reward of zero
everywhere gives exactly zero policy gradient, that a dense reward credits only the tokens up to where it is
given, and that bad settings fail naming the field."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.ppo.algo import CRITIC, PPO, PPOConfig, TaskRewards
from posttrain.algos.roles import CHECKPOINT, INITIAL_POLICY, POLICY, REFERENCE, check_roles
from posttrain.config import ConfigError
from posttrain.engines.hf import HFRolloutEngine
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
from posttrain.models.value import ValueModel
from posttrain.tasks import TASKS

TASK = TASKS.get("arithmetic")()
EXAMPLES = TASK.split("train")[:3]


def _zero_reward(prompts, completions, **columns):
    return [0.0] * len(completions)


class SecondTokenRewards(TaskRewards):
    """A dense reward of +1 on every completion's second token, nothing else (like one good span)."""

    def reward_terms(self, group, rollouts, completion_len, reward, valid):
        dense = torch.zeros(len(rollouts), completion_len)
        dense[:, 1] = 1.0
        return dense, None, torch.ones_like(valid), {}


class MarkSecondToken(PPO):
    rewards_class = SecondTokenRewards


def _algo(cls: type[PPO] = PPO, reward=_zero_reward, **overrides) -> tuple[PPO, torch.nn.Module]:
    tokenizer = build_tokenizer()
    policy = build_model(dataclasses.replace(RECIPES.get("causal-arithmetic"), seed=0), tokenizer).eval()
    config = PPOConfig(**{"group_size": 2, "prompts_per_step": 3, "micro_batch_size": 6, "max_new_tokens": 5,
                          "temperature": 1.0, "kl_coef": 0.0, **overrides})
    models = {CRITIC: ValueModel(copy.deepcopy(policy))}
    if config.uses_kl:
        models[REFERENCE] = copy.deepcopy(policy).requires_grad_(False)
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=reward, is_correct=TASK.is_correct, timer=PhaseTimer(),
                      device=torch.device("cpu"), rollout=HFRolloutEngine(copy.deepcopy(policy), tokenizer),
                      models=models)
    algo = cls(config, ctx)
    return algo, policy


def test_roles() -> None:
    algo, _ = _algo(kl_coef=0.05)
    roles = check_roles(algo.roles())
    assert set(roles) == {POLICY, CRITIC, REFERENCE}
    critic = roles[CRITIC]
    assert (critic.source, critic.trains, critic.head, critic.engine) == (INITIAL_POLICY, True, "value", None)
    assert set(check_roles(_algo()[0].roles())) == {POLICY, CRITIC}  # no KL, no reference
    chosen = PPO(PPOConfig(critic_model="some/critic", critic_lr=3e-5), algo.ctx).roles()[1]
    assert (chosen.source, chosen.checkpoint, chosen.lr, chosen.config_field) == (CHECKPOINT, "some/critic", 3e-5,
                                                                                  "critic_model")


def test_all_zero_reward_gives_zero_policy_gradient() -> None:
    algo, policy = _algo()
    experience, metrics = algo.make_experience(EXAMPLES, policy, step=1)
    assert torch.equal(experience["advantages"], torch.zeros_like(experience["advantages"]))
    assert metrics["ppo/token_reward_mean"] == 0.0
    loss = algo.loss(policy.train(), experience, iteration=0).loss
    loss.backward()
    grads = [p.grad for p in policy.parameters() if p.grad is not None]
    assert grads and all(torch.count_nonzero(g) == 0 for g in grads)


def test_dense_reward_credits_the_tokens_up_to_it() -> None:
    algo, policy = _algo(MarkSecondToken, whiten_advantages=False, lam=0.5)
    experience, _ = algo.make_experience(EXAMPLES, policy, step=1)
    mask = experience["completion_mask"]
    assert (mask[:, :2] == 1).all()  # every completion has at least two tokens here
    advantages = experience["advantages"]
    # zero values (fresh head), gamma 1: A_1 = 1, A_0 = 0 + lambda * 1, later tokens get nothing
    assert torch.allclose(advantages[:, 1], torch.ones(len(mask)))
    assert torch.allclose(advantages[:, 0], torch.full((len(mask),), 0.5))
    assert torch.count_nonzero(advantages[:, 2:]) == 0
    role_out = algo.role_loss(CRITIC, algo.ctx.models[CRITIC], experience, iteration=0)
    critic_loss, metrics = role_out.loss, role_out.metrics
    assert critic_loss.item() > 0 and metrics["critic/clip_fraction"] == 0.0  # values start at 0, returns do not


def test_full_kl_against_an_identical_reference_is_zero() -> None:
    algo, policy = _algo(kl_coef=0.1, kl_estimator="full", reward=TASK.reward)
    _, metrics = algo.make_experience(EXAMPLES, policy, step=1)
    assert metrics["ppo/sequence_kl"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["ppo/kl_coef"] == 0.1


def test_ratio_threshold_skips_the_micro_batch() -> None:
    """The skip goes back to the trainer (``LossOutput.skip``), which zeroes the policy's and the critic's loss."""
    algo, policy = _algo(MarkSecondToken, ratio_threshold=1e-6)
    experience, _ = algo.make_experience(EXAMPLES, policy, step=1)
    out = algo.loss(policy, experience, iteration=0)
    assert out.skip and out.metrics["skipped_batch"] == 1.0
    kept = _algo(MarkSecondToken, ratio_threshold=1e6)[0].loss(policy, experience, iteration=0)
    assert not kept.skip and kept.metrics["skipped_batch"] == 0.0
    never = _algo(MarkSecondToken, ratio_threshold=0.0)[0].loss(policy, experience, iteration=0)
    assert not never.skip and "skipped_batch" not in never.metrics  # 0 = the rule is off


@pytest.mark.parametrize(("overrides", "field"), [
    ({"kl_mode": "loss", "kl_estimator": "full"}, "kl_estimator"),
    ({"lam": 1.5}, "lam"),
    ({"critic_lr": 0.0}, "critic_lr"),
    ({"kl_estimator": "k9"}, "kl_estimator"),
    ({"value_clip": -1.0}, "value_clip"),
])
def test_bad_settings_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PPOConfig(algo="ppo", **overrides).validate()


def test_kl_horizon_zero_is_a_tenth_of_the_run() -> None:
    algo, _ = _algo(kl_coef=0.1, kl_horizon=0.0, steps=150, prompts_per_step=64, group_size=1, micro_batch_size=64)
    assert algo.kl_controller.horizon == 150 * 64 / 10  # beta can move by at most e^(0.2 x 10) in the run
    assert _algo(kl_coef=0.1, kl_horizon=500.0)[0].kl_controller.horizon == 500.0
