"""Rollout throughput: our HFRolloutEngine vs Hugging Face ``model.generate`` on the same tiny model.

The peer is what a trainer would otherwise run: ``generate(do_sample=True, output_scores=True)`` plus
``compute_transition_scores`` to get the sampling log-probs. Both sample from the plain distribution
(T=1, no top-k / top-p) on the same left-padded prompts; runs alternate, the median of the repeats is
reported, and generated tokens are counted from the outputs (rows may stop early at eos).

    PYTHONPATH=. python benchmarks/bench_rollout.py --out benchmarks/results/rollout_hf.json

On a GPU, with a real architecture (random weights: speed only), e.g. SmolLM2-135M's saved config and tokenizer:

    python benchmarks/bench_rollout.py --device cuda --dtype bf16 --model_config DIR --batch_size 256 \
        --new_tokens 128 --out benchmarks/results/rollout_hf_cuda.json
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.loading import load_tokenizer
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def make_prompts(tokenizer: transformers.PreTrainedTokenizerBase, count: int, seed: int) -> list[list[int]]:
    """``count`` arithmetic prompts of varied length, e.g. ``"What is 413+27? "``."""
    generator = torch.Generator().manual_seed(seed)
    a, b = torch.randint(1, 10**4, (2, count), generator=generator).tolist()
    return [tokenizer(f"What is {x}+{y}? ", add_special_tokens=False)["input_ids"] for x, y in zip(a, b)]


def run_ours(engine: HFRolloutEngine, prompts: list[list[int]], new_tokens: int, seed: int) -> int:
    out = engine.generate(prompts, SamplingParams(max_new_tokens=new_tokens, seed=seed))
    return sum(len(c) for c in out.completion_ids)


def run_hf(model: transformers.PreTrainedModel, tokenizer: transformers.PreTrainedTokenizerBase,
           prompts: list[list[int]], new_tokens: int) -> int:
    batch = tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt").to(model.device)  # left padding
    with torch.inference_mode():
        out = model.generate(**batch, do_sample=True, max_new_tokens=new_tokens, temperature=1.0, top_k=0,
                             top_p=1.0, output_scores=True, return_dict_in_generate=True)
        logprobs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    completions = out.sequences[:, batch["input_ids"].size(1):]
    is_eos = (completions == tokenizer.eos_token_id).long()
    generated = (is_eos.cumsum(-1) - is_eos) == 0  # up to and including the first eos
    if not torch.isfinite(logprobs[generated]).all():
        raise RuntimeError("HF peer produced non-finite log-probs for generated tokens")
    return int(generated.sum())


def timed(fn: Callable[[int], int], seed: int, device: torch.device) -> tuple[float, int]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    tokens = fn(seed)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, tokens


def build_models(args: argparse.Namespace) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedModel,
                                                     transformers.PreTrainedTokenizerBase]:
    """Two copies of one random-init model (the peer's and the engine's) and its tokenizer: the tiny recipe's
    architecture, or the config and tokenizer saved in ``--model_config``."""
    if args.model_config is None:
        tokenizer = build_tokenizer()
        return (build_model(RECIPES.get(args.recipe), tokenizer), build_model(RECIPES.get(args.recipe), tokenizer),
                tokenizer)
    tokenizer = load_tokenizer(args.model_config)
    tokenizer.padding_side = "left"
    config = transformers.AutoConfig.from_pretrained(args.model_config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    return model, copy.deepcopy(model), tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="causal-arithmetic", help="Tiny recipe whose architecture to use.")
    parser.add_argument("--batch_size", type=int, default=64, help="Prompts per generate call.")
    parser.add_argument("--new_tokens", type=int, default=16, help="max_new_tokens.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each side (after one warm-up).")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads for both sides.")
    parser.add_argument("--device", default="cpu", help="torch device of both sides (cpu, cuda).")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="weights' dtype on both sides.")
    parser.add_argument("--model_config", default=None,
                        help="a checkpoint folder whose config and tokenizer to use (random weights) instead of "
                             "the tiny recipe")
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    peer, own, tokenizer = build_models(args)  # random init: speed only
    model = peer.to(device, DTYPES[args.dtype]).eval()
    engine = HFRolloutEngine(own.to(DTYPES[args.dtype]), tokenizer, max_batch_size=args.batch_size, device=device)
    prompts = make_prompts(tokenizer, args.batch_size, seed=0)

    sides: dict[str, Callable[[int], int]] = {
        "ours": lambda r: run_ours(engine, prompts, args.new_tokens, seed=r),
        "hf_generate": lambda r: run_hf(model, tokenizer, prompts, args.new_tokens),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for name, fn in sides.items():
        fn(args.repeats)  # warm-up, with a seed the timed runs do not use
    for repeat in range(args.repeats):
        for name, fn in sides.items():
            seconds, tokens = timed(fn, repeat, device)
            runs[name].append({"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds})
    summary = {name: statistics.median(r["tokens_per_s"] for r in rs) for name, rs in runs.items()}
    result = {
        "command": " ".join([sys.executable, *sys.argv]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "threads": args.threads,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": args.dtype,
        "model": args.model_config or args.recipe,
        "batch_size": args.batch_size,
        "new_tokens": args.new_tokens,
        "runs": runs,
        "median_tokens_per_s": summary,
        "ratio_ours_over_hf": summary["ours"] / summary["hf_generate"],
    }
    print(json.dumps({k: result[k] for k in ("median_tokens_per_s", "ratio_ours_over_hf")}, indent=2))
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
