#include "core/kv/msgpack_tape.hpp"

#include <optional>

#include <msgpack.hpp>

namespace kvr {

std::string_view to_string(mp_error error) {
  switch (error) {
    case mp_error::truncated: return "truncated msgpack";
    case mp_error::malformed: return "malformed msgpack";
    case mp_error::too_deep: return "msgpack nested too deeply";
    case mp_error::trailing_bytes: return "bytes after the msgpack value";
  }
  return "msgpack error";
}

/// msgpack-c visitor appending one node per value. Containers record where their subtree ends
/// when they close.
struct tape_builder {
  mp_tape& tape;
  std::uint32_t max_depth;
  bool too_deep = false;
  bool truncated = false;

  mp_node& push(mp_node::kind type) {
    mp_node& node = tape.nodes_.emplace_back();
    node.type = type;
    node.next = static_cast<std::uint32_t>(tape.nodes_.size());  // leaves: the next node
    return node;
  }
  bool open(mp_node::kind type, std::uint32_t count) {
    if (tape.open_.size() >= max_depth) {
      too_deep = true;
      return false;
    }
    push(type).count = count;
    tape.open_.push_back(static_cast<std::uint32_t>(tape.nodes_.size() - 1));
    return true;
  }
  bool close() {
    tape.nodes_[tape.open_.back()].next = static_cast<std::uint32_t>(tape.nodes_.size());
    tape.open_.pop_back();
    return true;
  }
  bool bytes(mp_node::kind type, const char* data, std::uint32_t size) {
    mp_node& node = push(type);
    node.data = data;
    node.size = size;
    return true;
  }

  bool visit_nil() { return push(mp_node::kind::nil), true; }
  bool visit_boolean(bool v) { return push(mp_node::kind::boolean).b = v, true; }
  bool visit_positive_integer(std::uint64_t v) { return push(mp_node::kind::uint).u = v, true; }
  bool visit_negative_integer(std::int64_t v) { return push(mp_node::kind::sint).i = v, true; }
  bool visit_float32(float v) { return push(mp_node::kind::f64).d = v, true; }
  bool visit_float64(double v) { return push(mp_node::kind::f64).d = v, true; }
  bool visit_str(const char* v, std::uint32_t size) { return bytes(mp_node::kind::str, v, size); }
  bool visit_bin(const char* v, std::uint32_t size) { return bytes(mp_node::kind::bin, v, size); }
  bool visit_ext(const char* v, std::uint32_t size) { return bytes(mp_node::kind::ext, v, size); }
  bool start_array(std::uint32_t n) { return open(mp_node::kind::array, n); }
  bool start_array_item() { return true; }
  bool end_array_item() { return true; }
  bool end_array() { return close(); }
  bool start_map(std::uint32_t n) { return open(mp_node::kind::map, n); }
  bool start_map_key() { return true; }
  bool end_map_key() { return true; }
  bool start_map_value() { return true; }
  bool end_map_value() { return true; }
  bool end_map() { return close(); }
  void parse_error(std::size_t, std::size_t) {}
  void insufficient_bytes(std::size_t, std::size_t) { truncated = true; }
  bool referenced() const { return true; }  // str / bin point into the caller's buffer
  void set_referenced(bool) {}
};

std::expected<mp_ref, mp_error> mp_tape::parse(std::span<const std::uint8_t> bytes, std::uint32_t max_depth) {
  nodes_.clear();
  open_.clear();
  if (bytes.empty()) return std::unexpected(mp_error::truncated);
  tape_builder builder{*this, max_depth};
  std::size_t offset = 0;
  bool ok = false;
  try {
    ok = msgpack::v2::parse(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset, builder);
  } catch (const std::exception&) {  // msgpack-c throws for a few size overflows
    return std::unexpected(mp_error::malformed);
  }
  if (builder.too_deep) return std::unexpected(mp_error::too_deep);
  if (builder.truncated) return std::unexpected(mp_error::truncated);
  if (!ok || !open_.empty()) return std::unexpected(mp_error::malformed);
  if (offset != bytes.size()) return std::unexpected(mp_error::trailing_bytes);
  return mp_ref(this, 0);
}

mp_ref mp_ref::element(std::uint32_t i) const {
  mp_ref child = first_child();
  for (; i > 0; --i) child = child.next_sibling();
  return child;
}

std::optional<mp_ref> mp_ref::find(std::string_view key) const {
  mp_ref k = first_child();
  for (std::uint32_t pair = 0; pair < size(); ++pair) {
    const mp_ref value = k.next_sibling();
    if (k.is_str() && k.str() == key) return value;
    k = value.next_sibling();
  }
  return std::nullopt;
}

}  // namespace kvr
