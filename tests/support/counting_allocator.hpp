#pragma once
/// Live and peak bytes allocated through the global operator new, for the memory tests. Linking
/// tests/support/counting_allocator.cpp replaces operator new and delete in that binary, so
/// each memory test is a binary of its own (other tests need not see it).

#include <atomic>
#include <cstddef>

namespace kvr::testing {

extern std::atomic<std::size_t> live_bytes;
extern std::atomic<std::size_t> peak_bytes;

}  // namespace kvr::testing
