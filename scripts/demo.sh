#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, then runs kvrouter in front
# of three stand-in workers, in kv mode and in round-robin mode, and prints where each request
# went. (The simulated engine and the load generator will replace the stand-ins.)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
build="${KVR_BUILD_DIR:-$repo/build}"
/usr/bin/python3 "$repo/scripts/demo.py" "$build/kvrouter" "$repo/.cache/tokenizers/qwen3/tokenizer.json"
