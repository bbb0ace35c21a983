#!/usr/bin/env bash
# Run the CPU test suite. pytest's exit code 5 ("no tests collected") is a failure here, never a pass.
set -uo pipefail
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Two pytest workers (pytest-xdist; $POSTTRAIN_TEST_WORKERS sets how many, 0 runs in this process). Each
# module runs whole on one worker (--dist loadscope), so a module's fixtures (a vLLM engine, rollout-worker
# servers, a Ray session) start once; tests use free ports, never fixed ones, so two can run at once. Three
# workers, and handing out the longest modules first, were both slower on the 2 cores (every heavy module
# starts several processes: ranks, vLLM, Ray). The 25 slowest tests are listed at the end (where CI time
# goes). Tests marked long (minutes each) are left out: `make test-long` runs them.
# DeepSpeed's CPU all-reduce op is compiled on first use (a minute or more): once here, before the workers start.
python scripts/build_deepspeed_ops.py || exit 1
python -m pytest -m "not gpu and not long" --timeout 900 -n "${POSTTRAIN_TEST_WORKERS:-2}" --dist loadscope --durations 25 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
