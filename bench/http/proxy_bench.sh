#!/usr/bin/env bash
# kvrouter vs HAProxy 2.6 in front of the same fast backend (nginx answering a fixed chat
# completion), side by side in one run: wrk posts a chat body; each proxy runs one I/O thread;
# CPU per request is read from /proc/PID/stat (user + system, all threads). The same body also
# goes to kvrouter's pass-through path (POST /v1/embeddings, a route kvrouter does not serve):
# the "kvrouter pass-through" row.
#
#   bench/http/proxy_bench.sh [SECONDS per run, default 10] [CONNECTIONS, default 32] [ROUNDS, default 3]
#                             [PACED_CONNECTIONS: the latency phase; default: enough connections,
#                              each pausing 1 ms between requests, for half of kvrouter's peak]
#
# Needs wrk, haproxy and nginx-light (Debian); installs them if missing. Not part of the tests.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-10}
connections=${2:-32}
rounds=${3:-3}
paced_connections=${4:-}
kvrouter=${KVROUTER:-$repo/build/kvrouter}
for tool in wrk haproxy nginx; do
  command -v $tool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk haproxy nginx-light >/dev/null
done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

backend_port=18901 haproxy_port=18902 router_port=18903
source "$repo/bench/http/backends.sh"
start_nginx "$work" $backend_port
start_haproxy "$work" $haproxy_port $backend_port

"$kvrouter" --model m --host 127.0.0.1 --port $router_port --threads 1 --actor-threads 1 \
  --worker http://127.0.0.1:$backend_port --router-mode round-robin 2>"$work/kvrouter.err" &
pids+=($!)
router_pid=$!
sleep 1

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about caches."}],"max_tokens":32}'
LUA
# The latency phase paces each connection (1 ms between its requests): an offered rate, not a
# closed loop that saturates at a handful of connections.
{ cat "$work/post.lua"; echo 'function delay() return 1 end'; } > "$work/paced.lua"

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# run NAME PORT PID CONNECTIONS [SCRIPT] [PATH] -> "rps p50_ms p99_ms cpu_us_per_req"
run() {
  local port=$2 pid=$3 c=$4 script=${5:-post.lua} path=${6:-/v1/chat/completions} before after out
  before=$([ "$pid" = - ] && echo 0 || cpu "$pid")
  out=$(wrk -t1 -c"$c" -d"${seconds}s" --latency -s "$work/$script" "http://127.0.0.1:$port$path")
  after=$([ "$pid" = - ] && echo 0 || cpu "$pid")
  local rps p50 p99 requests non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  [ -n "$non2xx" ] && { echo "$1: $non2xx non-2xx answers" >&2; exit 1; }
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) {sub(/us/,"",v); print v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v); print v} else {sub(/s/,"",v); print v*1000} }'; }
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") $(awk -v d="$((after - before))" -v t="$ticks" -v n="$requests" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A results
for round in $(seq "$rounds"); do
  results[direct]+="$(run direct $backend_port - "$connections")"$'\n'
  results[haproxy]+="$(run haproxy $haproxy_port $haproxy_pid "$connections")"$'\n'
  results[kvrouter]+="$(run kvrouter $router_port $router_pid "$connections")"$'\n'
  results[passthrough]+="$(run passthrough $router_port $router_pid "$connections" post.lua /v1/embeddings)"$'\n'
done
echo "## Peak: wrk -t1 -c$connections -d${seconds}s, $rounds rounds, medians"
echo
echo "| target | requests/s | p50 ms | p99 ms | proxy CPU-us per request |"
echo "|---|---|---|---|---|"
for name in direct haproxy kvrouter passthrough; do
  col() { printf '%s' "${results[$name]}" | awk -v c="$1" 'NF {print $c}' | median; }
  label=$name; [ $name = passthrough ] && label="kvrouter pass-through"
  echo "| $label | $(col 1) | $(col 2) | $(col 3) | $([ $name = direct ] && echo - || col 4) |"
done
kv_cpu=$(printf '%s' "${results[kvrouter]}" | awk 'NF {print $4}' | median)
ha_cpu=$(printf '%s' "${results[haproxy]}" | awk 'NF {print $4}' | median)
echo
pt_cpu=$(printf '%s' "${results[passthrough]}" | awk 'NF {print $4}' | median)
echo "kvrouter / HAProxy CPU per request: $(awk -v a="$kv_cpu" -v b="$ha_cpu" 'BEGIN {printf "%.2f", a / b}') (chat), $(awk -v a="$pt_cpu" -v b="$ha_cpu" 'BEGIN {printf "%.2f", a / b}') (pass-through)"

# Added latency at about half of kvrouter's peak (paced connections), medians of the rounds.
kv_peak=$(printf '%s' "${results[kvrouter]}" | awk 'NF {print $1}' | median)
# A paced connection makes about 520 requests/s here (a 1 ms pause rounded up by wrk's timer,
# plus one round trip).
[ -n "$paced_connections" ] || paced_connections=$(awk -v p="$kv_peak" 'BEGIN {c = int(p / 2 / 520 + 0.5); print (c < 1 ? 1 : c)}')
declare -A light
for round in $(seq "$rounds"); do
  light[direct]+="$(run direct $backend_port - "$paced_connections" paced.lua)"$'\n'
  light[haproxy]+="$(run haproxy $haproxy_port $haproxy_pid "$paced_connections" paced.lua)"$'\n'
  light[kvrouter]+="$(run kvrouter $router_port $router_pid "$paced_connections" paced.lua)"$'\n'
done
echo
echo "## Paced load: wrk -t1 -c$paced_connections -d${seconds}s, 1 ms between a connection's requests, $rounds rounds, medians"
echo
echo "| target | requests/s | share of kvrouter's peak | p50 ms | p99 ms | added p99 ms vs direct |"
echo "|---|---|---|---|---|---|"
direct_p99=$(printf '%s' "${light[direct]}" | awk 'NF {print $3}' | median)
for name in direct haproxy kvrouter; do
  col() { printf '%s' "${light[$name]}" | awk -v c="$1" 'NF {print $c}' | median; }
  p99=$(col 3)
  echo "| $name | $(col 1) | $(awk -v a="$(col 1)" -v b="$kv_peak" 'BEGIN {printf "%.0f %%", 100 * a / b}') | $(col 2) | $p99 | $(awk -v a="$p99" -v b="$direct_p99" 'BEGIN {printf "%.3f", a - b}') |"
done
