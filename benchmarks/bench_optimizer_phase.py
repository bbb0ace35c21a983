"""The optimizer phase of a training step on its own: our DeepSpeed ``step()`` against plain torch AdamW as TRL runs it.

Builds one model (default SmolLM2-135M), fills its gradients with seeded random values (the same values for every
variant in a round, untimed) and times the optimizer phase of each variant, alternating the variants round by round
(the order rotates each round) in one process, on ``--threads`` threads. Every variant updates the same parameters
from its own AdamW state (lr, betas, eps, weight decay and the clipping norm are the same for all):

- ``ours``: the trainer's own path, ``posttrain.dist.initialize_deepspeed_model`` (DeepSpeed ZeRO-0 fp32, one rank,
  gloo) stepped by ``posttrain.dist.optimizer_step``, which clips (at ZeRO-0 fp32 itself, with ``torch.nn.utils``,
  keeping the norm; DeepSpeed's ``gradient_clipping`` is 0 there) and calls ``engine.step()``, which steps AdamW,
  drops the gradients and steps the LR schedule;
- ``ours-single-tensor``: the same DeepSpeed engine built with ``AdamW(foreach=False)``, what the trainer used before
  (the "before" of the fix);
- ``deepspeed-bf16`` (``--precision bf16`` only): the same engine with DeepSpeed's own ``bf16`` section on (its
  ``FP16_UnfusedOptimizer`` around the fused AdamW, clipping in DeepSpeed), what the trainer ran in bf16 before
  ``posttrain.master_weight_adamw``;
- ``torch-single-tensor``, ``torch-foreach``, ``torch-fused``: ``torch.nn.utils.clip_grad_norm_`` then
  ``torch.optim.AdamW`` with that implementation, ``zero_grad(set_to_none=True)`` and ``LambdaLR.step()``;
  ``torch-fused`` is what transformers' Trainer (so TRL's ``GRPOTrainer``) runs by default (``adamw_torch_fused``).

``--precision bf16`` times the trainer's bf16 path: the DeepSpeed variants step a bf16 copy of the model (``ours`` is
then ``MasterWeightAdamW``: fp32 master weights, fused AdamW, one copy back), the torch variants the fp32 model, as
TRL's bf16 autocast keeps its weights and AdamW in fp32; both get the same gradient values each round.

Each step's seconds are split by pass-through timers (``benchmarks.grpo_phases.PhaseClock``; no computation changes)
into ``clip`` (for the DeepSpeed variants, ``optimizer_step`` outside ``engine.step()``), ``adamw``
(``optimizer.step()`` alone),
``zero_grad``, ``scheduler`` and, for the DeepSpeed variants, ``other`` (the rest of ``engine.step()``). ``total`` is
the whole phase, the interval ``bench_grpo_vs_trl.py`` times on our side. ``--profile`` adds cProfile's top functions
of one step of each DeepSpeed variant.

Memory: the model and its gradients (2 x 4 bytes per parameter) plus two fp32 moments per variant (8 bytes per
parameter each): about 1.1 GB + 1.1 GB per variant for SmolLM2-135M.
"""

from __future__ import annotations

import copy
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.grpo_phases import PhaseClock
from benchmarks.matmul_peak import cpu_name

VARIANTS = ("ours", "ours-single-tensor", "deepspeed-bf16", "torch-single-tensor", "torch-foreach", "torch-fused")
DEEPSPEED_VARIANTS = ("ours", "ours-single-tensor", "deepspeed-bf16")
TORCH_IMPLEMENTATIONS = {"torch-single-tensor": {"foreach": False}, "torch-foreach": {"foreach": True},
                         "torch-fused": {"fused": True}}
PARTS = ("clip", "adamw", "zero_grad", "scheduler")


def _train_config(args: Any) -> Any:
    """A TrainConfig whose DeepSpeed config makes every ``step()`` an optimizer step (one micro-batch per step)."""
    from posttrain.config import TrainConfig

    return TrainConfig(model=args.model, output_dir="unused", steps=1000, prompts_per_step=1, group_size=1,
                       micro_batch_size=1, lr=args.lr, weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm,
                       zero_stage=0, lr_scheduler="constant", warmup_steps=0, precision=args.precision)


