#!/usr/bin/env bash
# Sci2Pol bench (`posttrain data sci2pol bench`): a model scored on the 18 Sci2Pol-Bench tasks.
# Paper: "Sci2Pol: Evaluating and Fine-tuning LLMs on Scientific-to-Policy Brief Generation" (Wu et al. 2025), arXiv 2509.21493.
# Shows: the built-in miniature items of the 18 tasks (classification, extraction, open-ended briefs), answered by
#   the model under test; tasks 7-15 scored by the rubric judge, the others by their metrics, with bootstrap
#   standard errors. Output: outputs/data-sci2pol-bench/results.json (resumable).
# Time on 2 CPU cores, one thread: not measured for this command here; benchmarks/sci2pol.md's run of the same 36 built-in
#   items with two models under test (the tiny corpus LM and smollm2-135m) took 575 s on 2 shared cores.
# Real model (the default model and judge are the pretrained smollm2-135m): add --model vllm:PATH --judge vllm:JUDGE
#   --bench_dir RELEASE_DIR (the release's taskN.jsonl files load unchanged).
set -euo pipefail
posttrain data sci2pol bench --output outputs/data-sci2pol-bench "$@"
