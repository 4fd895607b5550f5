#!/usr/bin/env bash
# The README's test command: installs what is missing, builds (Release, -j2) and runs every
# test with ctest. Exits non-zero on any failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
ctest --test-dir "${KVR_BUILD_DIR:-$repo/build}" --output-on-failure -j2
