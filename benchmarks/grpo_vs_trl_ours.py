"""Our side of ``bench_grpo_vs_trl.py``: one worker run of ``posttrain.trainer.Trainer`` (GRPO), the shipped code
with pass-through instrumentation only (token counts, phase timers), timed step by step.

``ours-server`` starts a ``posttrain rollout-worker`` (vLLM's OpenAI server) on ``--server_cpus`` (``taskset``) and
trains with ``--rollout vllm-remote`` and async rollouts (staleness 1) in this process, which the driver runs on
``--trainer_cpus``: the placement of TRL's server mode (``trl-server``). Every vLLM engine here gets the run's
``VLLMCPUSettings``: through the environment (KV cache, thread binding) and, for compiled mode, ``enforce_eager``:
the worker's command line (``--no-enforce-eager`` after our ``--enforce-eager``) or the colocated engine's
``vllm.LLM`` arguments (``VLLMRolloutEngine.from_pretrained``'s ``llm_kwargs``)."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.grpo_vs_trl_server import run_with_server
from benchmarks.grpo_vs_trl_sides import (
    SERVER_SIDES,
    SIDE_OVERRIDES,
    VLLMCPUSettings,
    current_rss_mb,
    process_readings,
    vllm_dtype,
    worker_server_cpus,
)


def worker_ours(args: argparse.Namespace) -> dict[str, Any]:
    """One run of our side ``args.worker``; a server side runs against its own rollout worker."""
    settings = VLLMCPUSettings.from_args(args)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-ours-", ignore_cleanup_errors=True) as out_dir:
        if args.worker not in SERVER_SIDES:
            if args.rollout == "vllm" and args.device == "cpu" and not settings.eager:
                _compile_colocated_engine()
            return _run(args, args.rollout, out_dir)
        return run_with_server(lambda port, log: _start_rollout_worker(args, settings, port, log),
                               lambda url: _run(args, f"vllm-remote:{url}", out_dir))


def rollout_worker_args(precision: str, settings: VLLMCPUSettings) -> list[str]:
    """``posttrain rollout-worker`` arguments after ``--model`` and ``--port``: the trainer's dtype, and vLLM's
    compiled mode (after ``--``, so it follows and overrides the worker's CPU default ``--enforce-eager``)."""
    return ["--dtype", vllm_dtype(precision), "--", *([] if settings.eager else ["--no-enforce-eager"])]


def _start_rollout_worker(args: argparse.Namespace, settings: VLLMCPUSettings, port: int, log: Path) -> Any:
    from posttrain.engines.worker import spawn_rollout_worker

    env = settings.environment()
    if args.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(args.server_gpu)
    return spawn_rollout_worker(args.model_dir, port, log, extra_args=rollout_worker_args(args.precision, settings),
                                env=env, cpus=worker_server_cpus(args))


def _compile_colocated_engine() -> None:
    """Our colocated CPU engine in vLLM's compiled mode: ``enforce_eager=False`` through
    ``VLLMRolloutEngine.from_pretrained``'s ``llm_kwargs`` (passed to ``vllm.LLM`` unchanged, after our CPU
    default ``enforce_eager=True``)."""
    from posttrain.engines.vllm import VLLMRolloutEngine

    from_pretrained = VLLMRolloutEngine.from_pretrained

    def compiled(*args: Any, **kwargs: Any) -> VLLMRolloutEngine:
        return from_pretrained(*args, **kwargs, enforce_eager=False)

    VLLMRolloutEngine.from_pretrained = staticmethod(compiled)


def _run(args: argparse.Namespace, rollout: str, out_dir: str) -> dict[str, Any]:
    import torch

    import posttrain.trainer
    from benchmarks.grpo_phases import PhaseClock
    from posttrain.algos.pg import GRPOConfig
    from posttrain.trainer import Trainer

    torch.set_num_threads(args.threads)
    overrides = SIDE_OVERRIDES[args.worker]
    async_rollouts = overrides.get("async_rollouts", False)
    # async: one step more than timed, since the last step only drains (nothing is left to generate ahead)
    total = args.warmup + args.steps + (1 if async_rollouts else 0)
    config = GRPOConfig(
        algo="grpo", model=args.model_dir, task="arithmetic", output_dir=out_dir, seed=args.seed, steps=total,
        save_every=0, eval_every=0, report_to="jsonl", progress=False, num_threads=args.threads,
        prompts_per_step=args.prompts, group_size=args.group, micro_batch_size=args.micro_batch, mu=1,
        lr=args.lr, weight_decay=0.0, warmup_steps=0, lr_scheduler="constant", max_grad_norm=1.0, zero_stage=0,
        precision=args.precision, gradient_checkpointing=False, rollout=rollout,
        max_new_tokens=args.max_new_tokens,
        temperature=1.0, top_p=1.0, top_k=0, kl_coef=0.0, clip_low=0.2, clip_high=0.2, loss_agg="token-mean",
        advantage="grpo",
    )
    config = dataclasses.replace(config, **overrides)  # a side's fields (e.g. ours-autocast's precision) win
    trainer = Trainer.from_config(config)
    rss_before = current_rss_mb()
    from posttrain.tasks.verifiers import math_equal

    math_equal.cache_clear()  # start every run cold (the cache is per process anyway)
    shipped = {  # the shipped code paths, recorded so the JSON shows what ran (no fixes are patched in)
        "rollout_engine": type(trainer.rollout).__name__,
        "rollout_max_batch_size": getattr(trainer.rollout, "max_batch_size", None),
        # the colocated vLLM engine's own record of eager vs compiled (--vllm_compiled)
        "vllm_enforce_eager": trainer.rollout.llm.model_config.enforce_eager if hasattr(trainer.rollout, "llm")
        else None,
        "async_rollouts": config.async_rollouts,
        "padding_free": config.padding_free,
        "config_rollout_batch_size": config.rollout_batch_size,
        "math_equal_lru_cached": hasattr(math_equal, "cache_info"),
    }

    captured: dict[str, float] = {}
    train_on = trainer._train_on

    def counting_train_on(experience):  # count the tokens of what is actually trained
        captured["tokens"] = float(experience["attention_mask"].sum())
        captured["completion_tokens"] = float(experience["completion_mask"].sum())
        return train_on(experience)

    # Instrumentation only: a pass-through wrapper that reads the token counts off the experience it trains on.
    trainer._train_on = counting_train_on
    clock = PhaseClock()  # pass-through timers; generation, reward and sync come from the trainer's own timer
    clock.wrap(trainer.algo, "logprobs", "logprobs")
    clock.wrap(trainer.algo, "loss", "forward")
    clock.wrap(trainer.deepspeed_model, "backward", "backward")
    # the trainer's optimizer_step: the clip (the trainer's own at ZeRO-0 fp32, DeepSpeed's otherwise) and step()
    clock.wrap(posttrain.trainer, "optimizer_step", "optimizer")
    steps = []
    last = time.perf_counter()
    for step in range(1, total + 1):
        metrics = trainer._one_step(step)
        trainer.logger.log(step, metrics)
        now = time.perf_counter()
        for phase, key in (("generation", "time/generate"), ("reward", "time/reward"), ("sync", "time/sync")):
            clock.seconds[phase] += metrics.get(key, 0.0)
        steps.append({
            "seconds": now - last, "tokens": captured["tokens"], "completion_tokens": captured["completion_tokens"],
            "reward_mean": metrics.get("reward/mean"),
            "phases": {**clock.pop(now - last), **{k: v for k, v in metrics.items() if k.startswith("time/")}},
        })
        last = now
    trainer.logger.close()
    if shipped["math_equal_lru_cached"]:
        shipped["math_equal_cache_info"] = math_equal.cache_info()._asdict()
    timed, drain = (steps[args.warmup:-1], steps[-1:]) if config.async_rollouts else (steps[args.warmup:], [])
    return {"steps": timed, "warmup_steps": steps[: args.warmup], "drain_steps": drain,
            **process_readings(rss_before), "shipped_code_paths": shipped}
