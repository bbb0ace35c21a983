"""Weight-sync seconds per step against parameter count: trainer -> colocated vLLM engine.

For each model size (random-init Llama configs whose attention head size vLLM's CPU kernels serve, plus
SmolLM2-135M-Instruct itself), the trainer-side module pushes its full state into the engine the way the
trainer does after every optimizer step (``posttrain.weight_sync.push_weights``: vLLM's weight-transfer
protocol over our gloo transport, parameters gathered and sent a layer group at a time). Side by side, in
the same run: the same state copied into our HF engine's model in place (``HFRolloutEngine.update_weights``),
the floor any transport is measured against (no serialisation, no second process group). Median of
``--repeats`` syncs after one warm-up sync; the engine is checked to follow the sent
weights: after the syncs, vLLM's token log-probs of a fixed text must equal the HF engine's (which
received the same state) to float32 precision.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_weight_sync.py --out benchmarks/results/weight_sync.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from posttrain.common.cli_help import CommandParser

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# (name, hidden, layers, heads, kv heads, intermediate): head size 64 everywhere (a vLLM CPU kernel size).
SIZES = (("llama-h256-l4", 256, 4, 4, 2, 1024), ("llama-h512-l8", 512, 8, 8, 4, 2048),
         ("llama-h768-l12", 768, 12, 12, 4, 3072))


def build_random_llama(directory: Path, hidden: int, layers: int, heads: int, kv_heads: int, inter: int) -> str:
    """A random-init Llama with SmolLM2's tokenizer and vocabulary, saved as a checkpoint folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from posttrain.models.loading import load_tokenizer
    from posttrain.models.pretrained import resolve_model_name

    tokenizer = load_tokenizer(resolve_model_name("smollm2-135m"))
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=inter,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def time_syncs(push, repeats: int) -> list[float]:
    push(1)  # warm-up (vLLM: opens the process group)
    seconds = []
    for version in range(2, repeats + 2):
        start = time.perf_counter()
        push(version)
        seconds.append(time.perf_counter() - start)
    return seconds


def measure(path: str, repeats: int) -> dict:
    import torch

    from posttrain.engines.hf import HFRolloutEngine
    from posttrain.engines.vllm import VLLMRolloutEngine
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.weight_sync import push_weights

    tokenizer = load_tokenizer(path)
    trainer_model = load_causal_lm(path, dtype=torch.float32)
    params = sum(p.numel() for p in trainer_model.parameters())
    vllm_engine = VLLMRolloutEngine.from_pretrained(path, tokenizer=tokenizer, dtype="float32", max_model_len=256)
    hf_engine = HFRolloutEngine(load_causal_lm(path, dtype=torch.float32), tokenizer)
    with torch.no_grad():  # make the sent state differ from the checkpoint, so a sync has something to do
        for p in trainer_model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    vllm_s = time_syncs(lambda v: push_weights(vllm_engine, trainer_model, 0, v), repeats)
    hf_s = time_syncs(lambda v: push_weights(hf_engine, trainer_model, 0, v), repeats)
    sequence = [list(tokenizer("The capital of France is Paris, and the capital of Peru is Lima.",
                               add_special_tokens=False)["input_ids"])]
    # After the syncs both engines hold the trainer's state: their token log-probs must agree (a sync that did
    # nothing would be fast and wrong). Compared by scoring, not greedy text, since random models have ties.
    vllm_lp = vllm_engine.score(sequence, entropy=False)[0].logprobs
    hf_lp = hf_engine.score(sequence, entropy=False)[0].logprobs
    max_diff = max(abs(a - b) for a, b in zip(vllm_lp, hf_lp))
    return {"params": params, "bytes_fp32": params * 4, "vllm_seconds": vllm_s, "hf_inplace_seconds": hf_s,
            "vllm_median_s": statistics.median(vllm_s), "hf_inplace_median_s": statistics.median(hf_s),
            "vllm_over_hf_inplace": statistics.median(vllm_s) / statistics.median(hf_s),
            "vllm_gb_per_s": params * 4 / statistics.median(vllm_s) / 1e9,
            "max_abs_logprob_diff_vllm_vs_hf_after_sync": max_diff}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Timed syncs per size (after one warm-up).")
    parser.add_argument("--sizes", default=",".join(s[0] for s in SIZES) + ",smollm2-135m",
                        help="Comma list of sizes to run (names of SIZES, or smollm2-135m).")
    parser.add_argument("--size", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    args = parser.parse_args(argv)
    import subprocess

    if args.size:  # a child: one size in a fresh process (one vLLM engine per process)
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
        with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
            spec = {s[0]: s[1:] for s in SIZES}
            if args.size == "smollm2-135m":
                from posttrain.models.pretrained import resolve_model_name

                path = resolve_model_name("smollm2-135m")
            else:
                path = build_random_llama(Path(tmp), *spec[args.size])
            print(json.dumps(measure(path, args.repeats)))
        return 0

    results = {}
    for size in [s for s in args.sizes.split(",") if s]:
        done = subprocess.run([sys.executable, __file__, "--size", size, "--repeats", str(args.repeats)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"size {size} failed:\n{done.stderr[-3000:]}")
        results[size] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[size]
        print(f"{size}: {r['params'] / 1e6:.1f}M params, vLLM sync {r['vllm_median_s']:.3f} s "
              f"({r['vllm_gb_per_s']:.2f} GB/s), HF in-place copy {r['hf_inplace_median_s']:.3f} s, "
              f"ratio {r['vllm_over_hf_inplace']:.1f}x, max |logprob diff| {r['max_abs_logprob_diff_vllm_vs_hf_after_sync']:.2e}",
              flush=True)
    import torch
    import vllm

    report = {"command": " ".join([sys.executable, *sys.argv]), "platform": platform.platform(),
              "torch": torch.__version__, "vllm": vllm.__version__,
              "threads": int(os.environ.get("OMP_NUM_THREADS", "2")), "results": results}
    if args.out is not None:
        from posttrain.common.files import atomic_write_text

        atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
