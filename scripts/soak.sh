#!/usr/bin/env bash
# Chaos soak of a built kvrouter (tests/integration/soak.py): engines killed and restarted, KV
# batches dropped, clients leaving mid-stream, config reloads, components killed, bursts.
#   scripts/soak.sh [MINUTES, default 30]        (ctest runs 1 minute of it)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${KVR_BUILD_DIR:-$repo/build}
exec /usr/bin/python3 "$repo/tests/integration/soak.py" "$build/kvrouter" "$build/kvrouter-mocker" "${1:-30}"