def _deepspeed_variant(model: torch.nn.Module, config: Any, variant: str, clock: PhaseClock) -> Callable[[], None]:
    """``optimizer_step`` of a DeepSpeed engine over ``model``: the trainer's own (``ours``:
    ``initialize_deepspeed_model``), the same engine around the single-tensor AdamW the trainer used before
    (``ours-single-tensor``), or DeepSpeed's bf16 optimizer around the fused AdamW (``deepspeed-bf16``)."""
    import deepspeed

    from posttrain.dist import deepspeed_config, initialize_deepspeed_model, lr_lambda, optimizer_step

    if variant == "ours":
        engine = initialize_deepspeed_model(model, config, 1)
    else:
        params = [p for p in model.parameters() if p.requires_grad]
        implementation = {"foreach": False} if variant == "ours-single-tensor" else {"fused": True}
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay, **implementation)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(config))
        ds = deepspeed_config(config, 1)
        if variant == "deepspeed-bf16":
            ds.update({"bf16": {"enabled": True}, "gradient_clipping": config.max_grad_norm})
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds)
    if engine.gradient_accumulation_steps() != 1:
        raise RuntimeError(f"expected one micro-batch per step, got {engine.gradient_accumulation_steps()}")
    clock.wrap(engine, "step", "engine_step")  # not a part: what it leaves of optimizer_step is the clip
    clock.wrap(engine.optimizer, "step", "adamw")
    clock.wrap(engine, "zero_grad", "zero_grad")
    clock.wrap(engine.lr_scheduler, "step", "scheduler")

    def step() -> None:
        start = time.perf_counter()
        optimizer_step(engine, config)
        clock.seconds["clip"] += time.perf_counter() - start - clock.seconds.pop("engine_step")

    return step


def _torch_variant(params: list[torch.nn.Parameter], config: Any, implementation: dict[str, bool],
                   clock: PhaseClock) -> Callable[[], None]:
    """Clip, AdamW step, drop the gradients, LR schedule step: the optimizer phase of transformers' Trainer."""
    from posttrain.dist import lr_lambda

    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay, **implementation)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(config))
    foreach = implementation.get("foreach")

    def step() -> None:
        clock.start("clip")
        torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm, foreach=foreach)
        clock.stop("clip")
        clock.start("adamw")
        optimizer.step()
        clock.stop("adamw")
        clock.start("zero_grad")
        optimizer.zero_grad(set_to_none=True)
        clock.stop("zero_grad")
        clock.start("scheduler")
        scheduler.step()
        clock.stop("scheduler")

    return step


def _fill_gradients(params: list[torch.nn.Parameter], low_precision: list[torch.nn.Parameter], seed: int,
                    scale: float) -> None:
    """Seeded random gradients on ``params``; ``low_precision`` (a bf16 copy of the same parameters, or empty) gets the
    same values in its dtype."""
    generator = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.empty_like(p).normal_(generator=generator).mul_(scale)
    for p, source in zip(low_precision, params):
        p.grad = source.grad.to(p.dtype)


def _top_functions(step: Callable[[], None], count: int) -> list[dict[str, Any]]:
    profile = cProfile.Profile()
    profile.enable()
    step()
    profile.disable()
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:count]  # by own (total) time
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": calls, "tottime_s": tottime,
             "cumtime_s": cumtime} for (file, line, name), (_, calls, tottime, cumtime, _) in rows]


