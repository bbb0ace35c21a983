"""Rollout throughput on a real model: our vLLM engine vs our HF engine, SmolLM2-135M-Instruct.

Both sides are the project's engines behind the one ``RolloutEngine`` protocol
(``posttrain.engines.vllm.VLLMRolloutEngine`` and ``posttrain.engines.hf.HFRolloutEngine``), given the
same 64 chat-templated prompts (token ids) and the same ``SamplingParams`` (T=1, no top-k/top-p,
``--new_tokens`` 128, stop at the eos), the same dtype and the same number of CPU threads. Each side
runs in its own subprocess (vLLM's CPU backend pins its own OpenMP threads, so one process must not
host both); the sides alternate ``--repeats`` times after one warm-up call each, and the median of the
timed ``generate`` calls is reported. Generated tokens are counted from the outputs (a row may stop at
the eos before 128), so tokens/s is useful work.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_vllm_rollout.py \
        --out benchmarks/results/vllm_rollout.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TOPICS = ("a lighthouse keeper", "a lost robot", "the first snow", "a market in Lagos", "an old violin",
          "a night train", "a chess prodigy", "the last bookshop", "a desert well", "a clockmaker",
          "a glacier", "a street cat", "a rainy harbour", "a space station", "a village baker", "a kite")


def make_prompts(tokenizer, count: int) -> list[list[int]]:
    """``count`` chat-templated story requests (token ids), long enough answers to fill 128 tokens."""
    from posttrain.models.chat import render_chat

    prompts = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        text = render_chat(tokenizer, [{"role": "user", "content": f"Write a long story about {topic} ({i})."}])
        prompts.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return prompts


def run_side(side: str, model: str, dtype: str, prompts: int, new_tokens: int, repeats: int, threads: int) -> dict:
    """One side in this process: build the engine, warm up once, time ``repeats`` generate calls."""
    import torch

    from posttrain.engines.base import SamplingParams
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.models.pretrained import resolve_model_name

    torch.set_num_threads(threads)
    path = resolve_model_name(model)
    tokenizer = load_tokenizer(path)
    batch = make_prompts(tokenizer, prompts)
    start = time.perf_counter()
    if side == "vllm":
        from posttrain.engines.vllm import VLLMRolloutEngine

        engine = VLLMRolloutEngine.from_pretrained(path, tokenizer=tokenizer, dtype=dtype,
                                                   max_model_len=max(len(p) for p in batch) + new_tokens)
    else:
        from posttrain.engines.hf import HFRolloutEngine

        engine = HFRolloutEngine(load_causal_lm(path, dtype=getattr(torch, dtype)), tokenizer,
                                 max_batch_size=prompts)
    startup_s = time.perf_counter() - start
    engine.generate(batch, SamplingParams(max_new_tokens=new_tokens, seed=10_000))  # warm-up
    runs = []
    for repeat in range(repeats):
        start = time.perf_counter()
        out = engine.generate(batch, SamplingParams(max_new_tokens=new_tokens, seed=repeat))
        seconds = time.perf_counter() - start
        tokens = sum(len(c) for c in out.completion_ids)
        runs.append({"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds})
    return {"startup_s": startup_s, "runs": runs, "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="Model alias or folder (both sides).")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="Both sides' weights (bfloat16 only on CPUs with native bf16: AVX-512-BF16 / AMX).")
    parser.add_argument("--prompts", type=int, default=64, help="Prompts per generate call.")
    parser.add_argument("--new_tokens", type=int, default=128, help="max_new_tokens.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed calls per side per round.")
    parser.add_argument("--rounds", type=int, default=2, help="Alternating rounds (one subprocess per side each).")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")),
                        help="CPU threads for both sides.")
    parser.add_argument("--side", choices=["vllm", "hf"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    args = parser.parse_args(argv)

    if args.side:  # a child: one side, result as the last stdout line
        result = run_side(args.side, args.model, args.dtype, args.prompts, args.new_tokens, args.repeats, args.threads)
        print(json.dumps(result))
        return 0

    sides: dict[str, list[dict]] = {"vllm": [], "hf": []}
    startup: dict[str, list[float]] = {"vllm": [], "hf": []}
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for round_index in range(args.rounds):
        for side in ("vllm", "hf") if round_index % 2 == 0 else ("hf", "vllm"):
            cmd = [sys.executable, __file__, "--side", side, "--model", args.model, "--dtype", args.dtype,
                   "--prompts", str(args.prompts), "--new_tokens", str(args.new_tokens),
                   "--repeats", str(args.repeats), "--threads", str(args.threads)]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{side} side failed:\n{done.stderr[-3000:]}")
            child = json.loads(done.stdout.strip().splitlines()[-1])
            sides[side].extend(child["runs"])
            startup[side].append(child["startup_s"])
            print(f"round {round_index} {side}: " + ", ".join(f"{r['tokens_per_s']:.0f}" for r in child["runs"])
                  + " tokens/s", flush=True)
    median = {side: statistics.median(r["tokens_per_s"] for r in runs) for side, runs in sides.items()}
    import torch
    import transformers
    import vllm

    result = {
        "command": " ".join([sys.executable, *sys.argv]),
        "platform": platform.platform(), "torch": torch.__version__, "transformers": transformers.__version__,
        "vllm": vllm.__version__, "model": args.model, "dtype": args.dtype, "prompts": args.prompts,
        "new_tokens": args.new_tokens, "threads": args.threads,
        "runs": sides, "startup_s": startup,
        "median_tokens_per_s": median,
        "ratio_vllm_over_hf": median["vllm"] / median["hf"],
    }
    print(json.dumps({k: result[k] for k in ("median_tokens_per_s", "ratio_vllm_over_hf")}, indent=2))
    if args.out is not None:
        from posttrain.common.files import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
