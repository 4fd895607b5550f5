#include "tests/support/counting_allocator.hpp"

#include <cstdlib>
#include <new>

namespace kvr::testing {

std::atomic<std::size_t> live_bytes{0};
std::atomic<std::size_t> peak_bytes{0};

}  // namespace kvr::testing

namespace {

using kvr::testing::live_bytes;
using kvr::testing::peak_bytes;

void* counted_allocation(std::size_t size) {
  // A size header in front of each block lets operator delete know what it frees.
  auto* block = static_cast<std::size_t*>(std::malloc(size + sizeof(std::max_align_t)));
  if (block == nullptr) throw std::bad_alloc();
  *block = size;
  const std::size_t now = live_bytes.fetch_add(size) + size;
  for (std::size_t peak = peak_bytes.load(); now > peak && !peak_bytes.compare_exchange_weak(peak, now);) {
  }
  return reinterpret_cast<char*>(block) + sizeof(std::max_align_t);
}

void counted_release(void* pointer) {
  if (pointer == nullptr) return;
  auto* block = reinterpret_cast<std::size_t*>(static_cast<char*>(pointer) - sizeof(std::max_align_t));
  live_bytes.fetch_sub(*block);
  std::free(block);
}

}  // namespace

void* operator new(std::size_t size) { return counted_allocation(size); }
void* operator new[](std::size_t size) { return counted_allocation(size); }
void operator delete(void* pointer) noexcept { counted_release(pointer); }
void operator delete[](void* pointer) noexcept { counted_release(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { counted_release(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { counted_release(pointer); }