def main(argv: list[str] | None = None) -> int:
    """Time the optimizer phase of our DeepSpeed step against plain torch AdamW variants, alternating in one process."""
    from posttrain.common.cli_help import CommandParser
    from posttrain.dist import init_distributed
    from posttrain.models.loading import load_causal_lm
    from posttrain.models.pretrained import resolve_model_name

    parser = CommandParser(description=main.__doc__)
    parser.add_argument("--model", default="smollm2-135m", help="Model path or packaged alias.")
    parser.add_argument("--variants", default="ours,ours-single-tensor,torch-fused",
                        help=f"Comma-separated, from {', '.join(VARIANTS)} (each adds its AdamW state in memory).")
    parser.add_argument("--rounds", type=int, default=15, help="Timed rounds (each times every variant once).")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed rounds first (AdamW allocates its state).")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads.")
    parser.add_argument("--lr", type=float, default=1e-6, help="AdamW learning rate.")
    parser.add_argument("--weight_decay", type=float, default=0.0, help="AdamW weight decay.")
    parser.add_argument("--max_grad_norm", type=float, default=1.0, help="Gradient clipping norm.")
    parser.add_argument("--grad_scale", type=float, default=1e-3,
                        help="Standard deviation of the random gradients (SmolLM2: a norm of ~12, so clipping acts).")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: the DeepSpeed variants step a bf16 copy of the model (the trainer's --precision "
                             "bf16), the torch variants the fp32 model (TRL's bf16 autocast).")
    parser.add_argument("--profile", action="store_true", help="Add cProfile's top functions of one DeepSpeed step.")
    parser.add_argument("--out", type=Path, default=None, help="Results JSON (written after every round).")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown or variants}; choose from {', '.join(VARIANTS)}")
    if "deepspeed-bf16" in variants and args.precision != "bf16":
        parser.error("--variants deepspeed-bf16 needs --precision bf16")

    # The pass-through timer around each optimizer's step makes LambdaLR warn that step was overridden; it still runs.
    warnings.filterwarnings("ignore", message="Seems like `optimizer.step\\(\\)` has been overridden")
    torch.set_num_threads(args.threads)
    init_distributed()
    load_before = os.getloadavg()
    model = load_causal_lm(resolve_model_name(args.model))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    deepspeed_model = copy.deepcopy(model).to(torch.bfloat16) if args.precision == "bf16" else model
    low_precision = [p for p in deepspeed_model.parameters() if p.requires_grad] if args.precision == "bf16" else []
    config = _train_config(args)
    clocks = {v: PhaseClock() for v in variants}
    steps: dict[str, Callable[[], None]] = {}
    for v in variants:
        if v in TORCH_IMPLEMENTATIONS:
            steps[v] = _torch_variant(params, config, TORCH_IMPLEMENTATIONS[v], clocks[v])
        else:
            steps[v] = _deepspeed_variant(deepspeed_model, config, v, clocks[v])

    seconds: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    report: dict[str, Any] = {
        "command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "model": args.model, "parameters": sum(p.numel() for p in params), "tensors": len(params),
        "threads": args.threads, "torch": torch.__version__, "cpu_count": os.cpu_count(), "cpu": cpu_name(),
        "precision": args.precision,
        "variants": variants, "rounds": args.rounds, "warmup_rounds": args.warmup,
        "hyperparameters": {"lr": args.lr, "weight_decay": args.weight_decay, "max_grad_norm": args.max_grad_norm,
                            "grad_scale": args.grad_scale},
        "load_average_before": load_before, "partial": True,
    }
    for round_index in range(args.warmup + args.rounds):
        shift = round_index % len(variants)
        for v in variants[shift:] + variants[:shift]:
            _fill_gradients(params, low_precision, round_index, args.grad_scale)
            start = time.perf_counter()
            steps[v]()
            total = time.perf_counter() - start
            parts = {p: clocks[v].seconds.get(p, 0.0) for p in PARTS}
            clocks[v].seconds.clear()
            if round_index >= args.warmup:
                seconds[v].append({"total": total, **parts, "other": total - sum(parts.values())})
        if round_index >= args.warmup and args.out is not None:
            _write(args.out, report, seconds)
    if args.profile:
        report["profile_top_tottime"] = {}
        for v in variants:
            if v in DEEPSPEED_VARIANTS:
                _fill_gradients(params, low_precision, 0, args.grad_scale)
                report["profile_top_tottime"][v] = _top_functions(steps[v], 12)
    report["partial"] = False
    report["load_average_after"] = os.getloadavg()
    summary = _write(args.out, report, seconds)
    print(json.dumps(summary, indent=2))
    return 0


def summarize(seconds: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Per variant (``seconds``: its steps' parts, one step per round, the rounds in the same order for every
    variant): the median of every part and, against the first variant, the median over rounds of the same round's
    ratio (robust to load that drifts between rounds) of the whole phase and of ``adamw`` alone."""
    summary: dict[str, Any] = {}
    for v, rows in seconds.items():
        if rows:
            summary[v] = {f"median_{k}_s": statistics.median(r[k] for r in rows) for k in rows[0]}
            summary[v]["timed_steps"] = len(rows)
    base = next(iter(seconds))
    for v, entry in summary.items():
        if len(seconds[v]) != len(seconds[base]):
            raise ValueError(f"variant {v!r} has {len(seconds[v])} rounds, {base!r} {len(seconds[base])}")
        for part in ("total", "adamw"):
            pairs = zip(seconds[v], seconds[base])
            entry[f"median_round_ratio_{part}_over_{base}"] = statistics.median(a[part] / b[part] for a, b in pairs)
    return summary


def _write(out: Path | None, report: dict[str, Any], seconds: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """``summarize(seconds)`` and the steps into ``report``, written to ``out`` when given; returns the summary."""
    report["summary"] = summary = summarize(seconds)
    report["steps"] = seconds
    if out is not None:
        report["load_average_latest"] = os.getloadavg()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
