"""Resident memory of a process that generates with the colocated vLLM engine and syncs SmolLM2-135M's weights
into it, round after round, with glibc's default malloc thresholds or with ``posttrain.common.memory``'s.

    OMP_NUM_THREADS=1 python benchmarks/bench_malloc_thresholds.py --mode default
    MALLOC_MMAP_THRESHOLD_=1048576 MALLOC_TRIM_THRESHOLD_=0 OMP_NUM_THREADS=1 \
        python benchmarks/bench_malloc_thresholds.py --mode env
    OMP_NUM_THREADS=1 python benchmarks/bench_malloc_thresholds.py --mode mallopt

Each round: 16 prompts x 24 new tokens at temperature 0.7, every weight nudged by 1e-4, ``update_weights``. The
script prints one JSON line: the mode and the process's RSS in GB before the first round and after each round.
"""

from __future__ import annotations

import json

import psutil
import torch

from posttrain.common.cli_help import CommandParser
from posttrain.common.memory import fix_malloc_thresholds


def main() -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("default", "env", "mallopt"), required=True,
                        help="default or env: thresholds as the environment leaves them; mallopt: "
                             "fix_malloc_thresholds() first")
    parser.add_argument("--rounds", type=int, default=12, help="generate + sync rounds")
    args = parser.parse_args()
    if args.mode == "mallopt" and not fix_malloc_thresholds():
        raise SystemExit("error: mallopt is not available (not glibc)")
    from posttrain.engines.base import SamplingParams
    from posttrain.engines.vllm import VLLMRolloutEngine
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.models.pretrained import build_pretrained

    path = str(build_pretrained("smollm2-135m"))
    model, tokenizer = load_causal_lm(path), load_tokenizer(path)
    engine = VLLMRolloutEngine.from_pretrained(path, max_model_len=256)
    prompts = [tokenizer(f"What is {i}+{i + 3}?")["input_ids"] for i in range(4)] * 4
    process = psutil.Process()
    rss_gb = [round(process.memory_info().rss / 1e9, 2)]
    for round_index in range(args.rounds):
        engine.generate(prompts, SamplingParams(max_new_tokens=24, temperature=0.7, seed=round_index))
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(1e-4)
        engine.update_weights(model.named_parameters(), version=round_index + 1)
        rss_gb.append(round(process.memory_info().rss / 1e9, 2))
    print(json.dumps({"mode": args.mode, "rss_gb_start_then_after_each_round": rss_gb}))


if __name__ == "__main__":
    main()
