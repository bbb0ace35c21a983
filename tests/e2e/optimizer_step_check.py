"""Do our DeepSpeed-wrapped model's optimizer steps (``posttrain.dist.optimizer_step``) equal torch AdamW after clipping
once, and is the gradient norm they report torch's? Run on CPU (gloo) like
the entry point (on a machine with a GPU, hide it: ``CUDA_VISIBLE_DEVICES=``):

    python tests/e2e/optimizer_step_check.py OUT.json                    # one rank
    deepspeed --num_gpus 2 tests/e2e/optimizer_step_check.py OUT.json    # two ranks (OUT.rank0.json, OUT.rank1.json)

For each ZeRO stage 0-3 it builds the same small MLP twice: one wrapped by ``posttrain.dist.initialize_deepspeed_model``
(the trainer's optimizer, clipping and LR schedule), one plain copy for the reference. Three steps of a mean squared
error on seeded batches: each rank trains the DeepSpeed copy on its share of the batch (DeepSpeed averages the
gradients over ranks), the reference trains on the whole batch with ``torch.nn.utils.clip_grad_norm_`` and the
single-tensor ``torch.optim.AdamW`` (same lr, betas, eps, weight decay). Writes, per stage, the largest parameter
difference, the same reference without clipping's difference (so the comparison can tell clipping from none), the
gradient norms before clipping (``clip_grad_norm_``'s return) and those ``optimizer_step`` reported, and the
implementation flags of the torch optimizer DeepSpeed steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from posttrain.config import TrainConfig
from posttrain.dist import (
    gathered_named_parameters,
    init_distributed,
    initialize_deepspeed_model,
    optimizer_step,
)

STEPS = 3
BATCH = 4
MAX_GRAD_NORM = 0.05
GRAD_SCALES = (1.0, 8.0, 0.5)
"""Each step's targets are scaled so the gradient norms differ from step to step: Adam is nearly invariant to a
gradient scale shared by every step, so clipping only shows in the parameters when the clip factors differ."""


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + step)
    x = torch.randn(BATCH, 6, generator=generator)
    return x, GRAD_SCALES[step] * torch.randn(BATCH, 3, generator=generator)


def reference(model: torch.nn.Module, config: TrainConfig, clip: bool) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Parameters after ``STEPS`` steps of plain torch on the whole batch, and the gradient norm before each clip."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=False)
    norms = []
    for step in range(STEPS):
        x, y = batch(step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm if clip else float("inf"))
        norms.append(float(norm))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {n: p.detach().clone() for n, p in model.named_parameters()}, norms


def deepspeed_steps(model: torch.nn.Module, config: TrainConfig, rank: int,
                    world_size: int) -> tuple[dict, list[float | None], dict]:
    """Parameters after ``STEPS`` steps of the DeepSpeed-wrapped ``model`` on this rank's share of each batch, the
    gradient norm each step reported, and the flags of the torch optimizer inside."""
    engine = initialize_deepspeed_model(model, config, world_size)
    if engine.gradient_accumulation_steps() != 1:
        raise RuntimeError(f"expected one micro-batch per step, got {engine.gradient_accumulation_steps()}")
    share = BATCH // world_size
    norms = []
    for step in range(STEPS):
        x, y = batch(step)
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        engine.backward(torch.nn.functional.mse_loss(engine(x), y))
        norms.append(optimizer_step(engine, config))
    inner = getattr(engine.optimizer, "optimizer", engine.optimizer)  # ZeRO wraps the torch optimizer
    flags = {"class": type(inner).__name__, "fused": inner.defaults.get("fused"),
             "foreach": inner.defaults.get("foreach")}
    params = {n: p.clone() for n, p in gathered_named_parameters(engine.module, config.zero_stage)}
    return params, norms, flags


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    if a.keys() != b.keys():
        raise KeyError(f"parameter names differ: {sorted(a.keys() ^ b.keys())}")
    return max(float((a[n] - b[n]).abs().max()) for n in a)


def main(out: Path) -> None:
    info = init_distributed()
    if info.device.type != "cpu":
        raise RuntimeError(f"optimizer_step_check compares CPU steps (got {info.device}): set CUDA_VISIBLE_DEVICES=''")
    results = {}
    for stage in (0, 1, 2, 3):
        config = TrainConfig(model="unused", output_dir="unused", steps=STEPS, prompts_per_step=2, group_size=2,
                             micro_batch_size=BATCH, lr=0.01, weight_decay=0.1, max_grad_norm=MAX_GRAD_NORM,
                             zero_stage=stage, lr_scheduler="constant", warmup_steps=0, precision="fp32")
        clipped, norms = reference(mlp(), config, clip=True)
        unclipped, _ = reference(mlp(), config, clip=False)
        ours, reported_norms, flags = deepspeed_steps(mlp(), config, info.rank, info.world_size)
        results[str(stage)] = {"max_difference": max_difference(ours, clipped),
                               "unclipped_reference_difference": max_difference(unclipped, clipped),
                               "grad_norms": norms, "reported_grad_norms": reported_norms, "optimizer": flags}
    target = out if info.world_size == 1 else out.with_suffix(f".rank{info.rank}.json")
    target.write_text(json.dumps({"world_size": info.world_size, "stages": results}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(next(a for a in sys.argv[1:] if not a.startswith("--local_rank"))))
