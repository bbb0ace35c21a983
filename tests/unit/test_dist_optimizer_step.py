"""``posttrain.dist.optimizer_step``: one clip at ``max_grad_norm`` and the norm before it, on every ZeRO stage.

A stand-in engine holds one parameter whose gradient is (3, 4): norm 5, clipped at 1 to (0.6, 0.8)."""

from __future__ import annotations

import pytest
import torch

from posttrain.config import TrainConfig
from posttrain.dist import deepspeed_config, optimizer_step, trainer_clips_gradients, uses_master_weight_adamw


class StandInEngine:
    """What ``optimizer_step`` uses of a DeepSpeed engine; ``reported_norm`` is its ``get_global_grad_norm()``."""

    def __init__(self, boundary: bool = True, reported_norm: float | None = None) -> None:
        self.module = torch.nn.Linear(2, 1, bias=False)
        self.module.weight.grad = torch.tensor([[3.0, 4.0]])
        self.boundary = boundary
        self.reported_norm = reported_norm
        self.grads_at_step: list[torch.Tensor] = []

    def is_gradient_accumulation_boundary(self) -> bool:
        return self.boundary

    def step(self) -> None:
        self.grads_at_step.append(self.module.weight.grad.clone())

    def get_global_grad_norm(self) -> float | None:
        return self.reported_norm


def test_at_stage_0_fp32_the_trainer_clips_once_and_returns_the_norm_before_clipping() -> None:
    config = TrainConfig(zero_stage=0, precision="fp32", max_grad_norm=1.0)
    assert trainer_clips_gradients(config) and deepspeed_config(config, 1)["gradient_clipping"] == 0.0
    engine = StandInEngine(reported_norm=None)  # DeepSpeed's own at stage 0: it discards the norm
    assert optimizer_step(engine, config) == pytest.approx(5.0, abs=1e-6)
    assert len(engine.grads_at_step) == 1
    torch.testing.assert_close(engine.grads_at_step[0], torch.tensor([[0.6, 0.8]]), atol=1e-6, rtol=0)


def test_with_clipping_off_the_norm_is_still_returned_and_the_gradient_is_untouched() -> None:
    engine = StandInEngine()
    assert optimizer_step(engine, TrainConfig(zero_stage=0, max_grad_norm=0.0)) == pytest.approx(5.0, abs=1e-6)
    torch.testing.assert_close(engine.grads_at_step[0], torch.tensor([[3.0, 4.0]]), atol=0, rtol=0)


def test_a_micro_step_that_only_accumulates_neither_clips_nor_reports() -> None:
    engine = StandInEngine(boundary=False)
    assert optimizer_step(engine, TrainConfig(zero_stage=0, max_grad_norm=1.0)) is None
    torch.testing.assert_close(engine.grads_at_step[0], torch.tensor([[3.0, 4.0]]), atol=0, rtol=0)


@pytest.mark.parametrize("stage,precision", [(1, "fp32"), (2, "fp32"), (3, "fp32"), (2, "bf16")])
def test_where_deepspeed_wraps_the_optimizer_it_clips_and_its_norm_is_returned(stage: int, precision: str) -> None:
    config = TrainConfig(zero_stage=stage, precision=precision, max_grad_norm=1.0)
    assert not trainer_clips_gradients(config) and deepspeed_config(config, 1)["gradient_clipping"] == 1.0
    engine = StandInEngine(reported_norm=7.0)
    assert optimizer_step(engine, config) == 7.0
    torch.testing.assert_close(engine.grads_at_step[0], torch.tensor([[3.0, 4.0]]), atol=0, rtol=0)  # not ours


def test_an_optimizer_step_without_a_norm_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match=r"no gradient norm after an optimizer step \(zero_stage 2, precision fp32\)"):
        optimizer_step(StandInEngine(reported_norm=None), TrainConfig(zero_stage=2))


def test_bf16_at_stage_0_leaves_clipping_and_the_fp32_masters_to_master_weight_adamw() -> None:
    config = TrainConfig(zero_stage=0, precision="bf16", max_grad_norm=1.0)
    ds = deepspeed_config(config, 1)
    assert uses_master_weight_adamw(config) and not trainer_clips_gradients(config)
    assert ds["gradient_clipping"] == 0.0 and "bf16" not in ds  # DeepSpeed neither clips nor casts
    engine = StandInEngine(reported_norm=7.0)  # MasterWeightAdamW's norm, read through DeepSpeed
    assert optimizer_step(engine, config) == 7.0
    torch.testing.assert_close(engine.grads_at_step[0], torch.tensor([[3.0, 4.0]]), atol=0, rtol=0)
    assert not uses_master_weight_adamw(TrainConfig(zero_stage=2, precision="bf16"))
    assert deepspeed_config(TrainConfig(zero_stage=2, precision="bf16"), 1)["bf16"] == {"enabled": True}
