#!/usr/bin/env bash
# Builds a libFuzzer target with clang-16 and runs it briefly (1 M runs or 40 s, whichever
# first). Exits non-zero on any crash, sanitizer report, leak, or allocation over 256 MiB.
#   kv_wire: the KV-event decoder and index apply, seeded with the KV-event test vectors;
#   kv_stream: scripts of live and replayed batches through the sequence tracker, decoder and
#            index (state machine fuzzing), seeded with scripts carrying the test vectors;
#   media:   image headers and data: URIs, seeded with small images of every format;
#   request: request bodies (chat, completion, /generate, pass-through, multipart upload) through the
#            shape check, routing inputs, prompt plan, chat template
#            and tokenizer, seeded with chat and completion bodies; the bytes as text, split
#            by the hand-written pre-tokenizer and by PCRE2 (differential: they must agree);
#   config:  config files, worker specs and URLs, seeded with the example config;
#   metrics: engines' /metrics answers (Prometheus text), seeded with vLLM- and SGLang-shaped ones;
#   peers:   scripts of replica-sync messages through the peer-wire decoder and the merge of
#            remote bookings, seeded with every message shape;
#   pd:      bodies through the disaggregated legs' rewrites and prefill answers through the
#            transfer-params reader, seeded with chat, completion and /generate bodies;
#   stream:  a worker's streamed answer as migration follows it (SSE reader, answer ledger,
#            token-id stripping, continuation request and rewriting), seeded with vLLM streams.
#
# Sources compile two at a time, then link (the request target alone took 2.5 min serially).
# Objects live in WORK_DIR/objects, shared by every target: a source several targets use (the
# KV decoder and index, the JSON helpers, the config readers) compiles once, under a lock, so
# targets that ctest runs side by side never compile it twice.
#
# clang-16: libstdc++ 12 gates <expected> on __cpp_concepts >= 202002L; clang 16 implements
# what that needs (P0848) but still advertises 201907L, so the macro is raised for this build.
#
#   tests/fuzz/run_fuzz.sh kv_wire|kv_stream|media|request|config|metrics|peers|pd|stream WORK_DIR [extra libFuzzer flags]
#   (longer runs: add -max_total_time=3600 -runs=-1; a crash leaves its input in WORK_DIR)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: run_fuzz.sh kv_wire|kv_stream|media|request|config|metrics|peers|pd|stream WORK_DIR}
work=${2:?usage: run_fuzz.sh kv_wire|kv_stream|media|request|config|metrics|peers|pd|stream WORK_DIR}
shift 2
mkdir -p "$work/corpus-$target"
binary="$work/${target}_fuzz"

