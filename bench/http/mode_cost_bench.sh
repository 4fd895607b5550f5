#!/usr/bin/env bash
# What a request costs the router per body and routing mode, HAProxy 2.6 side by side in one
# run, in front of the same fast backend (nginx answering a fixed completion): wrk -t1, one I/O
# thread and one actor thread for kvrouter, one thread for HAProxy; CPU per request from
# /proc/PID/stat (user + system, all threads); medians of the rounds.
#
# Bodies:
#   tiny chat    a two-message chat (150 B)
#   token ids    a completion whose prompt is 4096 token ids (25 KB)
#   prose chat   a chat whose user message is 17.5 KB of English (the licence texts every Debian
#                system has), a different request number in front each time, so that no cache
#                of the router's can answer it
# Modes: kvrouter round-robin; kvrouter kv with Qwen3's tokenizer and chat template (no KV
# events: approximate prefix scoring, every prompt tokenized and hashed).
#
#   bench/http/mode_cost_bench.sh [SECONDS per run, default 5] [CONNECTIONS, default 16] [ROUNDS, default 3]
#   KVR_CPUS=0 or 0,1: pin kvrouter to those cores (taskset), for the scaling figure
#   KVR_ALL_CPUS=0 or 0,1: pin everything (kvrouter, nginx, HAProxy, wrk) to those cores: the
#     whole stack on N cores, so that the load generator and the backend take the same share
#     of the router's cores at 1 core as at 2 (with KVR_CPUS alone they have a core to
#     themselves at 1 and share at 2)
#   KVR_FLAGS="...": more kvrouter flags (e.g. "--threads 2 --actor-threads 2")
#   KVR_BODIES="tiny ids prose", KVR_TARGETS="haproxy rr kv": a subset
#   KVR_HOLD=SECONDS: start everything, print the PIDs and the work dir, wait, exit (for perf)
#
# Needs wrk, haproxy and nginx-light (Debian); installs them if missing. Not part of the tests.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-5}
connections=${2:-16}
rounds=${3:-3}
kvrouter=${KVROUTER:-$repo/build/kvrouter}
bodies=${KVR_BODIES:-tiny ids prose}
targets=${KVR_TARGETS:-haproxy rr kv}
router_flags=${KVR_FLAGS:---threads 1 --actor-threads 1 --hashers 1}
pin=() backend_pin=()
[ -n "${KVR_CPUS:-}" ] && pin=(taskset -c "$KVR_CPUS")
[ -n "${KVR_ALL_CPUS:-}" ] && pin=(taskset -c "$KVR_ALL_CPUS") backend_pin=(taskset -c "$KVR_ALL_CPUS")
for tool in wrk haproxy nginx; do
  command -v $tool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk haproxy nginx-light >/dev/null
done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

backend_port=18911 haproxy_port=18912 rr_port=18913 kv_port=18914
source "$repo/bench/http/backends.sh"
start_nginx "$work" $backend_port
start_haproxy "$work" $haproxy_port $backend_port

# shellcheck disable=SC2086
"${pin[@]}" "$kvrouter" --model m --host 127.0.0.1 --port $rr_port $router_flags \
  --worker http://127.0.0.1:$backend_port --router-mode round-robin 2>"$work/rr.err" &
pids+=($!)
rr_pid=$!
# shellcheck disable=SC2086
"${pin[@]}" "$kvrouter" --model m --host 127.0.0.1 --port $kv_port $router_flags \
  --worker http://127.0.0.1:$backend_port --router-mode kv \
  --tokenizer "$repo/.cache/tokenizers/qwen3/tokenizer.json" \
  --tokenizer-config "$repo/.cache/tokenizers/qwen3/tokenizer_config.json" 2>"$work/kv.err" &
pids+=($!)
kv_pid=$!

# The wrk scripts: a fixed body, or one built per request (the prose chat).
/usr/bin/python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
def lua_string(s):
    return "[==[" + s + "]==]"
def fixed(name, path, body):
    with open(f"{work}/{name}.lua", "w") as f:
        f.write(f'wrk.method = "POST"\nwrk.path = "{path}"\nwrk.headers["Content-Type"] = "application/json"\n')
        f.write(f"wrk.body = {lua_string(body)}\n")
