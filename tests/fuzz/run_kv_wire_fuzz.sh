#!/usr/bin/env bash
# Builds the KV-event decoder's libFuzzer target with clang-16 and runs it briefly (1 M runs or
# 60 s, whichever first) from the test vectors as seed corpus. Exits non-zero on any crash,
# sanitizer report, leak, or allocation over 256 MiB.
#
# clang-16: libstdc++ 12 gates <expected> on __cpp_concepts >= 202002L; clang 16 implements
# what that needs (P0848) but still advertises 201907L, so the macro is raised for this build.
#
#   tests/fuzz/run_kv_wire_fuzz.sh WORK_DIR [extra libFuzzer flags]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:?usage: run_kv_wire_fuzz.sh WORK_DIR}
shift
mkdir -p "$work/corpus"
binary="$work/kv_wire_fuzz"

sources=(tests/fuzz/kv_wire_fuzz.cpp core/msgpack_tape.cpp core/kv_wire.cpp core/kv_apply.cpp
         core/prefix_index.cpp core/block_hash.cpp)
newest=$(cd "$repo" && ls -t "${sources[@]}" core/*.hpp | head -1)
if [ ! -x "$binary" ] || [ "$repo/$newest" -nt "$binary" ]; then
  (cd "$repo" && clang++-16 -std=c++2b -Wno-macro-redefined -D__cpp_concepts=202002L -O1 -g \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. "${sources[@]}" \
    -lfmt -lxxhash -o "$binary")
fi

# Seed corpus: every payload of the test vectors.
/usr/bin/python3 - "$repo/tests/data/kv_events" "$work/corpus" <<'PY'
import pathlib, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for tsv in src.glob("*.tsv"):
    for line in tsv.read_text().splitlines():
        if line and not line.startswith("#"):
            name, payload = line.split("\t")[0], line.split("\t")[-1]
            (dst / f"seed-{name}").write_bytes(bytes.fromhex(payload))
PY

"$binary" -runs=1000000 -max_total_time=60 -malloc_limit_mb=256 -rss_limit_mb=1024 \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus" 2>&1 | tail -20
exit "${PIPESTATUS[0]}"
