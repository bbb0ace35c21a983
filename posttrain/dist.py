"""DeepSpeed and torch.distributed set-up: process group, ZeRO config, the DeepSpeed-wrapped trained models.

Works the same under the ``deepspeed`` launcher (which sets RANK/WORLD_SIZE/LOCAL_RANK and passes
``--local_rank``) and as a plain single process (``python posttrain/train.py``): the defaults below
make a world of one. On CPU the process group uses gloo; on CUDA, NCCL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist

from posttrain.config import TrainConfig
from posttrain.engines.weight_sync.rendezvous import free_port
from posttrain.master_weight_adamw import MasterWeightAdamW


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(timeout_s: float | None = None) -> DistInfo:
    """Join (or create) the process group; idempotent. ``timeout_s`` bounds every collective of the group
    (None: DeepSpeed's default), so the other ranks fail within it when one rank fails."""
    from datetime import timedelta

    import deepspeed

    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    cuda = torch.cuda.is_available()
    if not torch_dist.is_initialized():
        timeout = {} if timeout_s is None else {"timeout": timedelta(seconds=timeout_s)}
        deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo", verbose=False, **timeout)
        if not cuda:
            _unlink_shm_allreduce_buffer(torch_dist.get_rank())
    local_rank = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    return DistInfo(torch_dist.get_rank(), torch_dist.get_world_size(), local_rank, device)


def shm_allreduce_buffer(rank: int) -> Path:
    """The POSIX shared-memory file of this rank's workspace for DeepSpeed's CPU all-reduce (its
    ``shm_initialize``: ``deepspeed_allreduce_buffer_UID_MASTERADDR_MASTERPORT_RANK``, 69 MB)."""
    return Path("/dev/shm") / (f"deepspeed_allreduce_buffer_{os.getuid()}_{os.environ.get('MASTER_ADDR', '')}_"
                               f"{os.environ.get('MASTER_PORT', '')}_{rank}")


def _unlink_shm_allreduce_buffer(rank: int) -> None:
    """Remove this rank's all-reduce buffer from /dev/shm once every rank has mapped every other's.

    DeepSpeed creates the buffer at start-up and never unlinks it, so each rank of each run on CPU used to
    leave 69 MB of RAM-backed /dev/shm behind until a reboot (a test suite left gigabytes). After the barrier
    every rank has opened its peers' buffers (``shm_initialize`` waits for each), so the name can go: the
    mappings stay valid until the processes exit, and then the kernel frees the memory."""
    torch_dist.barrier()
    shm_allreduce_buffer(rank).unlink(missing_ok=True)


def set_cpu_threads(requested: int) -> int:
    """Intra-op threads for this rank: explicit, else $OMP_NUM_THREADS, else an even share of the cores.

    Tiny models issue many microsecond-sized ops; oversubscribed thread pools (more threads than
    free cores) make each of them orders of magnitude slower, so ranks split the cores evenly.
    """
    if requested <= 0:
        env = os.environ.get("OMP_NUM_THREADS", "")
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        requested = int(env) if env.isdigit() and int(env) > 0 else max(1, (os.cpu_count() or 1) // local_ranks)
    torch.set_num_threads(requested)
    return requested


def deepspeed_config(config: TrainConfig, world_size: int) -> dict[str, Any]:
    """The DeepSpeed JSON config implied by a TrainConfig."""
    micro = min(config.micro_batch_size, config.per_rank_samples(world_size))
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": config.grad_accum_steps(world_size),
        "gradient_clipping": (0.0 if trainer_clips_gradients(config) or uses_master_weight_adamw(config)
                              else config.max_grad_norm),
        "zero_optimization": {"stage": config.zero_stage},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if config.precision == "bf16" and not uses_master_weight_adamw(config):
        ds["bf16"] = {"enabled": True}
    if config.zero_stage == 3:
        ds["zero_optimization"].update({"stage3_param_persistence_threshold": 0,
                                        "stage3_gather_16bit_weights_on_model_save": True})
    return ds


def uses_master_weight_adamw(config: TrainConfig) -> bool:
    """Whether the trained models step ``MasterWeightAdamW`` (bf16 at ZeRO stage 0): it keeps the fp32 master weights,
    clips in fp32 and reports the norm itself, so DeepSpeed runs with its ``bf16`` section off and no clipping of its
    own. At stages 1-3 DeepSpeed's ZeRO optimizer shards the fp32 masters and keeps them."""
    return config.zero_stage == 0 and config.precision == "bf16"


def trainer_clips_gradients(config: TrainConfig) -> bool:
    """Whether ``optimizer_step`` clips the gradients itself (DeepSpeed's ``gradient_clipping`` is then 0).

    DeepSpeed keeps the global gradient norm it clips with (``get_global_grad_norm``) only where it wraps the client
    optimizer: ZeRO stages 1-3, which shard the gradients and compute the norm anyway (in bf16 at stage 0,
    ``MasterWeightAdamW`` clips and reports its own norm the same way). At ZeRO stage 0 in fp32 it steps the client AdamW directly and clips in ``clip_fp32_gradients``,
    which discards the norm it computes, so ``get_global_grad_norm()`` stays None. There the trainer clips with
    ``torch.nn.utils`` instead: the same one norm and one scaling pass over the same (already all-reduced) gradients,
    now kept. DeepSpeed's clip also all-reduced that norm over the data-parallel ranks (for its own MoE layers, whose
    gradients differ by rank); posttrain builds none, so every rank's norm is already the same and that is skipped."""
    return config.zero_stage == 0 and config.precision == "fp32"


def optimizer_step(deepspeed_model: Any, config: TrainConfig) -> float | None:
    """``deepspeed_model.step()`` after a micro-batch's ``backward``; on the step that updates the weights (the
    gradient accumulation boundary) the gradients are clipped once at ``config.max_grad_norm`` (0: not clipped) and
    their global 2-norm before clipping is returned; None on the micro-steps that only accumulate.

    Where ``trainer_clips_gradients``, the norm is taken here, after DeepSpeed's ``backward`` has all-reduced the
    boundary micro-batch's gradients, so every rank gets the same global norm; elsewhere DeepSpeed clips inside
    ``step()`` and reports the norm. A boundary step that yields no norm raises rather than logging nothing."""
    boundary = deepspeed_model.is_gradient_accumulation_boundary()
    norm = None
    if boundary and trainer_clips_gradients(config):
        params = [p for p in deepspeed_model.module.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        if config.max_grad_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(params, config.max_grad_norm, norm)
    deepspeed_model.step()
    if not boundary:
        return None
    if norm is None:
        norm = deepspeed_model.get_global_grad_norm()
    if norm is None:
        raise RuntimeError(f"DeepSpeed reported no gradient norm after an optimizer step (zero_stage "
                           f"{config.zero_stage}, precision {config.precision}): train/grad_norm would go unlogged")
    return float(norm)


def lr_lambda(config: TrainConfig) -> Callable[[int], float]:
    """Multiplier of the peak learning rate at optimizer step ``s`` (warm-up, then the schedule)."""
    import math

    total = config.steps * config.mu

    def factor(s: int) -> float:
        if config.warmup_steps and s < config.warmup_steps:
            return (s + 1) / config.warmup_steps
        progress = (s - config.warmup_steps) / max(1, total - config.warmup_steps)
        if config.lr_scheduler == "linear":
            return max(0.0, 1.0 - progress)
        if config.lr_scheduler == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def initialize_deepspeed_model(model: torch.nn.Module, config: TrainConfig, world_size: int,
                               lr: float | None = None) -> Any:
    """``model`` wrapped by DeepSpeed (the trainer's "deepspeed model"), with AdamW (peak learning rate ``lr``,
    default ``config.lr``) and the run's LR schedule.

    A plain torch AdamW is passed in so nothing has to be JIT-compiled on CPU; DeepSpeed keeps its
    state in checkpoints like its own optimizers. It is torch's fused kernel (``fused=True``, on CPU and CUDA
    alike; what transformers' Trainer, and so TRL, defaults to with torch >= 2.8): one pass over each tensor's
    parameter, gradient and two moments instead of the single-tensor loop's eight element-wise ops per tensor
    (``lerp_``, ``sqrt``, ``addcdiv_``, ..., each a full pass over memory), the same AdamW update, and a faster
    DeepSpeed ``step()`` than the loop or a CPU's ``foreach=True`` (measured on SmolLM2-135M in
    ``benchmarks/grpo_vs_trl.md``, "The optimizer phase, measured apart"; ``benchmarks/bench_optimizer_phase.py``). The gradients are clipped once before this step, by DeepSpeed
    (``gradient_clipping``) or, where ``trainer_clips_gradients``, by ``optimizer_step``: step the model with it.
    In bf16 at ZeRO stage 0 it is ``MasterWeightAdamW`` (the same fused AdamW on fp32 master weights, clipping in
    fp32 itself) in place of DeepSpeed's bf16 optimizer (``uses_master_weight_adamw``).
    """
    import deepspeed

    params = [p for p in model.parameters() if p.requires_grad]
    peak_lr = config.lr if lr is None else lr
    if uses_master_weight_adamw(config):
        optimizer: torch.optim.Optimizer = MasterWeightAdamW(params, lr=peak_lr, weight_decay=config.weight_decay,
                                                             max_grad_norm=config.max_grad_norm)
    else:
        optimizer = torch.optim.AdamW(params, lr=peak_lr, weight_decay=config.weight_decay, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(config))
    deepspeed_model, _, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, lr_scheduler=scheduler, config=deepspeed_config(config, world_size)
    )
    return deepspeed_model


def gathered_named_parameters(model: torch.nn.Module, zero_stage: int) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield full (un-partitioned) parameters one at a time; under ZeRO-3 each is gathered in turn."""
    if zero_stage != 3:
        for name, param in model.named_parameters():
            yield name, param.detach()
        return
    import deepspeed

    for name, param in model.named_parameters():
        with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
            yield name, param.detach()


def gathered_parameter_buckets(model: torch.nn.Module, zero_stage: int,
                               buckets: list[list[str]]) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Yield full parameters a bucket at a time (``buckets``: lists of ``named_parameters`` names, e.g.
    one decoder layer each). Under ZeRO-3 each bucket is gathered in one collective and released when
    the consumer asks for the next one, so memory holds one bucket, not the whole model; every rank
    must iterate the same buckets in the same order. Unknown names raise naming the parameter."""
    params = dict(model.named_parameters())
    for bucket in buckets:
        missing = [n for n in bucket if n not in params]
        if missing:
            raise KeyError(f"gathered_parameter_buckets: the model has no parameter {missing[0]!r}")
        tensors = [params[n] for n in bucket]
        if zero_stage != 3:
            yield [(n, p.detach()) for n, p in zip(bucket, tensors)]
            continue
        import deepspeed

        with deepspeed.zero.GatheredParameters(tensors, modifier_rank=None):
            yield [(n, p.detach()) for n, p in zip(bucket, tensors)]


def all_reduce_mean(values: dict[str, float], world_size: int) -> dict[str, float]:
    """Average scalar metrics over ranks (every rank must pass the same keys)."""
    if world_size == 1 or not values:
        return values
    keys = sorted(values)
    tensor = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
    torch_dist.all_reduce(tensor)
    return {k: v / world_size for k, v in zip(keys, tensor.tolist())}


def all_reduce_sum(values: list[float], world_size: int) -> list[float]:
    if world_size == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    torch_dist.all_reduce(tensor)
    return tensor.tolist()


def barrier(world_size: int) -> None:
    if world_size > 1:
        torch_dist.barrier()