fixed("tiny", "/v1/chat/completions", json.dumps({"model": "m", "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a haiku about caches."}], "max_tokens": 32}, separators=(",", ":")))
rng = random.Random(4096)
fixed("ids", "/v1/completions", json.dumps({"model": "m", "prompt": [rng.randrange(150000) for _ in range(4096)],
                                            "max_tokens": 16}, separators=(",", ":")))
prose = "".join(open(f"/usr/share/common-licenses/{n}").read() for n in ("GPL-3", "Apache-2.0"))[:17500]
head = json.dumps({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "@@"}]}, separators=(",", ":"))
before, after = head.split("@@")
escaped = json.dumps(prose)[1:-1]
with open(f"{work}/prose.lua", "w") as f:
    f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
    f.write(f"local before = {lua_string(before)}\nlocal text = {lua_string(escaped)}\nlocal after = {lua_string(after)}\n")
    f.write("local n = 0\nfunction request()\n  n = n + 1\n")
    f.write('  return wrk.format(nil, "/v1/chat/completions", nil, before .. "Request " .. n .. ". " .. text .. after)\nend\n')
PY
sleep 1
[ -n "${KVR_HOLD:-}" ] && { echo "rr=$rr_pid kv=$kv_pid work=$work"; sleep "$KVR_HOLD"; exit 0; }
for port in $rr_port $kv_port; do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { sleep 2; curl -sf "http://127.0.0.1:$port/ready" >/dev/null; }
done

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# run PORT PID SCRIPT -> "rps cpu_us_per_req"
run() {
  local port=$1 pid=$2 script=$3 before after out requests non2xx
  before=$(cpu "$pid")
  out=$("${backend_pin[@]}" wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/$script.lua" "http://127.0.0.1:$port")
  after=$(cpu "$pid")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  [ -n "$non2xx" ] && { echo "port $port, $script: $non2xx non-2xx answers" >&2; exit 1; }
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk -v d="$((after - before))" -v t="$ticks" -v n="$requests" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A results
for round in $(seq "$rounds"); do
  for body in $bodies; do
    for target in $targets; do
      case $target in
        haproxy) port=$haproxy_port pid=$haproxy_pid ;;
        rr) port=$rr_port pid=$rr_pid ;;
        kv) port=$kv_port pid=$kv_pid ;;
      esac
      results[$body.$target]+="$(run $port $pid $body)"$'\n'
    done
  done
done

echo "## CPU-us per request (requests/s), wrk -t1 -c$connections -d${seconds}s, $rounds rounds, medians"
echo "kvrouter flags: $router_flags${KVR_CPUS:+, pinned to CPUs $KVR_CPUS}${KVR_ALL_CPUS:+, everything pinned to CPUs $KVR_ALL_CPUS}"
echo
header="| body |" rule="|---|"
for target in $targets; do
  case $target in haproxy) name="HAProxy 2.6" ;; rr) name="kvrouter round-robin" ;; kv) name="kvrouter kv (tokenizer + template)" ;; esac
  header+=" $name |" rule+="---|"
done
echo "$header"
echo "$rule"
for body in $bodies; do
  case $body in tiny) row="| tiny chat |" ;; ids) row="| completion, 4096 token ids (25 KB) |" ;; prose) row="| chat, 17.5 KB English, new each request |" ;; esac
  ha=$(printf '%s' "${results[$body.haproxy]:-}" | awk 'NF {print $2}' | median)
  for target in $targets; do
    c=$(printf '%s' "${results[$body.$target]}" | awk 'NF {print $2}' | median)
    r=$(printf '%s' "${results[$body.$target]}" | awk 'NF {print $1}' | median)
    ratio=""
    [ -n "$ha" ] && [ "$target" != haproxy ] && ratio=$(awk -v a="$c" -v b="$ha" 'BEGIN {printf ", %.2fx", a / b}')
    row+=" $c us ($r/s$ratio) |"
  done
  echo "$row"
done
