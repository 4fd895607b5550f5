# Every dependency comes from Debian 12 packages (scripts/setup.sh installs them).
find_package(PkgConfig REQUIRED)

# xxHash: pkg-config only.
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
add_library(kvr::xxhash ALIAS PkgConfig::XXHASH)

find_package(nlohmann_json 3.11 REQUIRED)

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
