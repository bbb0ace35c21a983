"""``Trainer._train_on``: the inner iteration goes to ``loss`` / ``role_loss`` as an argument, a
``LossOutput.skip`` zeroes the policy's and every trained role's loss while each model still steps, and each
model's gradient norm is the mean over its optimizer steps. The trainers are built from ``TrainerParts`` of small
fakes (``_trainer``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from posttrain.algos.base import AlgoContext, Algorithm, Experience, LossOutput
from posttrain.algos.roles import policy_role
from posttrain.config import TrainConfig
from posttrain.dist import DistInfo
from posttrain.engines.weight_sync import WorkerError
from posttrain.metrics import PhaseTimer
from posttrain.trainer import Trainer
from posttrain.trainer_parts import TrainerParts


class RecordingModel:
    """Stands in for a DeepSpeed-wrapped model: records what the trainer hands its backward and counts steps; every
    second step updates the weights (two micro-batches per optimizer step) and reports the step count as its norm."""

    def __init__(self) -> None:
        self.module = torch.nn.Linear(1, 1, bias=False)
        self.losses: list[float] = []
        self.steps = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)

    def backward(self, loss: torch.Tensor) -> None:
        self.losses.append(float(loss.detach()))

    def step(self) -> None:
        self.steps += 1

    def get_lr(self) -> list[float]:
        return [0.1]

    def is_gradient_accumulation_boundary(self) -> bool:
        return self.steps % 2 == 1

    def get_global_grad_norm(self) -> float:
        return float(self.steps)


class SkipMarkedRows(Algorithm):
    """Loss 1 + iteration on every micro-batch, skipped where the batch's ``skip`` column says so."""

    config_class = TrainConfig
    seen: list[tuple[str, int]]

    def make_experience(self, examples, policy, step):
        raise NotImplementedError

    def loss(self, policy, batch, iteration):
        self.seen.append(("policy", iteration))
        out = policy(batch["x"]).sum() * 0.0 + 1.0 + iteration
        return LossOutput(out, {"iteration": float(iteration)}, skip=bool(batch["skip"][0]))

    def role_loss(self, name, model, batch, iteration):
        self.seen.append((name, iteration))
        return LossOutput(model(batch["x"]).sum() * 0.0 + 5.0, {f"{name}/value": 5.0})


def _trainer(config: TrainConfig, policy: RecordingModel, roles: dict[str, RecordingModel] | None = None,
             rollout: Any = None, info: DistInfo | None = None) -> Trainer:
    """A ``Trainer`` over parts of fakes: ``policy`` (and each of ``roles``) as its DeepSpeed models, a
    ``SkipMarkedRows`` algorithm (``algo.seen`` empty), ``rollout`` as the policy's engine; no data, sampler or
    logger (the tests below run none)."""
    info = info or DistInfo(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, timer=PhaseTimer(), device=info.device,
                      rank=info.rank, world_size=info.world_size, rollout=rollout)
    algo = SkipMarkedRows(config, ctx)
    algo.seen = []
    return Trainer(TrainerParts(config=config, info=info, task=None, train_examples=[], eval_examples=[],
                                tokenizer=None, timer=ctx.timer, ctx=ctx, algo=algo,
                                policy_role=policy_role(config.rollout), deepspeed_model=policy,
                                role_deepspeed_models=dict(roles or {}), refreshed_roles={}, refreshed_modules={},
                                rollout=rollout, sampler=None, async_driver=None, logger=None))


def test_iteration_is_passed_and_skip_zeroes_every_loss() -> None:
    config = TrainConfig(mu=2, micro_batch_size=1, zero_stage=2)  # DeepSpeed reports the norms
    policy, critic = RecordingModel(), RecordingModel()
    trainer = _trainer(config, policy, {"critic": critic})
    algo = trainer.algo
    experience = Experience({"x": torch.ones(2, 1), "skip": torch.tensor([False, True])})
    metrics = trainer._train_on(experience)
    assert algo.seen == [("policy", 0), ("critic", 0), ("policy", 0), ("critic", 0),
                         ("policy", 1), ("critic", 1), ("policy", 1), ("critic", 1)]
    assert policy.losses == [1.0, 0.0, 2.0, 0.0] and critic.losses == [5.0, 0.0, 5.0, 0.0]
    assert policy.steps == critic.steps == 4
    assert metrics["train/loss"] == 0.75 and metrics["critic/loss"] == 2.5 and metrics["train/iteration"] == 0.5
    assert metrics["train/grad_norm"] == metrics["critic/grad_norm"] == 3.0  # steps 2 and 4 updated the weights


def test_a_step_that_reaches_no_accumulation_boundary_is_an_error() -> None:
    """One micro-batch where DeepSpeed would accumulate two: no optimizer step moved the weights, so there is no
    norm to report, and the trainer says so instead of dividing by zero."""
    trainer = _trainer(TrainConfig(mu=1, micro_batch_size=1, zero_stage=2), RecordingModel())
    with pytest.raises(RuntimeError, match="train: 1 micro-batches of 1 samples reached no optimizer step"):
        trainer._train_on(Experience({"x": torch.ones(1, 1), "skip": torch.tensor([False])}))


class FailingEngine:
    """A rollout engine whose sync raises ``error`` (as a rank's timed-out gather, or a worker, would)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def sync_from(self, weights: object, version: int) -> None:
        raise self.error


def _syncing_trainer(engine: FailingEngine) -> Trainer:
    return _trainer(TrainConfig(dist_timeout_s=7.5), RecordingModel(), rollout=engine,
                    info=DistInfo(rank=1, world_size=2, local_rank=1, device=torch.device("cpu")))


def test_a_failed_sync_names_the_rank_the_step_and_dist_timeout_but_a_worker_error_passes_as_it_is() -> None:
    gather = RuntimeError("Timed out waiting 7500ms for recv operation to complete")
    with pytest.raises(RuntimeError) as failure:
        _syncing_trainer(FailingEngine(gather))._sync_weights(3)
    message = str(failure.value)
    assert message.startswith("rank 1: the weight sync after step 3 failed: Timed out waiting 7500ms")
    assert "--dist_timeout_s (7.5 s)" in message and failure.value.__cause__ is gather
    worker = WorkerError("http://w:1", "weight sync to version 3 failed: gone")
    with pytest.raises(WorkerError) as failure:
        _syncing_trainer(FailingEngine(worker))._sync_weights(3)
    assert failure.value is worker
