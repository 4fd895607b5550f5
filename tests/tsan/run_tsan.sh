#!/usr/bin/env bash
# Builds a test with clang-16 and ThreadSanitizer and runs it; exits non-zero on a failed test
# or any race report.
#   media_fetcher: tests/actors/media_fetcher_test.cpp: the fetcher's Asio I/O, its deadline
#                  timers and the name resolver's threads (lookups, abandonment, delivery).
#   home_thread_bin: tests/actors/home_thread_bin_test.cpp: KV batches handed back to their
#                  decoder thread by the threads that drop them.
#
# Only code that does not pass messages through CAF is run here: Debian's libcaf_core 0.17.6 is
# not instrumented, so TSan cannot see the synchronization of CAF's mailboxes and reports every
# message as a race (tried on the whole router: the first report is the first message sent).
# A TSan stage of the integration tests needs a CAF built with -fsanitize=thread.
#
#   tests/tsan/run_tsan.sh media_fetcher|home_thread_bin WORK_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: run_tsan.sh media_fetcher|home_thread_bin WORK_DIR}
work=${2:?usage: run_tsan.sh media_fetcher|home_thread_bin WORK_DIR}
mkdir -p "$work"
binary="$work/${target}_tsan"

case "$target" in
  media_fetcher)
    sources=(tests/actors/media_fetcher_test.cpp actors/pipeline/media_fetcher.cpp actors/pipeline/name_resolver.cpp
             core/media/fetch_policy.cpp core/media/media.cpp core/media/base64.cpp core/common/http_url.cpp)
    libs=(-lgtest -lgtest_main -lssl -lcrypto -lfmt -lwebp -lxxhash -lpthread) ;;
  home_thread_bin)
    sources=(tests/actors/home_thread_bin_test.cpp)
    libs=(-lgtest -lgtest_main -lpthread) ;;
  *) echo "unknown TSan target $target" >&2; exit 2 ;;
esac
newest=$(cd "$repo" && ls -t "${sources[@]}" actors/pipeline/*.hpp actors/sources/*.hpp core/*/*.hpp | head -1)
if [ ! -x "$binary" ] || [ "$repo/$newest" -nt "$binary" ]; then
  # -D__cpp_concepts: see tests/fuzz/run_fuzz.sh (libstdc++ 12's <expected> under clang 16).
  (cd "$repo" && clang++-16 -std=c++2b -Wno-macro-redefined -D__cpp_concepts=202002L -O1 -g -fsanitize=thread \
    -I. "${sources[@]}" "${libs[@]}" -o "$binary")
fi
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$binary"
