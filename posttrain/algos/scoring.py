"""Scoring one step's rollouts, shared by the policy-gradient algorithms (GRPO/RLOO, DuPO, ESPO, GPO, PPO):
call the reward function once for the whole batch, check the task's verifier per completion, turn each prompt's
group of rewards into advantages (``score_groups``, the one group -> score -> advantage step), and summarise rewards
and completions as the metrics every such run logs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from posttrain.algos.core import group_advantages, rewards_to_tensor
from posttrain.tasks.base import Example, ReportsRewardMetrics, reward_columns

if TYPE_CHECKING:
    from posttrain.algos.base import AlgoContext
    from posttrain.engines.base import Rollouts
    from posttrain.tasks.base import RewardFn


def score_rollouts(ctx: AlgoContext, group: list[Example], rollouts: Rollouts, reward_fn: RewardFn | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, list[bool], dict[str, float]]:
    """Rewards as a float tensor, the mask of valid (non-None) rewards, verifier correctness per completion, and
    the reward function's own metrics of the call (``ReportsRewardMetrics``; empty for a plain function). The
    rewards are ``reward_fn``'s (default: the run's, ``ctx.reward_fn``).

    Timed as the "reward" phase; fails when the reward function returns the wrong number of rewards."""
    fn = reward_fn or ctx.reward_fn
    with ctx.timer.phase("reward"):
        rewards = fn([ex.prompt for ex in group], rollouts.texts, **reward_columns(group))
        reported = fn.pop_metrics() if isinstance(fn, ReportsRewardMetrics) else {}
        if len(rewards) != len(group):
            raise ValueError(f"the reward function returned {len(rewards)} rewards for {len(group)} completions")
        correct = [ctx.is_correct(text, ex) for text, ex in zip(rollouts.texts, group)]
    reward_tensor, valid = rewards_to_tensor(rewards)
    return reward_tensor, valid, correct, reported


def rollout_metrics(reward_tensor: torch.Tensor, valid: torch.Tensor, correct: list[bool],
                    rollouts: Rollouts) -> dict[str, float]:
    """Reward mean/std over valid rewards, failed-reward fraction, verifier accuracy and completion lengths."""
    finite = reward_tensor[valid]
    lengths = torch.tensor([len(c) for c in rollouts.completion_ids], dtype=torch.float32)
    return {
        "reward/mean": float(finite.mean()) if finite.numel() else 0.0,
        "reward/std": float(finite.std()) if finite.numel() > 1 else 0.0,
        "reward/failed_fraction": float(1 - valid.float().mean()),
        "train/accuracy": sum(correct) / len(correct),
        "completion/length_mean": float(lengths.mean()),
        "completion/length_max": float(lengths.max()),
        "completion/truncated_fraction": sum(r == "length" for r in rollouts.finish_reasons) / len(correct),
    }


@dataclass(frozen=True)
class ScoredGroups:
    """One step's rollouts scored: each prompt answered ``group_size`` times, in order."""

    examples: list[Example]
    """The example of each rollout (each prompt's repeated ``group_size`` times)."""
    rewards: torch.Tensor
    valid: torch.Tensor
    """Which rewards exist (the reward function returned a number)."""
    correct: list[bool]
    """The task's verifier per rollout."""
    advantages: torch.Tensor | None
    """Group-relative advantages; None where the caller asked for none (PPO's come from its critic)."""
    metrics: dict[str, float]
    """``rollout_metrics`` of the step, and the reward function's own (``ReportsRewardMetrics``)."""


def score_groups(ctx: AlgoContext, examples: list[Example], rollouts: Rollouts, group_size: int,
                 advantage: str | None, reward_fn: RewardFn | None = None) -> ScoredGroups:
    """Scores ``rollouts``, ``group_size`` answers per example of ``examples`` (``score_rollouts`` with
    ``reward_fn``), and, when ``advantage`` names an estimator (``core.ADVANTAGES``), their group advantages."""
    group = [ex for ex in examples for _ in range(group_size)]
    rewards, valid, correct, reported = score_rollouts(ctx, group, rollouts, reward_fn)
    advantages = None if advantage is None else group_advantages(rewards, group_size, advantage, valid=valid)
    metrics = {**rollout_metrics(rewards, valid, correct, rollouts), **reported}
    return ScoredGroups(group, rewards, valid, correct, advantages, metrics)
