#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and shows what the router
# does with a few configurations (the effective config and the work each one turns on).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
kvrouter="${KVR_BUILD_DIR:-$repo/build}/kvrouter"

"$kvrouter" --help
for flags in "" "--no-kv-events" "--load-aware" "--router-mode round-robin"; do
  echo
  echo "\$ kvrouter describe $flags"
  # shellcheck disable=SC2086
  "$kvrouter" describe $flags
done
