#!/usr/bin/env bash
# DESIGNER (`posttrain data designer`): design-logic-guided question synthesis.
# Paper: "DESIGNER: Design-Logic-Guided Multidisciplinary Data Synthesis for LLM Reasoning" (Liu et al. 2025), arXiv 2508.12726.
# Shows: the built-in question bank annotated (discipline, difficulty, type), sampled 3:2:1 per cluster, turned into
#   Mermaid design logics (deduplicated at cosine 0.85), source texts segmented, the top-5 logics retrieved per
#   segment, a question + reference answer generated from each, MinHash-filtered, and a long-CoT response written;
#   every LLM stage through smollm2-135m (offline), JSON replies decoded under their schema. Output:
#   outputs/data-designer/designer.jsonl (+ report.json; rerun to resume from the finished chunks).
# Time on 2 CPU cores, one thread: not measured for this command here; benchmarks/designer.md's four runs of the pipeline on
#   smollm2-135m (through vLLM's CPU engine, one thread) took 177-366 s each.
# Real model (the default is already the pretrained smollm2-135m): add --model vllm:Qwen/Qwen2.5-7B-Instruct or
#   --model http://HOST:PORT/v1#MODEL. Train on the output: deepspeed posttrain/train.py --algo grpo --task dataset
#   --dataset outputs/data-designer/designer.jsonl --prompt_column question --answer_column reference_answer --model smollm2-135m
# Extra arguments go to the pipeline (e.g. --mode exemplar, the paper's "w/o design logic" ablation).
set -euo pipefail
posttrain data designer --output outputs/data-designer "$@"
