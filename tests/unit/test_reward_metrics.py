"""A reward function's own metrics (``posttrain.tasks.base.ReportsRewardMetrics``) reach the step's metrics
through ``score_groups``; a plain function adds none."""

from __future__ import annotations

import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.scoring import score_groups
from posttrain.engines.base import Rollouts
from posttrain.metrics import PhaseTimer
from posttrain.tasks.base import Example, ReportsRewardMetrics
from rewards.remote import EnvRemoteReward, RemoteReward

EXAMPLES = [Example("1+1=", "2"), Example("2+2=", "4")]


class CountingReward:
    """Reward 1 for every completion; reports how many it scored since the last pop."""

    def __init__(self) -> None:
        self.scored = 0

    def __call__(self, prompts: list[str], completions: list[str], **columns: list) -> list[float | None]:
        self.scored += len(completions)
        return [1.0] * len(completions)

    def pop_metrics(self) -> dict[str, float]:
        scored, self.scored = self.scored, 0
        return {"reward/parse_fail_rate": 0.25, "reward/scored": float(scored)}


def plain_reward(prompts: list[str], completions: list[str], **columns: list) -> list[float | None]:
    return [0.0] * len(completions)


def scored_metrics(reward_fn) -> dict[str, float]:
    ctx = AlgoContext(tokenizer=None, reward_fn=reward_fn, is_correct=lambda text, ex: text == ex.answer,
                      timer=PhaseTimer(), device=torch.device("cpu"))
    texts = ["2", "3", "4", "4"]
    rollouts = Rollouts(prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4, texts=texts, logprobs=[[0.0]] * 4,
                        finish_reasons=["stop"] * 4)
    return score_groups(ctx, EXAMPLES, rollouts, group_size=2, advantage="grpo").metrics


def test_a_reward_functions_metrics_join_the_step_metrics() -> None:
    reward = CountingReward()
    metrics = scored_metrics(reward)
    assert metrics["reward/parse_fail_rate"] == 0.25 and metrics["reward/scored"] == 4.0
    assert metrics["reward/mean"] == 1.0 and metrics["train/accuracy"] == 0.75  # the step's own metrics stay
    assert reward.scored == 0  # popped


def test_a_plain_reward_function_adds_no_metrics() -> None:
    assert not isinstance(plain_reward, ReportsRewardMetrics)
    assert "reward/parse_fail_rate" not in scored_metrics(plain_reward)


def test_the_remote_reward_clients_report_metrics() -> None:
    assert issubclass(RemoteReward, ReportsRewardMetrics) and isinstance(EnvRemoteReward(), ReportsRewardMetrics)
    assert EnvRemoteReward().pop_metrics() == {}  # nothing before the first call (and no server contacted)
