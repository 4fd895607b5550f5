#include "core/common/flat_u64_map.hpp"

#include <random>
#include <unordered_map>

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(flat_u64_map, behaves_like_unordered_map_under_random_inserts_erases_extracts_and_updates) {
  std::mt19937_64 rng(7);
  flat_u64_map<std::uint32_t> map;
  std::unordered_map<std::uint64_t, std::uint32_t> reference;
  for (int step = 0; step < 200000; ++step) {
    // Small keys (including 0) collide on purpose; large keys exercise the mixing.
    const std::uint64_t key = (step % 3 == 0) ? rng() : rng() % 512;
    const auto value = static_cast<std::uint32_t>(rng());
    switch (rng() % 6) {
      case 0:
      case 1:
        map.insert_or_assign(key, value);
        reference[key] = value;
        break;
      case 2:
        EXPECT_EQ(map.erase(key), reference.erase(key) == 1);
        break;
      case 3: {
        const std::optional<std::uint32_t> extracted = map.extract(key);
        auto it = reference.find(key);
        ASSERT_EQ(extracted.has_value(), it != reference.end()) << key;
        if (extracted) {
          EXPECT_EQ(*extracted, it->second);
          reference.erase(it);
        }
        break;
      }
      case 4: {  // a count taken down by one, erased at zero
        auto it = reference.find(key);
        const bool there = map.update_or_erase(key, [](std::uint32_t& v) { return --v % 4 == 0; });
        ASSERT_EQ(there, it != reference.end()) << key;
        if (there && --it->second % 4 == 0) reference.erase(it);
        break;
      }
      default: {
        const std::uint32_t* found = map.find(key);
        auto it = reference.find(key);
        ASSERT_EQ(found != nullptr, it != reference.end()) << key;
        if (found) {
          EXPECT_EQ(*found, it->second);
        }
      }
    }
    ASSERT_EQ(map.size(), reference.size());
  }
  std::size_t visited = 0;
  map.for_each([&](std::uint64_t key, std::uint32_t value) {
    ++visited;
    EXPECT_EQ(reference.at(key), value);
  });
  EXPECT_EQ(visited, reference.size());
}

TEST(flat_u64_map, erase_if_keeps_everything_else_findable) {
  flat_u64_map<std::uint32_t> map;
  for (std::uint64_t k = 0; k < 5000; ++k) map.insert_or_assign(k * 7, static_cast<std::uint32_t>(k));
  EXPECT_EQ(map.erase_if([](std::uint64_t, std::uint32_t v) { return v % 2 == 0; }), 2500u);
  for (std::uint64_t k = 0; k < 5000; ++k) EXPECT_EQ(map.find(k * 7) != nullptr, k % 2 == 1) << k;
}

TEST(flat_u64_map, try_emplace_does_not_overwrite) {
  flat_u64_map<int> map;
  EXPECT_TRUE(map.try_emplace(5, 1).second);
  auto [value, inserted] = map.try_emplace(5, 2);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(*value, 1);
}

}  // namespace
}  // namespace kvr
