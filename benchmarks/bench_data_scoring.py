"""Data-pipeline scoring benchmark, side by side in one run:

1. ``HFRolloutEngine.score`` (length-sorted padded batches) vs a plain per-document forward loop computing the
   same log-probs and entropies: tokens/s and the ratio.
2. EntropyLong verification: one batched forward per unique (document, candidate) vs the naive one
   forward per (candidate, anchor) pair: forward passes, seconds, and the max |dI| difference.

    OMP_NUM_THREADS=1 python benchmarks/bench_data_scoring.py [--model PATH] [--docs 120] [--repeat 3]

Without ``--model`` it uses the ``corpus-lm`` architecture from ``posttrain.models.tiny`` with random
weights (throughput does not depend on the weights; anchor counts do). Writes
``benchmarks/results/data_scoring.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_pipelines.common.backends import load_backend, tokenize
from data_pipelines.common.corpus import make_corpus
from data_pipelines.common.retrieval import BM25Retriever
from data_pipelines.entropylong.index import build_chunks
from data_pipelines.entropylong.pipeline import EntropyLong, EntropyLongConfig
from posttrain.common.cli_help import CommandParser
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.likelihood import entropy_from_logits, logprobs_from_logits


def plain_loop(model, seqs: list[list[int]]) -> list[tuple[list[float], list[float]]]:
    out = []
    with torch.inference_mode():
        for s in seqs:
            ids = torch.tensor([s])
            logits = model(input_ids=ids).logits[0, :-1].float()
            out.append((logprobs_from_logits(logits, ids[0, 1:]).tolist(), entropy_from_logits(logits).tolist()))
    return out


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> int:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="HF model folder (default: random corpus-lm architecture)")
    parser.add_argument("--docs", type=int, default=120, help="documents scored (built-in corpus, repeated)")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="timings are the best of this many runs")
    parser.add_argument("--verify_docs", type=int, default=12, help="root documents in the verification part")
    parser.add_argument("--top_k", type=int, default=8, help="EntropyLong candidates per anchor")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "data_scoring.json"))
    args = parser.parse_args()

    if args.model:
        backend = load_backend(args.model, batch_size=args.batch_size)
        model_name = args.model
    else:
        from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

        tok = build_tokenizer()
        backend = HFRolloutEngine(build_model(RECIPES.get("corpus-lm"), tok), tok, max_batch_size=args.batch_size)
        model_name = "corpus-lm architecture, random weights"
    corpus = make_corpus(40, 20, seed=0)
    texts = [corpus.documents[i % len(corpus.documents)]["text"] * (1 + i % 3) for i in range(args.docs)]
    seqs = [[backend.tokenizer.bos_token_id] + tokenize(backend.tokenizer, t) for t in texts]
    n_tokens = sum(len(s) - 1 for s in seqs)

    t_batched, batched = best_of(lambda: backend.score(seqs, entropy=True), args.repeat)
    t_plain, plain = best_of(lambda: plain_loop(backend.model, seqs), args.repeat)
    max_diff = max(max(abs(a - b) for a, b in zip(s.entropies, p[1])) for s, p in zip(batched, plain))

    chunks = build_chunks(corpus.documents)
    el = EntropyLong(backend, BM25Retriever([c["text"] for c in chunks]), chunks,
                     EntropyLongConfig(top_k=args.top_k))
    roots = corpus.documents[: args.verify_docs]
    docs = [el._root(d["text"]) for d in roots]
    scored = el.anchors(docs)
    ents, anchors = [e for e, _ in scored], [a for _, a in scored]
    cands = el.retrieve([d["id"] for d in roots], docs, anchors)
    n_unique = sum(len(c) for c in cands)
    n_pairs = sum(len(ts) for c in cands for ts in c.values())
    t_ver_b, ver_b = best_of(lambda: el.verify(docs, ents, cands), args.repeat)
    t_ver_p, ver_p = best_of(lambda: el.verify(docs, ents, cands, per_pair=True), args.repeat)
    delta_diff = max((abs(x - y) for bd, pd in zip(ver_b, ver_p) for b, p in zip(bd, pd)
                      for x, y in zip(b["delta"], p["delta"])), default=0.0)

    result = {
        "command": "OMP_NUM_THREADS=1 python benchmarks/bench_data_scoring.py " + " ".join(sys.argv[1:]),
        "model": model_name, "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
        "scoring": {
            "documents": len(seqs), "tokens": n_tokens, "batch_size": args.batch_size,
            "batched_s": round(t_batched, 4), "plain_loop_s": round(t_plain, 4),
            "batched_tokens_per_s": round(n_tokens / t_batched, 1),
            "plain_loop_tokens_per_s": round(n_tokens / t_plain, 1),
            "speedup": round(t_plain / t_batched, 2), "max_entropy_diff": max_diff,
        },
        "verification": {
            "root_documents": len(roots), "anchors": sum(len(a) for a in anchors), "top_k": args.top_k,
            "unique_candidates_forwards": n_unique, "candidate_anchor_pairs_forwards": n_pairs,
            "batched_s": round(t_ver_b, 4), "per_pair_s": round(t_ver_p, 4),
            "speedup": round(t_ver_p / t_ver_b, 2), "max_delta_diff": delta_diff,
        },
        "note": "CPU timings on a shared machine: compare the ratios, not the absolute numbers.",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
