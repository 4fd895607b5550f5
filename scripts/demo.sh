#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, then compares routing
# policies on a local cluster: kvrouter in front of 4 simulated engines (kvrouter-mocker, KV
# events on, caches too small for every group's prompt prefix), the same workload replayed for
# each policy by kvrouter-bench (about 20 s each), then one table and a TTFT plot.
#
#   bash scripts/demo.sh                       kv, approximate kv, round-robin
#   KVR_DEMO_POLICIES=kv,round-robin,random bash scripts/demo.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
build="${KVR_BUILD_DIR:-$repo/build}"
out="$build/demo"
mkdir -p "$out"

cat <<'TEXT'

kvrouter demo: 4 simulated engines (896 KV blocks of 16 tokens each), 16 groups of requests
that share a 2048-token system prompt (128 blocks per group, 2048 in all: more than any one
engine holds), 24 requests per group, Poisson arrivals at 20 requests/s, 16 output tokens each.
Each policy gets a fresh cluster and the same requests.

TEXT
"$build/kvrouter-bench" compare \
  --policies "${KVR_DEMO_POLICIES:-kv,approx-kv,round-robin}" \
  --mockers 4 --mocker-flag=--num-blocks --mocker-flag=896 --mocker-flag=--speedup --mocker-flag=2 \
  --groups 16 --prompts-per-group 24 --system-tokens 2048 --question-tokens 64 --output-tokens 16 --rate 20 \
  --out "$out/results.json" --csv "$out/results.csv" --plot "$out/ttft.png"
cat <<TEXT

hit rate: the engines' own prefix-cache hit rate (vllm:prefix_cache_hits_total / queries_total).
TTFT / ITL: time to first token / between tokens, as the client saw them through kvrouter.
CPU us/req: kvrouter's CPU time (all its threads, in nanoseconds from the scheduler) per request.
Results: $out/results.json, $out/results.csv; plot: $out/ttft.png
TEXT
