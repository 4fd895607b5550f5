#pragma once
/// A bounded, flat reading of one msgpack value: msgpack-c's SAX parser fills a "tape" of
/// nodes in document order, and `mp_ref` walks it.
///
/// Why not msgpack-c's `unpack` into `msgpack::object`: it allocates each array's element
/// storage up front from the declared length, so a few header bytes declaring 2^32 elements
/// force a huge allocation. On the tape every node is backed by at least one input byte, so
/// memory is bounded by the payload size, and nesting is bounded by `max_depth`.

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace kvr {

struct mp_node {
  enum class kind : std::uint8_t { nil, boolean, uint, sint, f64, str, bin, ext, array, map };
  kind type = kind::nil;
  std::uint32_t count = 0;  ///< array elements or map pairs
  std::uint32_t next = 0;   ///< index of the node after this one's subtree
  std::uint32_t size = 0;   ///< str / bin / ext bytes
  union {
    std::uint64_t u = 0;
    std::int64_t i;
    double d;
    bool b;
  };
  const char* data = nullptr;  ///< str / bin / ext bytes (points into the parsed buffer)
};

enum class mp_error : std::uint8_t { truncated, malformed, too_deep, trailing_bytes };
[[nodiscard]] std::string_view to_string(mp_error error);

class mp_tape;

/// A position on a tape. Cheap to copy; valid while the tape and the parsed buffer live.
class mp_ref {
 public:
  mp_ref(const mp_tape* tape, std::uint32_t index) : tape_(tape), index_(index) {}

  [[nodiscard]] inline const mp_node& node() const;
  [[nodiscard]] mp_node::kind type() const { return node().type; }
  [[nodiscard]] bool is_nil() const { return type() == mp_node::kind::nil; }
  [[nodiscard]] bool is_array() const { return type() == mp_node::kind::array; }
  [[nodiscard]] bool is_map() const { return type() == mp_node::kind::map; }
  [[nodiscard]] bool is_str() const { return type() == mp_node::kind::str; }
  [[nodiscard]] bool is_integer() const { return type() == mp_node::kind::uint || type() == mp_node::kind::sint; }
  [[nodiscard]] std::uint32_t size() const { return node().count; }
  [[nodiscard]] std::string_view str() const { return {node().data, node().size}; }
  [[nodiscard]] std::span<const std::uint8_t> bytes() const {
    return {reinterpret_cast<const std::uint8_t*>(node().data), node().size};
  }

  /// The i-th element of an array (walks the siblings: O(i)).
  [[nodiscard]] mp_ref element(std::uint32_t i) const;
  /// The value under string key `key` of a map, if present.
  [[nodiscard]] std::optional<mp_ref> find(std::string_view key) const;

  /// Iteration over an array's elements, or over a map's keys (use `value_of`).
  [[nodiscard]] mp_ref first_child() const { return {tape_, index_ + 1}; }
  [[nodiscard]] mp_ref next_sibling() const { return {tape_, node().next}; }

 private:
  const mp_tape* tape_;
  std::uint32_t index_;
};

class mp_tape {
 public:
  /// Parses exactly one msgpack value spanning all of `bytes`, nesting at most `max_depth`
  /// containers. Reuses the tape's storage across calls.
  [[nodiscard]] std::expected<mp_ref, mp_error> parse(std::span<const std::uint8_t> bytes, std::uint32_t max_depth);

  [[nodiscard]] const mp_node& at(std::uint32_t index) const { return nodes_[index]; }
  [[nodiscard]] std::size_t node_count() const { return nodes_.size(); }
  /// Scratch kept between parses (bytes), for tests and memory accounting.
  [[nodiscard]] std::size_t retained_bytes() const {
    return nodes_.capacity() * sizeof(mp_node) + open_.capacity() * sizeof(std::uint32_t);
  }
  /// Gives back scratch beyond `max_nodes` nodes: one huge payload must not keep its memory.
  void release_beyond(std::size_t max_nodes) {
    if (nodes_.capacity() > max_nodes) std::vector<mp_node>().swap(nodes_);
    if (open_.capacity() > 1024) std::vector<std::uint32_t>().swap(open_);
  }

 private:
  friend struct tape_builder;
  std::vector<mp_node> nodes_;
  std::vector<std::uint32_t> open_;  ///< indices of containers being filled
};

inline const mp_node& mp_ref::node() const { return tape_->at(index_); }

}  // namespace kvr