defines=()
case "$target" in
  kv_wire)
    sources=(tests/fuzz/kv_wire_fuzz.cpp core/kv/msgpack_view.cpp core/kv/kv_wire.cpp core/kv/kv_wire_common_shape.cpp core/kv/msgpack_token_ids.cpp core/kv/kv_apply.cpp
             core/routing/prefix_index.cpp core/routing/kv_groups.cpp core/routing/kv_tiers.cpp core/kv/block_hash.cpp core/kv/stored_block_hashes.cpp)
    libs=(-lfmt -lxxhash) ;;
  kv_stream)
    sources=(tests/fuzz/kv_stream_fuzz.cpp core/kv/msgpack_view.cpp core/kv/kv_wire.cpp core/kv/kv_wire_common_shape.cpp core/kv/msgpack_token_ids.cpp core/kv/kv_apply.cpp
             core/routing/prefix_index.cpp core/routing/kv_groups.cpp core/routing/kv_tiers.cpp core/kv/block_hash.cpp core/kv/stored_block_hashes.cpp)
    libs=(-lfmt -lxxhash) ;;
  media)
    sources=(tests/fuzz/media_fuzz.cpp core/media/media.cpp core/media/base64.cpp core/config/router_file.cpp core/config/router_config.cpp core/config/disaggregation.cpp
             core/config/worker_spec.cpp core/common/http_url.cpp core/common/json_shape.cpp core/common/json_parse.cpp)
    libs=(-lfmt -lxxhash -lwebp -lcrypto -lsimdjson) ;;
  request)
    sources=(tests/fuzz/request_fuzz.cpp core/prompt/openai.cpp core/prompt/api_translation.cpp core/prompt/token_id_array.cpp core/prompt/prompt_plan.cpp core/prompt/tokenize_api.cpp core/common/json_top_level.cpp core/common/json_parse.cpp
             core/common/json_shape.cpp core/common/multipart.cpp
             core/prompt/chat_template.cpp core/prompt/pretokenizer.cpp core/prompt/tokenizer.cpp core/prompt/bpe_merge.cpp
             core/prompt/jinja/value.cpp core/prompt/jinja/json_value.cpp core/prompt/jinja/lexer.cpp
             core/prompt/jinja/parser.cpp core/prompt/jinja/builtins.cpp core/prompt/jinja/template.cpp)
    libs=(-lfmt -lxxhash -lsimdjson -lpcre2-8 -lutf8proc)
    defines=(-DKVR_SOURCE_DIR="\"$repo\"") ;;
  config)
    sources=(tests/fuzz/config_fuzz.cpp core/config/router_file.cpp core/config/router_config.cpp core/config/disaggregation.cpp core/config/worker_spec.cpp
             core/common/http_url.cpp core/common/json_shape.cpp core/common/json_parse.cpp)
    libs=(-lfmt -lsimdjson) ;;
  metrics)
    sources=(tests/fuzz/metrics_fuzz.cpp core/metrics/prometheus_text.cpp core/metrics/engine_metrics.cpp)
    libs=() ;;
  peers)
    sources=(tests/fuzz/peer_fuzz.cpp core/replica/peer_wire.cpp core/replica/remote_bookings.cpp core/replica/peer_subjects.cpp
             core/routing/active_sequences.cpp core/kv/msgpack_view.cpp)
    libs=(-lfmt) ;;
  pd)
    sources=(tests/fuzz/pd_fuzz.cpp core/disagg/json_members.cpp core/disagg/pd_requests.cpp core/common/json_shape.cpp core/common/json_top_level.cpp
             core/common/json_parse.cpp)
    libs=(-lfmt -lsimdjson) ;;
  stream)
    sources=(tests/fuzz/stream_fuzz.cpp core/migration/sse_events.cpp core/migration/answer_ledger.cpp core/migration/continuation.cpp
             core/migration/whole_answer.cpp core/common/json_shape.cpp core/common/json_parse.cpp core/common/json_top_level.cpp)
    libs=(-lfmt -lsimdjson) ;;
  *) echo "unknown fuzz target $target" >&2; exit 2 ;;
