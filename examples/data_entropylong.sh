#!/usr/bin/env bash
# EntropyLong (`posttrain data entropylong`): long-context sequences whose contexts are verified by entropy reduction.
# Paper: "EntropyLong: Effective Long-Context Training via Predictive Uncertainty" (Jia et al. 2025), arXiv 2510.02330.
# Shows: on the built-in corpus with planted (definition, use) pairs, smollm2-135m scores every token's predictive
#   entropy, high-entropy anchors (mean + 2 std) query a FAISS index of 2048-character chunks (top 32), a context is
#   kept only if it lowers the anchor's entropy by more than 40%, and the kept contexts are assembled in front of
#   the document; the planted pairs give the verification's precision / recall (eval.json). Output:
#   outputs/data-entropylong/sequences.jsonl (resumable).
# Time on 2 CPU cores, one thread: about 4-6.5 min: 240 s on an idle core, 384 s on a shared one (benchmarks/BENCHMARKS.md,
#   the same command; not re-measured here).
# Real model (the default scorer is already the pretrained smollm2-135m): add --model PATH_OR_HUB_ID or vllm:PATH,
#   and --input your documents (JSONL / Parquet / hub dataset).
set -euo pipefail
posttrain data entropylong --output outputs/data-entropylong "$@"
