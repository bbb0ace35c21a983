"""GRPO step time: our ``posttrain.trainer.Trainer`` vs TRL's ``GRPOTrainer`` on the same tiny model and batch.

Both sides start from the same checkpoint (the tiny ``causal-arithmetic`` model), see the same templated
arithmetic prompts, score completions with the same reward function (``ArithmeticTask.reward``), and do the
same work per optimizer step: generate ``prompts x group`` completions of at most ``max_new_tokens`` tokens
(T=1, no top-k / top-p, KV-cached sampling), then one forward + backward over them in micro-batches of
``micro-batch`` samples with gradient accumulation, then one AdamW step (beta = 0: no reference model;
num_iterations / mu = 1: the old log-probs are the current ones detached, no extra forward on either side).

Each side runs in its own subprocess (so peak RSS is per side; this script with ``--worker SIDE``, which runs
``grpo_vs_trl_ours.worker_ours`` or ``grpo_vs_trl_trl.worker_trl``); sides alternate, ``--repeats`` times each,
in one invocation. A step is timed end to end, from the end of the previous optimizer step to the end of
this one (data, generation, reward, loss, backward, optimizer step, weight sync, metric logging); the first
``--warmup`` steps of every run are discarded. Checkpoint saving is excluded on both sides (ours: the loop
calls ``Trainer._one_step`` directly, which never saves; TRL: ``save_strategy="no"``).

Our side is the shipped code, unpatched (one rollout batch per step via ``rollout_batch_size=0``, the
``lru_cache``d ``math_equal``, each distinct prompt encoded once); the only wrapper is a pass-through around
``Trainer._train_on`` that reads the trained batch's token counts (instrumentation, no change to the work).

Each step also records its phases on both sides (``benchmarks/grpo_phases.py``: generation, reward, no-grad
log-prob forwards, training forward, backward, optimizer, sync, other; pass-through timers), reported per side
with each matmul phase's useful FLOP/s as a fraction of the peak below. ``--sides ours-packed`` is our side with
the padding-free lever on (``padding_free=True``), so its ratio to ``ours`` in one invocation is that lever's.

Also measures this CPU's fp32 and bf16 matmul peak (``matmul_peak.py``: torch.matmul, square, 1 thread and all
threads) and reports our achieved useful FLOP/s as a fraction of it.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_grpo_vs_trl.py --out benchmarks/results/grpo_vs_trl.json

With vLLM on a real model (SmolLM2-135M-Instruct, offline): ``--model_dir smollm2-135m --rollout vllm --sides
ours,ours-async,trl-vllm,trl``: ours with the colocated vLLM engine (synchronous, and ``--async_rollouts``
with staleness 1) against TRL's ``GRPOTrainer(use_vllm=True, vllm_mode="colocate")`` and TRL without vLLM;
``--keep_going`` records a side that cannot run on this machine (with its error) instead of stopping. On CPU,
TRL's vLLM engine gets our engine's CPU settings (chunked prefill off, and the run's ``--vllm_kv_cache_gib``,
default 1 GiB, ``--vllm_threads_bind`` and eager mode unless ``--vllm_compiled``: ``VLLMCPUSettings``, given alike
to every vLLM side), so the vLLM sides compare like for like; ``ours-async`` runs one extra, untimed drain step
(its last step has nothing to generate ahead). Every run records the load average before and after it.

``ours-server`` and ``trl-server`` give each side's vLLM a server process of its own: on CPU on ``--server_cpus``
(default CPU 1; ``taskset``, all the server's processes) with the trainer on ``--trainer_cpus`` (default CPU 0),
on CUDA on ``--server_gpu``. Ours trains with async rollouts (staleness 1) from a ``posttrain rollout-worker``
(weights synced over our gloo transport on CPU); TRL with ``vllm_mode="server"`` against the server ``trl
vllm-serve`` builds (``grpo_vs_trl_trl.py``), whose weight sync is NCCL only, so on CPU that side fails while its
trainer is built (recorded with ``--keep_going``).

On a GPU, ``--device cuda`` runs both sides there (ours: DeepSpeed over NCCL; TRL: ``use_cpu=False``), records
each side's peak GPU memory, and measures the GPU's own matmul peak:

    python benchmarks/bench_grpo_vs_trl.py --device cuda --precision bf16 --model_dir CHECKPOINT \
        --prompts 32 --group 8 --micro_batch 64 --max_new_tokens 128 --out benchmarks/results/grpo_vs_trl_cuda.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.grpo_phases import phase_peak_fractions
from benchmarks.grpo_vs_trl_ours import worker_ours
from benchmarks.grpo_vs_trl_sides import SERVER_SIDES, SIDES, VLLMCPUSettings, server_placement
from benchmarks.grpo_vs_trl_trl import worker_trl
from benchmarks.matmul_peak import cpu_name, matmul_peak
from posttrain.common.cli_help import CommandParser
from posttrain.engines.worker import cpu_affinity_prefix

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _model_params(model_dir: str) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return sum(p.numel() for p in model.parameters())  # tied embedding / lm_head counted once


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    steps = [s for r in runs for s in r["steps"]]
    secs = [s["seconds"] for s in steps]
    tok = [s["tokens"] for s in steps]
    tps = [s["tokens"] / s["seconds"] for s in steps]
    return {
        "median_seconds_per_step": _median(secs),
        "median_tokens_per_step": _median(tok),
        "median_completion_tokens_per_step": _median([s["completion_tokens"] for s in steps]),
        "median_tokens_per_s": _median(tps),
        "aggregate_tokens_per_s": sum(tok) / sum(secs),
        "per_run_median_seconds": [_median([s["seconds"] for s in r["steps"]]) for r in runs],
        "peak_rss_mb_median": _median([r["peak_rss_mb"] for r in runs]),
        "peak_gpu_mb_median": _median([r["peak_gpu_mb"] for r in runs if r.get("peak_gpu_mb") is not None]),
        "server_peak_rss_mb_median": _median([r["server_peak_rss_mb"] for r in runs if "server_peak_rss_mb" in r]),
        "rss_after_setup_mb_median": _median([r["rss_after_setup_mb"] for r in runs if r.get("rss_after_setup_mb")]),
        "timed_steps": len(steps),
    }


def worker_command(args: argparse.Namespace, side: str, out: Path, seed: int, settings: VLLMCPUSettings,
                   placement: tuple[list[int], list[int]]) -> list[str]:
    """The command of one worker run of ``side`` (this script with ``--worker``): the run's settings, and for a
    server side its placement: on CPU (``placement`` from ``server_placement``) the worker on the trainer's CPUs,
    handing the server's to the server it starts; on CUDA (``placement`` empty) the server's GPU."""
    trainer_cpus, server_cpus = placement
    command = [sys.executable, __file__, "--worker", side, "--worker_out", str(out), "--seed", str(seed),
               "--model_dir", args.model_dir, "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--precision", args.precision, "--prompts", str(args.prompts), "--group", str(args.group),
               "--micro_batch", str(args.micro_batch), "--max_new_tokens", str(args.max_new_tokens),
               "--lr", str(args.lr), "--threads", str(args.threads), "--rollout", args.rollout,
               "--device", args.device, *settings.worker_args()]
    if side not in SERVER_SIDES:
        return command
    if not trainer_cpus:
        return [*command, "--server_gpu", str(args.server_gpu)]
    return [*cpu_affinity_prefix(trainer_cpus), *command, "--server_cpus", ",".join(map(str, server_cpus))]


def build_parser() -> CommandParser:
    """The command line of the driver and (with the hidden ``--worker``) of each worker run."""
    parser = CommandParser(description=__doc__.splitlines()[0],
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    parser.add_argument("--steps", type=int, default=6, help="Timed optimizer steps per run (after warm-up).")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed optimizer steps at the start of each run.")
    parser.add_argument("--repeats", type=int, default=3, help="Runs per side; sides alternate.")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="fp32 on both sides, or bf16 (ours: bf16 weights + DeepSpeed bf16; TRL: bf16 autocast).")
    parser.add_argument("--prompts", type=int, default=16, help="Prompts per optimizer step.")
    parser.add_argument("--group", type=int, default=8, help="Completions per prompt (G).")
    parser.add_argument("--micro_batch", type=int, default=32, help="Samples per forward/backward.")
    parser.add_argument("--max_new_tokens", type=int, default=16, help="Maximum completion length.")
    parser.add_argument("--lr", type=float, default=1e-5, help="AdamW learning rate (both sides).")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1),
                        help="torch intra-op threads for both sides (default: $OMP_NUM_THREADS or 1).")
    parser.add_argument("--recipe", default="causal-arithmetic", help="Tiny recipe to build / reuse.")
    parser.add_argument("--warm_start_steps", type=int, default=None,
                        help="Override the recipe's warm-start steps (builds into --cache_dir).")
    parser.add_argument("--cache_dir", default=None, help="Tiny-model cache root (default: the posttrain cache).")
    parser.add_argument("--model_dir", default=None, help="Use this checkpoint instead of building the recipe.")
    parser.add_argument("--peak_seconds", type=float, default=2.0, help="Seconds per matmul-peak measurement.")
    parser.add_argument("--sides", default="ours,trl",
                        help="Comma list of sides to run: " + ", ".join(SIDES) + " (ours-async: --async_rollouts; "
                             "trl-vllm: TRL with use_vllm=True, vllm_mode='colocate'; ours-server: a posttrain "
                             "rollout-worker on --server_cpus, async rollouts; trl-server: vllm_mode='server' with "
                             "trl vllm-serve on --server_cpus; both trainers on --trainer_cpus).")
    parser.add_argument("--rollout", choices=["hf", "vllm"], default="hf",
                        help="Our rollout engine (ours and ours-async sides).")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="Where both sides train and generate (cpu hides any GPU from both).")
    parser.add_argument("--trainer_cpus", default="0",
                        help="CPU runs: CPUs of the server sides' trainer process (taskset list, e.g. 0 or 0-1).")
    parser.add_argument("--server_cpus", default="1",
                        help="CPU runs: CPUs of the server sides' vLLM server and all its processes (taskset list).")
    parser.add_argument("--server_gpu", type=int, default=1,
                        help="With --device cuda: the GPU of the server sides' vLLM server (the trainer takes the "
                             "first GPU it sees; NCCL weight sync needs the two on different GPUs).")
    parser.add_argument("--vllm_kv_cache_gib", type=int, default=int(os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")),
                        help="KV cache of every vLLM side's CPU engine, GiB (VLLM_CPU_KVCACHE_SPACE).")
    parser.add_argument("--vllm_threads_bind", default=os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
                        help="VLLM_CPU_OMP_THREADS_BIND of every vLLM side (auto: the CPUs the process may use; "
                             "vLLM 0.30 applies it in its engine processes, i.e. the server sides).")
    parser.add_argument("--vllm_compiled", action="store_true",
                        help="Every vLLM side's CPU engine in vLLM's compiled mode (default: enforce_eager, as "
                             "our engine on CPU).")
    parser.add_argument("--worker", choices=SIDES, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--keep_going", action="store_true",
                        help="Record a side that fails (e.g. a peer that cannot run here) in the report and go on.")
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--worker_out", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.worker:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        result = (worker_trl if args.worker.startswith("trl") else worker_ours)(args)
        Path(args.worker_out).write_text(json.dumps(result))
        return 0

    if (args.prompts * args.group) % args.micro_batch:
        parser.error("--micro_batch must divide --prompts x --group")
    sides = [s for s in args.sides.split(",") if s]
    if unknown := set(sides) - set(SIDES):
        parser.error(f"unknown --sides {sorted(unknown)}; choose from {', '.join(SIDES)}")
    try:
        settings = VLLMCPUSettings.from_args(args)
        placement = (server_placement(args.trainer_cpus, args.server_cpus, os.sched_getaffinity(0))
                     if set(sides) & set(SERVER_SIDES) and args.device == "cpu" else ([], []))
    except ValueError as err:
        parser.error(str(err))
    command = " ".join(shlex.quote(a) for a in [f"OMP_NUM_THREADS={args.threads}", "PYTHONPATH=.", "python", *sys.argv])
    if args.model_dir is None:
        from posttrain.models.tiny import RECIPES, build_recipe

        recipe = RECIPES.get(args.recipe)
        if args.warm_start_steps is not None:
            recipe = dataclasses.replace(recipe, warm_start_steps=args.warm_start_steps)
        args.model_dir = str(build_recipe(recipe, args.cache_dir))
    else:
        from posttrain.models.pretrained import resolve_model_name

        args.model_dir = resolve_model_name(args.model_dir)  # e.g. smollm2-135m
    n_params = _model_params(args.model_dir)

    import deepspeed
    import torch
    import transformers
    import trl

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WORLD_SIZE", None)
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # our trainer takes a GPU whenever it sees one
        env.update(settings.environment())  # every vLLM engine of both sides: the same KV cache and binding
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    load_at_start = os.getloadavg()
    failures: dict[str, str] = {}  # side -> the end of its stderr, when --keep_going let it fail
    with tempfile.TemporaryDirectory(prefix="bench-grpo-") as tmp:
        for r in range(args.repeats):
            order = sides if r % 2 == 0 else sides[::-1]  # alternate who goes first
            for side in order:
                out = Path(tmp) / f"{side}-{r}.json"
                cmd = worker_command(args, side, out, r, settings, placement)
                start = time.perf_counter()
                load_before = os.getloadavg()
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if proc.returncode != 0:
                    if not args.keep_going:
                        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
                        raise SystemExit(f"{side} worker failed (repeat {r})")
                    failures.setdefault(side, proc.stderr[-6000:])
                    print(f"repeat {r} {side}: FAILED (recorded in the report)", flush=True)
                    continue
                result = json.loads(out.read_text())
                result["wall_seconds"] = time.perf_counter() - start
                result["started_at"] = time.strftime("%H:%M:%S")
                result["load_average_before"], result["load_average_after"] = load_before, os.getloadavg()
                runs[side].append(result)
                if args.out:  # progress so far, replaced by the full report at the end
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(json.dumps({"command": command, "partial": True, "failures": failures,
                                                    "summary": {k: _summary(v) for k, v in runs.items() if v},
                                                    "runs": runs}, indent=2) + "\n")
                gpu = f", peak GPU {result['peak_gpu_mb']:.0f} MiB" if result.get("peak_gpu_mb") else ""
                print(f"repeat {r} {side}: median {(_median([s['seconds'] for s in result['steps']])):.3f} s/step "
                      f"peak RSS {result['peak_rss_mb']:.0f} MiB{gpu}", flush=True)

    peak = matmul_peak([4096, 8192] if args.device == "cuda" else [1024, 2048], sorted({1, os.cpu_count() or 1}),
                       args.peak_seconds, args.device)
    summary = {side: _summary(rs) for side, rs in runs.items() if rs}
    report: dict[str, Any] = {
        "command": command,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "trl": trl.__version__,
                     "deepspeed": deepspeed.__version__, "platform": platform.platform(),
                     "cpu": cpu_name(), "cpu_count": os.cpu_count(),
                     "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None},
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "settings": {
            "model_dir": args.model_dir, "recipe": _recipe_json(args.model_dir), "params": n_params,
            "device": args.device, "precision": args.precision, "threads": args.threads,
            "prompts_per_step": args.prompts, "group_size": args.group, "micro_batch": args.micro_batch,
            "grad_accum": args.prompts * args.group // args.micro_batch, "max_new_tokens": args.max_new_tokens,
            "temperature": 1.0, "top_p": 1.0, "top_k": 0, "lr": args.lr, "beta_kl": 0.0, "num_iterations_mu": 1,
            "clip_eps": 0.2, "max_grad_norm": 1.0, "gradient_checkpointing": False, "warmup_steps_discarded": args.warmup,
            "timed_steps_per_run": args.steps, "repeats": args.repeats,
            "reward": "posttrain.tasks.arithmetic.ArithmeticTask.reward (both sides)",
            "ours": "posttrain.trainer.Trainer(GRPOConfig(...)); loop of _one_step + logger.log (jsonl), "
                    f"DeepSpeed ZeRO-0, torch AdamW(fused=True), --rollout {args.rollout} engine + weight sync "
                    "after every step (ours-async: --async_rollouts true, max_staleness 1); "
                    "shipped code as is: rollout_batch_size=0 (one rollout batch of prompts x group per step), "
                    "lru_cached posttrain.tasks.verifiers.math_equal, each distinct prompt encoded once (pg.py)",
            "ours_instrumentation": "the only patch on our side is a pass-through wrapper around "
                                    "trainer._train_on that reads the trained batch's token counts from the "
                                    "experience (attention_mask / completion_mask sums); it changes no computation",
            "shared_reward_cache": "both sides call ArithmeticTask.reward -> the lru_cached math_equal, so the "
                                   "cache also serves TRL's reward calls (one cold cache per subprocess)",
            "trl": "trl.GRPOTrainer(model=path, reward_funcs=task.reward, text prompts already templated), "
                   "use_cpu = (--device cpu), generation_batch_size = per_device x GA = prompts x group (one generation per step), "
                   "model.generate on the training model, loss_type dapo, save_strategy no, logging_steps 1",
            "vllm_cpu_settings": {**dataclasses.asdict(settings), "applies_to": "every vLLM engine of every side "
                                  "on CPU: KV cache and thread binding through the environment, eager or compiled "
                                  "through each engine's own arguments"},
            "trl_vllm_cpu_settings": "on CPU TRL's vLLM (colocated vllm.LLM, or trl vllm-serve) gets our engine's "
                                     "CPU settings: the vllm_cpu_settings above and "
                                     "engines.vllm_setup.cpu_scheduler_options (chunked prefill off)",
            "server_sides_placement": {"trainer_cpus": placement[0], "server_cpus": placement[1],
                                       "server_gpu": args.server_gpu if args.device == "cuda" else None,
                                       "sides": [s for s in sides if s in SERVER_SIDES]},
            "async_drain_step": "ours-async runs one step more than timed: its last step has nothing left to "
                                "generate ahead, so it is kept apart (drain_steps), not in the timed steps",
            "step_timing": "interval between consecutive optimizer-step ends (includes data, generation, reward, "
                           "fwd/bwd, optimizer, sync, per-step logging); TRL via TrainerCallback.on_step_end",
            "tokens": "prompt + completion tokens (non-pad) of the step's batch; ours from the experience "
                      "attention mask, TRL from its num_tokens counter",
        },
        "summary": summary,
        "failures": failures,
        "matmul_peak": peak,
        "runs": runs,
    }
    report["ratios_seconds_per_step_vs"] = {  # peer median s/step / side median s/step: > 1 = side faster
        peer: {side: {"median": summary[peer]["median_seconds_per_step"] / summary[side]["median_seconds_per_step"],
                      "per_repeat": [p / o for o, p in zip(summary[side]["per_run_median_seconds"],
                                                            summary[peer]["per_run_median_seconds"])]}
               for side in summary if side.startswith("ours")}
        for peer in summary if peer.startswith("trl")}
    if "ours" in summary and "trl" in summary:
        o, t = summary["ours"], summary["trl"]
        report["ratio_speed_ours_over_trl"] = {
            "seconds_per_step": t["median_seconds_per_step"] / o["median_seconds_per_step"],
            "tokens_per_s": o["median_tokens_per_s"] / t["median_tokens_per_s"],
            "per_repeat_seconds_per_step": [tr / orr for orr, tr in zip(o["per_run_median_seconds"],
                                                                          t["per_run_median_seconds"])],
            "note": "> 1 means ours is faster; per-repeat = TRL run median / ours run median, same repeat index",
        }
    if "ours" in summary and "ours-packed" in summary:
        report["lever_padding_free"] = {  # ours median s/step / ours-packed median s/step: > 1 = the lever pays
            "ratio": summary["ours"]["median_seconds_per_step"] / summary["ours-packed"]["median_seconds_per_step"],
            "per_repeat": [o / p for o, p in zip(summary["ours"]["per_run_median_seconds"],
                                                 summary["ours-packed"]["per_run_median_seconds"])],
        }
    peak_key = f"{args.precision}_cuda" if args.device == "cuda" else f"{args.precision}_threads{args.threads}"
    report["phase_breakdown"] = {  # median seconds per phase and, for matmul phases, the fraction of the peak
        side: phase_peak_fractions([s for r in rs for s in r["steps"]], n_params, peak.get(peak_key, {}).get("best_flops"))
        for side, rs in runs.items() if rs}
    if "ours" in summary:
        o = summary["ours"]
        flops_per_step = 8 * n_params * o["median_tokens_per_step"]
        achieved = flops_per_step / o["median_seconds_per_step"]
        key = peak_key
        peak_same = peak.get(key, {}).get("best_flops")
        report["peak_fraction"] = {
            "flop_model": "8 * params * (prompt+completion tokens): 2N for the generation/prefill forward + 6N for "
                          "the training forward+backward (mu=1, beta=0: no old/ref forwards); attention score "
                          "FLOPs, padding and finished-row decode steps not counted (useful FLOPs only)",
            "params": n_params, "flops_per_step": flops_per_step, "achieved_flops_per_s": achieved,
            "peak_key": key, "peak_flops_per_s": peak_same,
            "fraction_of_peak": achieved / peak_same if peak_same else None,
            "fraction_of_bf16_peak_same_threads": achieved / peak[f"bf16_threads{args.threads}"]["best_flops"]
            if f"bf16_threads{args.threads}" in peak else None,
        }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps({k: report[k] for k in ("summary", "ratios_seconds_per_step_vs", "ratio_speed_ours_over_trl",
                                             "lever_padding_free", "phase_breakdown", "peak_fraction", "failures")
                      if k in report},
                     indent=2))
    return 0


def _recipe_json(model_dir: str) -> Any:
    path = Path(model_dir) / "recipe.json"
    return json.loads(path.read_text()) if path.is_file() else None


if __name__ == "__main__":
    sys.exit(main())

