#!/usr/bin/env bash
# DMAP (`posttrain data dmap`): a distribution map of texts under a language model, with a chi-square uniformity test.
# Paper: "DMAP: A Distribution Map for Text" (Kempton et al. 2026), arXiv 2602.11871.
# Shows: each token of a text mapped to a uniform draw inside its interval of the model's sorted next-token
#   distribution; pure samples of the embedded tiny corpus LM map uniformly, top-k and low-temperature samples
#   pile up at the top (rejected by the chi-square test), next to the built-in corpus. Output:
#   outputs/data-dmap/dmap_report.json and the PNG histograms.
# Time on 2 CPU cores, one thread: not measured yet
# Real model: add --model smollm2-135m --input your_texts.jsonl (or vllm:PATH / http://HOST:PORT/v1#MODEL with --tokenizer).
set -euo pipefail
posttrain data dmap --output outputs/data-dmap "$@"
