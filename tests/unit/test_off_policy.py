"""GRPO on stale or mismatched rollouts (issue: off-policy correction): the ratio's old policy is the trainer's own
(pi_prox), never the sampler's, and a deliberate sampler mismatch makes truncated importance sampling change the
loss and its gradient, while an honest sampler leaves them as they were. Also which forwards a step makes (none it
does not need) and that the padding-free forwards give the padded ones' loss and gradient."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.pg import GRPO, GRPOConfig, tis_cap
from posttrain.config import ConfigError
from posttrain.engines.base import Rollouts
from posttrain.engines.hf import HFRolloutEngine
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
from posttrain.tasks import TASKS

TASK = TASKS.get("arithmetic")()
EXAMPLES = TASK.split("train")[:2]
OFFSET = 0.5
"""The deliberate mismatch: the sampler's log-prob of every token is off by +0.5 in the rewarded (odd) rows and -0.5
in the others, so the TIS weights are e^-0.5 and e^0.5, both inside the cap, and differ between the two signs of the
advantage (a weight common to every token would only rescale the loss)."""


def _alternating(rewards_for: list[str]) -> list[float]:
    return [float(i % 2) for i in range(len(rewards_for))]


@pytest.fixture(scope="module")
def setup() -> tuple[torch.nn.Module, AlgoContext, Rollouts]:
    tokenizer = build_tokenizer()
    policy = build_model(dataclasses.replace(RECIPES.get("causal-arithmetic"), seed=0), tokenizer).eval()
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=lambda prompts, completions, **_: _alternating(completions),
                      is_correct=TASK.is_correct, timer=PhaseTimer(), device=torch.device("cpu"),
                      rollout=HFRolloutEngine(copy.deepcopy(policy), tokenizer))
    algo = _grpo(ctx, tis_cap=0.0)
    request = algo.generation_request(EXAMPLES, step=1)
    rollouts = ctx.rollout.generate(request.prompt_ids, request.params)
    return policy, ctx, rollouts


def _grpo(ctx: AlgoContext, **overrides) -> GRPO:
    config = GRPOConfig(**{"group_size": 2, "prompts_per_step": 2, "micro_batch_size": 4, "max_new_tokens": 6,
                           "temperature": 1.0, **overrides})
    return GRPO(config, ctx)


def _mismatched(rollouts: Rollouts) -> Rollouts:
    return dataclasses.replace(rollouts, logprobs=[[lp + OFFSET * (1 if i % 2 else -1) for lp in row]
                                                   for i, row in enumerate(rollouts.logprobs)])


def _loss_and_grad(algo: GRPO, policy: torch.nn.Module, rollouts: Rollouts
                   ) -> tuple[float, torch.Tensor, dict[str, float]]:
    experience, _ = algo.experience_from_rollouts(EXAMPLES, rollouts, policy, step=1)
    policy.zero_grad()
    out = algo.loss(policy, experience, iteration=0)
    out.loss.backward()
    grad = torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])
    return float(out.loss.detach()), grad, out.metrics


def test_stale_rollouts_keep_the_trainers_log_probs_as_the_old_policy(setup) -> None:
    policy, ctx, rollouts = setup
    experience, _ = _grpo(ctx, mu=2).experience_from_rollouts(EXAMPLES, _mismatched(rollouts), policy, step=1)
    _, _, metrics = _loss_and_grad(_grpo(ctx, mu=2), policy, _mismatched(rollouts))
    sampler = experience["sampling_logprobs"]
    mask = experience["completion_mask"].bool()
    assert (experience["old_logprobs"] - sampler)[mask].abs().mean() == pytest.approx(OFFSET, abs=0.05)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # pi_theta == pi_prox before any update
    assert metrics["rollout/logprob_abs_diff"] == pytest.approx(OFFSET, abs=0.05)


def test_a_mismatched_sampler_makes_tis_change_the_loss_and_gradient(setup) -> None:
    policy, ctx, rollouts = setup
    mismatched = _mismatched(rollouts)
    loss_off, grad_off, _ = _loss_and_grad(_grpo(ctx, tis_cap=0.0), policy, mismatched)
    loss_on, grad_on, metrics = _loss_and_grad(_grpo(ctx, tis_cap=2.0), policy, mismatched)
    assert "rollout/tis_weight_mean" in metrics and metrics["rollout/tis_weight_mean"] != pytest.approx(1.0, abs=0.05)
    assert loss_on != pytest.approx(loss_off, abs=1e-4)
    assert (grad_on - grad_off).norm() > 1e-3 * grad_off.norm()


def test_an_honest_sampler_leaves_tis_a_no_op(setup) -> None:
    policy, ctx, rollouts = setup  # the HF engine's log-probs are the trainer's, up to rounding
    loss_off, grad_off, _ = _loss_and_grad(_grpo(ctx, tis_cap=0.0), policy, rollouts)
    loss_on, grad_on, metrics = _loss_and_grad(_grpo(ctx, tis_cap=2.0), policy, rollouts)
    assert metrics["rollout/tis_weight_mean"] == pytest.approx(1.0, abs=1e-4)
    assert loss_on == pytest.approx(loss_off, abs=1e-5)
    torch.testing.assert_close(grad_on, grad_off, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, 0.0),
    ({"rollout": "vllm"}, 2.0),
    ({"async_rollouts": True}, 2.0),
    ({"sync_every": 4}, 2.0),
    ({"sync_every": 4, "tis_cap": 0.0}, 0.0),
    ({"tis_cap": 3.0}, 3.0),
])
def test_tis_is_on_by_default_wherever_the_sampler_can_lag(overrides: dict, expected: float) -> None:
    assert tis_cap(GRPOConfig(**overrides)) == expected


@pytest.mark.parametrize(("overrides", "old", "reference"), [({}, False, False), ({"mu": 2}, True, False)])
def test_no_forward_the_step_does_not_need(setup, overrides, old, reference) -> None:
    """At mu=1 the old policy is the current one detached (no old-logprob forward) and at kl_coef=0 there is no
    reference (no reference forward): neither tensor is made and neither timer phase runs."""
    policy, ctx, rollouts = setup
    algo = _grpo(ctx, **overrides)
    ctx.timer.pop()
    experience, _ = algo.experience_from_rollouts(EXAMPLES, rollouts, policy, step=1)
    phases = ctx.timer.pop()
    assert ("old_logprobs" in experience.tensors) is old and ("time/old_logprobs" in phases) is old
    assert ("ref_logprobs" in experience.tensors) is reference and "time/reference" not in phases


def test_padding_free_loss_and_gradient_equal_the_padded_ones(setup) -> None:
    """``--padding_free`` (one packed row per micro-batch) gives the padded batch's loss, metrics, old log-probs
    and gradient on the tiny Qwen2 policy, rollouts of unequal lengths included."""
    policy, ctx, rollouts = setup
    cut = [len(c) - i for i, c in enumerate(rollouts.completion_ids)]  # lengths 6, 5, 4, 3: padding to remove
    rollouts = dataclasses.replace(rollouts, completion_ids=[c[:n] for c, n in zip(rollouts.completion_ids, cut)],
                                   logprobs=[lp[:n] for lp, n in zip(rollouts.logprobs, cut)])
    assert len({len(c) for c in rollouts.completion_ids}) == 4
    results = {}
    for padding_free in (False, True):
        algo = _grpo(ctx, mu=2, padding_free=padding_free)
        experience, _ = algo.experience_from_rollouts(EXAMPLES, _mismatched(rollouts), policy, step=1)
        mask = experience["completion_mask"].bool()
        results[padding_free] = (experience["old_logprobs"][mask], *_loss_and_grad(algo, policy, rollouts))
    (old_padded, loss_padded, grad_padded, metrics_padded), (old_packed, loss_packed, grad_packed, metrics_packed) = (
        results[False], results[True])
    torch.testing.assert_close(old_packed, old_padded, atol=1e-5, rtol=0)
    assert loss_packed == pytest.approx(loss_padded, abs=1e-6)
    assert metrics_packed["entropy"] == pytest.approx(metrics_padded["entropy"], abs=1e-5)
    torch.testing.assert_close(grad_packed, grad_padded, atol=1e-5, rtol=1e-4)
    assert grad_padded.abs().sum() > 0


def test_the_configs_loss_fields_are_the_policy_loss_options(setup) -> None:
    """Each loss variant a user selects by config value reaches the one policy loss unchanged; the KL weight only
    with a reference; the "constant" aggregation's length is the completion budget."""
    _, ctx, _ = setup
    algo = _grpo(ctx, dual_clip=3.0, ratio_level="sequence", tis_cap=1.5, is_level="sequence-mask", kl_clamp=10.0,
                 loss_agg="seq-mean-token-sum", kl_coef=0.0)
    options = algo.loss_options()
    assert (options.dual_clip, options.ratio_level, options.tis_cap, options.is_level, options.kl_clamp,
            options.aggregation, options.aggregation_constant, options.kl_coef) == (
        3.0, "sequence", 1.5, "sequence-mask", 10.0, "seq-mean-token-sum", 6.0, 0.0)


@pytest.mark.parametrize(("field", "value"), [("dual_clip", 0.5), ("kl_clamp", -1.0), ("is_level", "batch"),
                                              ("ratio_level", "step"), ("loss_agg", "sum")])
def test_bad_loss_fields_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        GRPOConfig(**{field: value}).validate(1)


def test_an_explicit_tis_cap_of_zero_on_lagging_rollouts_warns(setup, caplog) -> None:
    _, ctx, _ = setup
    with caplog.at_level("WARNING", logger="posttrain"):
        _grpo(ctx, tis_cap=0.0, sync_every=2, save_every=2)
    assert "--tis_cap 0" in caplog.text and "uncorrected" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="posttrain"):
        _grpo(ctx, tis_cap=0.0)  # the trainer's own weights sample in process: nothing to correct
    assert "--tis_cap" not in caplog.text