esac
# Every object depends on its source and, conservatively, on every header.
newest_header=$(cd "$repo" && ls -t core/*/*.hpp core/*/*/*.hpp tests/support/*.hpp 2>/dev/null | head -1)
flags=(-std=c++2b -Wno-macro-redefined -Wno-unused-command-line-argument -D__cpp_concepts=202002L -O1
       -gline-tables-only -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)
objects="$work/objects"
mkdir -p "$objects"
# Compiles one source (relative to the repository) to its object unless that is up to date:
# under the object's own lock, to a temporary name, then renamed, so a target never links half
# an object another target is writing.
compile_object() {
  local source=$1 object
  shift
  object="$objects/$(echo "$source" | tr / _).o"
  (
    flock 9
    if [ ! -f "$object" ] || [ "$source" -nt "$object" ] || [ "$newest_header" -nt "$object" ]; then
      clang++-16 "$@" -c "$source" -o "$object.tmp" && mv "$object.tmp" "$object"
    fi
  ) 9>"$object.lock"
}
export -f compile_object
export objects newest_header
(cd "$repo" && printf '%s\n' "${sources[@]}" |
   xargs -P 2 -I @@ bash -c 'compile_object "$@"' compile @@ "${flags[@]}" "${defines[@]}")
object_files=()
for source in "${sources[@]}"; do object_files+=("$objects/$(echo "$source" | tr / _).o"); done
newest_object=$(ls -t "${object_files[@]}" | head -1)
if [ ! -x "$binary" ] || [ "$newest_object" -nt "$binary" ]; then
  (cd "$repo" && clang++-16 "${flags[@]}" "${object_files[@]}" "${libs[@]}" -o "$binary.tmp" && mv "$binary.tmp" "$binary")
fi

# Seed corpus: the KV-event test vectors, or one small image of every format.
/usr/bin/python3 - "$target" "$repo/tests/data/kv_events" "$work/corpus-$target" <<'PY'
import base64, pathlib, struct, sys, zlib
target, src, dst = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
if target == "request":
    bodies = {
        "chat": '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"chat_template_kwargs":{"enable_thinking":false}}',
        "completion-text": '{"model":"m","prompt":"Hello, world! \\u00e9\\ud83d\\ude00","stream":true}',
        "completion-ids": '{"model":"m","prompt":[1,2,3,4,5,6,7,8]}',
        "completion-wide-ids": '{"prompt": [ 0, 12345678 ,4294967295,\n 151643, 7 ], "model": "m", "user": "u", "stream": false}',
        "generate-ids": '{"input_ids":[100000,2,30,4000,50000,600000,7000000],"sampling_params":{"max_new_tokens":4}}',
        "completion-batch": '{"model":"m","prompt":["a","b"]}',
        "tokenize-chat": '{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"tools":[],"chat_template_kwargs":{}}',
        "detokenize": '{"tokens":[9707,11,1879,0,151645]}',
        "generate": '{"text":["first","second"],"input_ids":[[1,2],[3]],"sampling_params":{"max_new_tokens":4}}',
        "upload": 'multipart/form-data; boundary="XyZ"\n--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n--XyZ--\r\n',
    }
    for name, body in bodies.items():
        (dst / f"seed-{name}").write_text(body)
    # Structure-aware seeds (request_fuzz.cpp): 0x01, where the string goes, the string.
    for where, inner in enumerate(['{"q": [1, {"r": null}]}', '{"type": "object", "properties": {"a": {"type": "string"}}}',
                                   '{"type": "object"}', 'hi <think>x</think>', '[true, 1.5]', '{"a": "b"}']):
        (dst / f"seed-structured-{where}").write_bytes(bytes([1, where]) + inner.encode())
elif target == "config":
    repo = src.parent.parent.parent
    (dst / "seed-example").write_bytes((repo / "docs" / "router.example.json").read_bytes())
    (dst / "seed-worker").write_text("http://[::1]:8000,kv_events=tcp://h:5557,replay=tcp://h:5600,dp_size=2,id=w0,topic=kv")
elif target == "metrics":
    (dst / "seed-vllm").write_text(
        '# HELP vllm:num_requests_waiting Waiting.\n# TYPE vllm:num_requests_waiting gauge\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\nvllm:num_requests_running{engine="1"} 3\n'
        'vllm:kv_cache_usage_perc{engine="0"} 0.5\nvllm:gpu_cache_usage_perc NaN\n'
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="2048",x="a\\"b\\\\c\\nd"} 1.0\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 7 1700000000000\n')
    (dst / "seed-sglang").write_text(
        'sglang:num_queue_reqs{model_name="m"} 1\nsglang:num_running_reqs{model_name="m"} 4\n'
        'sglang:token_usage{model_name="m"} 0.28\nsglang:max_prefill_tokens{name="m"} 16384.0\n')
elif target == "pd":
    (dst / "seed-chat").write_text('{"model":"m","messages":[{"role":"user","content":"hi \\u00e9"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"min_tokens":1,"n":1}')
    (dst / "seed-completion").write_text('{"model":"m","prompt":[1,2,3],"max_completion_tokens":7,"stream":false}')
    (dst / "seed-generate").write_text('{"text":["a","b"],"sampling_params":{"max_new_tokens":4}}')
    (dst / "seed-answer").write_text('{"id":"x","choices":[{"text":"a"}],"kv_transfer_params":{"remote_host":"h","remote_block_ids":[1,2]}}')
elif target == "stream":
    chat = ('data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","prompt_token_ids":[1,2],'
            '"choices":[{"index":0,"delta":{"role":"assistant","content":""},"token_ids":[]}]}\n\n'
            'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" a"},"token_ids":[7]}]}\r\n\r\n'
            'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length","token_ids":[]}]}\n\n'
            'data: {"id":"c","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
    completion = ('data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":" b","prompt_token_ids":[3],"token_ids":[8,9]}]}\n\n'
                  ': comment\n\ndata: {"error":{"message":"boom"}}\n\n')
    (dst / "seed-chat").write_bytes(bytes([5]) + chat.encode())
    (dst / "seed-completion").write_bytes(bytes([0xC1]) + completion.encode())
elif target == "peers":
    import msgpack
    def framed(payload, step=5): return struct.pack(">H", len(payload)) + payload + bytes([step])
    booked = msgpack.packb([1, 0, "r1", 7, 1, 1700000000000000000,
                            [[0, 11, "w0", 64, 1, [1, 2, 3]], [0, 12, "w1", 32, 0, []], [1, 11], [2, 12]]])
    snapshot = msgpack.packb([1, 1, "r1", 7, 2, 1700000000000000000, 0, 1, [[11, "w0", 64, 1, True], [13, "nope", 1, 0, False]]])
    parts = msgpack.packb([1, 1, "r2", 9, 4, 0, 1, 2, [[5, "w2", 16, 0, False]]])
    other = msgpack.packb([1, 0, "r2", 9, 1, 0, [[0, 5, "w2", 16, 0, [9]]]])
    (dst / "seed-bookings").write_bytes(framed(booked))
    (dst / "seed-script").write_bytes(framed(booked) + framed(snapshot, 60) + framed(other) + framed(parts, 200))
elif target in ("kv_wire", "kv_stream"):
    vectors = {}
    for tsv in src.glob("*.tsv"):
        for line in tsv.read_text().splitlines():
            if line and not line.startswith("#"):
                name, payload = line.split("\t")[0], bytes.fromhex(line.split("\t")[-1])
                if len(payload) < 256:
                    vectors[name] = payload
    if target == "kv_wire":
        for name, payload in vectors.items():
            (dst / f"seed-{name}").write_bytes(payload)
    else:
        # Scripts: replay on; in order, a gap, a replay that fills it, an end; a restart.
        def live(step, payload): return bytes([0, step, len(payload)]) + payload
        def replayed(step, payload): return bytes([1, step, len(payload)]) + payload
        for name, p in vectors.items():
            script = bytes([1]) + live(0, p) + live(1, p) + live(3, p) + replayed(0x81, p) + replayed(1, p) + \
                bytes([2]) + live(2, p) + bytes([0, 0xf0, len(p)]) + p + live(0xf4, p) + bytes([3])
            (dst / f"seed-{name}").write_bytes(script)
else:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(b"\x00" + b"\x10" * 9 + b"\x00" + b"\x20" * 9)) + chunk(b"IEND", b"")
    seeds = {
        "png": png,
        "gif": b"GIF89a\x03\x00\x02\x00\x00\x00\x00;",
        "bmp": b"BM" + struct.pack("<IHHI", 70, 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 3, -2, 1, 24, 0, 16, 0, 0, 0, 0) + b"\x00" * 16,
        "jpeg-progressive": bytes([0xff, 0xd8, 0xff, 0xc2, 0, 0x11, 8, 0, 2, 0, 3, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]),
        "webp-lossless": b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x02\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    }
    for name, data in seeds.items():
        (dst / f"seed-{name}").write_bytes(data)
        (dst / f"seed-{name}-uri").write_bytes(b"data:image/x;base64," + base64.b64encode(data))
PY

# What earlier long runs found (committed, minimized) seeds the corpus too; a dictionary where
# the target has one.
if [ -d "$repo/tests/fuzz/corpus/$target" ]; then cp "$repo/tests/fuzz/corpus/$target"/* "$work/corpus-$target"/; fi
dictionary=()
if [ -f "$repo/tests/fuzz/$target.dict" ]; then dictionary=(-dict="$repo/tests/fuzz/$target.dict"); fi

"$binary" -runs=1000000 -max_total_time=40 -malloc_limit_mb=256 -rss_limit_mb=1024 "${dictionary[@]}" \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus-$target" 2>&1 | tail -20
exit "${PIPESTATUS[0]}"
