# Every dependency comes from Debian 12 packages (scripts/setup.sh installs them).
find_package(PkgConfig REQUIRED)

# xxHash: pkg-config only.
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
add_library(kvr::xxhash ALIAS PkgConfig::XXHASH)

find_package(nlohmann_json 3.11 REQUIRED)

pkg_check_modules(SIMDJSON REQUIRED IMPORTED_TARGET simdjson)
add_library(kvr::simdjson ALIAS PkgConfig::SIMDJSON)

if(KVR_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KVR_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

find_package(fmt 9 REQUIRED)

# msgpack-c C++ (header-only): its SAX parser reads KV-event payloads.
find_package(msgpack-cxx CONFIG QUIET)
if(NOT TARGET msgpackc-cxx)
  find_package(msgpack CONFIG REQUIRED)
endif()

# CAF 0.17.6: Debian ships no CMake config, so the imported targets are declared by hand.
find_package(Threads REQUIRED)
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
add_library(caf::core UNKNOWN IMPORTED)
set_target_properties(caf::core PROPERTIES
  IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)

# ZeroMQ + cppzmq (header-only C++ binding).
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
add_library(kvr::zmq ALIAS PkgConfig::ZMQ)

# Boost 1.74 Asio / Beast (header-only here).
find_package(Boost 1.74 REQUIRED)

# OpenSSL: base64 for etcd's JSON gateway.
find_package(OpenSSL REQUIRED)

# The tokenizer: PCRE2 (UTF, UCP, JIT) for the pre-tokenizer regex, utf8proc for NFC.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
add_library(kvr::pcre2 ALIAS PkgConfig::PCRE2)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
add_library(kvr::utf8proc ALIAS PkgConfig::UTF8PROC)

# Images: stb_image (header-only) for PNG / JPEG / GIF / BMP headers, libwebp for WebP's.
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
add_library(kvr::webp ALIAS PkgConfig::WEBP)

# NATS C client (libnats-dev): router replicas share their bookings over it (actors/replica).
pkg_check_modules(NATS REQUIRED IMPORTED_TARGET libnats)
add_library(kvr::nats ALIAS PkgConfig::NATS)
