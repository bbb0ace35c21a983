"""``MasterWeightAdamW``: fused AdamW on fp32 copies of bf16 weights, its fp32 clip, its checkpoint state and its
place in the DeepSpeed engine at ZeRO stage 0.

The reference is torch's own fused AdamW stepping fp32 parameters that start at the same (bf16-representable) values
with the same gradients: the masters must equal it exactly and the model's bf16 weights must be its rounding."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from posttrain.master_weight_adamw import MASTER_WEIGHTS_KEY, MasterWeightAdamW

LR = 1e-3


def bf16_layer() -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(4, 3).to(torch.bfloat16)


def set_grads(params: list[torch.Tensor], step: int) -> None:
    generator = torch.Generator().manual_seed(step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator).to(p.dtype)


def reference(layer: torch.nn.Linear, steps: int, max_norm: float) -> tuple[list[torch.Tensor], list[float]]:
    """fp32 copies of ``layer``'s weights after ``steps`` steps of clip + fused AdamW on the same gradients."""
    params = [p.detach().float().clone().requires_grad_(True) for p in layer.parameters()]
    optimizer = torch.optim.AdamW(params, lr=LR, weight_decay=0.1, fused=True)
    norms = []
    for step in range(steps):
        set_grads(params, step)
        for p in params:  # the model's gradients are bf16: the reference sees their values
            p.grad = p.grad.bfloat16().float()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else math.inf)))
        optimizer.step()
    return [p.detach() for p in params], norms


@pytest.mark.parametrize("max_norm", [0.0, 0.5])
def test_the_masters_step_as_fp32_adamw_and_the_model_holds_their_bf16_rounding(max_norm: float) -> None:
    layer = bf16_layer()
    expected, expected_norms = reference(layer, steps=3, max_norm=max_norm)
    optimizer = MasterWeightAdamW(layer.parameters(), lr=LR, weight_decay=0.1, max_grad_norm=max_norm)
    for step in range(3):
        set_grads(list(layer.parameters()), step)
        optimizer.step()
        assert optimizer._global_grad_norm == pytest.approx(expected_norms[step], rel=1e-6)
    for param, master, want in zip(layer.parameters(), optimizer.masters, expected):
        assert param.dtype == torch.bfloat16 and master.dtype == torch.float32
        torch.testing.assert_close(master, want, atol=0, rtol=0)
        torch.testing.assert_close(param.detach(), want.bfloat16(), atol=0, rtol=0)


def test_an_update_smaller_than_bf16_resolution_accumulates_in_the_master() -> None:
    """A weight of 1.0 moved by lr 1e-4 per step: bf16 alone (spacing 2^-7 near 1) would never move; the master does,
    and the bf16 weight follows once the sum crosses half a spacing."""
    weight = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
    optimizer = MasterWeightAdamW([weight], lr=1e-4, weight_decay=0.0, max_grad_norm=0.0)
    for _ in range(50):
        weight.grad = torch.ones(1, dtype=torch.bfloat16)  # Adam's first steps move by about lr each
        optimizer.step()
    assert optimizer.masters[0].item() == pytest.approx(1.0 - 50e-4, rel=1e-3)
    assert weight.item() == torch.tensor(1.0 - 50e-4).bfloat16().item() != 1.0


def test_a_parameter_without_a_gradient_is_left_alone() -> None:
    layer = bf16_layer()
    bias_before = layer.bias.detach().clone()
    optimizer = MasterWeightAdamW(layer.parameters(), lr=LR, weight_decay=0.1, max_grad_norm=0.0)
    layer.weight.grad = torch.ones_like(layer.weight)
    optimizer.step()
    torch.testing.assert_close(layer.bias.detach(), bias_before, atol=0, rtol=0)
    assert optimizer._global_grad_norm == pytest.approx(math.sqrt(layer.weight.numel()))


def test_a_step_before_any_backward_fails_loudly() -> None:
    optimizer = MasterWeightAdamW(bf16_layer().parameters(), lr=LR, weight_decay=0.0, max_grad_norm=1.0)
    with pytest.raises(RuntimeError, match="no parameter has a gradient"):
        optimizer.step()


def test_a_resumed_optimizer_continues_from_the_fp32_masters_not_their_rounding() -> None:
    layer = bf16_layer()
    optimizer = MasterWeightAdamW(layer.parameters(), lr=LR, weight_decay=0.1, max_grad_norm=0.5)
    for step in range(2):
        set_grads(list(layer.parameters()), step)
        optimizer.step()
    state = copy.deepcopy(optimizer.state_dict())  # as saved: torch's state_dict shares the live tensors
    assert len(state[MASTER_WEIGHTS_KEY]) == 2

    resumed_layer = bf16_layer()  # what a resumed run loads: the saved bf16 weights
    resumed_layer.load_state_dict(layer.state_dict())
    resumed = MasterWeightAdamW(resumed_layer.parameters(), lr=LR, weight_decay=0.1, max_grad_norm=0.5)
    resumed.load_state_dict(state)
    for source, target in ((optimizer, layer), (resumed, resumed_layer)):
        set_grads(list(target.parameters()), 2)
        source.step()
    for master, resumed_master in zip(optimizer.masters, resumed.masters):
        torch.testing.assert_close(resumed_master, master, atol=0, rtol=0)


def test_loading_a_state_without_masters_names_the_missing_key() -> None:
    plain = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=LR)
    optimizer = MasterWeightAdamW([torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16))], lr=LR,
                                  weight_decay=0.0, max_grad_norm=0.0)
    with pytest.raises(KeyError, match=MASTER_WEIGHTS_KEY):
        optimizer.load_state_dict(plain.state_dict())


def test_the_lr_schedule_sets_the_rate_the_masters_step_with() -> None:
    weight = torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
    optimizer = MasterWeightAdamW([weight], lr=1e-2, weight_decay=0.0, max_grad_norm=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.0 if s == 0 else 1.0)
    weight.grad = torch.ones(1, dtype=torch.bfloat16)
    optimizer.step()
    assert optimizer.masters[0].item() == 0.0  # lr 0 at step 0
    scheduler.step()
    weight.grad = torch.ones(1, dtype=torch.bfloat16)
    optimizer.step()
    assert optimizer.masters[0].item() == pytest.approx(-1e-2, rel=1e-3)
