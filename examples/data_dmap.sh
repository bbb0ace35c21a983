#!/usr/bin/env bash
# DMAP (`posttrain data dmap`): a distribution map of texts under a language model, with a chi-square uniformity test.
# Paper: "DMAP: A Distribution Map for Text" (Kempton et al. 2026), arXiv 2602.11871.
# Shows: each token of a text mapped to a uniform draw inside its interval of the model's sorted next-token
#   distribution; pure samples of the embedded tiny corpus LM map uniformly, top-k and low-temperature samples
#   pile up at the top (rejected by the chi-square test), next to the built-in corpus. Output:
#   outputs/data-dmap/dmap_report.json and the PNG histograms.
# Time on 2 CPU cores, one thread: 14 s of CPU time as /usr/bin/time counts it (Ray's worker processes may
#   not be included), the tiny corpus LM cached [201 s wall]: pure samples uniform (p = 0.76), top-k, temperature 0.5 and the corpus not.
# Real model: add --model smollm2-135m --input your_texts.jsonl (or vllm:PATH / http://HOST:PORT/v1#MODEL with --tokenizer).
set -euo pipefail
posttrain data dmap --output outputs/data-dmap "$@"
