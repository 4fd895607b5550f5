#!/usr/bin/env bash
# Fails if a file under core/ includes CAF, ZeroMQ, Asio/Beast, threads, or reads a clock or
# global randomness. core/ is pure by contract (docs/architecture.md §4).
set -u
core=${1:?usage: check_core_purity.sh CORE_DIR}
bad=$(grep -rnE '#\s*include\s*[<"](caf/|zmq|boost/asio|boost/beast|thread>|mutex>|atomic>|condition_variable>|future>)' "$core")
clock=$(grep -rnE 'chrono::(steady|system|high_resolution)_clock::now|std::random_device|[^_a-z]rand\(\)' "$core")
if [ -n "$bad$clock" ]; then
  echo "core/ must stay pure; offending lines:"
  printf '%s\n' "$bad" "$clock" | sed '/^$/d'
  exit 1
fi
echo "core/ is pure ($(find "$core" -name '*.[ch]pp' | wc -l) files checked)"
