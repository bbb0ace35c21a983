#!/usr/bin/env bash
# Sci2Pol corpus (`posttrain data sci2pol corpus`): citation-linked (paper, policy brief) SFT pairs.
# Paper: "Sci2Pol: Evaluating and Fine-tuning LLMs on Scientific-to-Policy Brief Generation" (Wu et al. 2025), arXiv 2509.21493.
# Shows: the built-in policy documents filtered to those citing at most 3 papers found in the paper table, two
#   relevance passes by the judge (JSON under a schema), long documents split into executive summary and remainder
#   (split pairs too similar are rejected), the brief polished 3-shot; every dropped document is in rejects.jsonl
#   with its reason. Output: outputs/data-sci2pol-corpus/pairs.jsonl ({prompt, answer}: trains with --algo sft
#   --task dataset --prompt_column prompt --answer_column answer).
# Time on 2 CPU cores, one thread: 70 s of CPU time as /usr/bin/time counts it (Ray's worker processes may
#   not be included) [1453 s wall at load ~17; benchmarks/sci2pol.md: 269 s on the same cores at load 17]: 3 pairs
#   out, 3 documents rejected with their reasons.
# Real model (the default judge is the pretrained smollm2-135m): add --judge vllm:PATH --documents DOCS.jsonl --papers PAPERS.jsonl.
set -euo pipefail
posttrain data sci2pol corpus --output outputs/data-sci2pol-corpus "$@"
