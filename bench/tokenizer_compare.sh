#!/usr/bin/env bash
# kvrouter's tokenizer and HuggingFace tokenizers on the same texts, in one run.
#   bench/tokenizer_compare.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/build/bench/kvr_bench_tokenizer" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.5 2>/dev/null | grep -E "median|Benchmark"
node "$repo/bench/tokenizer_hf.mjs"
