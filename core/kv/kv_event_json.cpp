#include "core/kv/kv_event_json.hpp"

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

nlohmann::json hashes(const std::vector<std::uint64_t>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (std::uint64_t h : values) out.push_back(std::to_string(h));
  return out;
}

template <class T>
nlohmann::json optional_value(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json optional_text(const std::string& text) { return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text); }

}  // namespace

nlohmann::json to_json(const kv_event& event) {
  if (const auto* s = std::get_if<kv_stored>(&event)) {
    nlohmann::json images = nlohmann::json::array();
    for (const block_image_hash& image : s->images)
      images.push_back({{"block", image.block}, {"identifier", image.identifier}, {"offset", image.offset},
                        {"hash", std::to_string(image.hash)}});
    return {{"type", "BlockStored"},
            {"block_hashes", hashes(s->block_hashes)},
            {"parent_block_hash", s->parent_block_hash ? nlohmann::json(std::to_string(*s->parent_block_hash)) : nullptr},
            {"token_ids", s->token_ids},
            {"block_size", s->block_size},
            {"lora_id", optional_value(s->lora_id)},
            {"medium", optional_text(s->medium)},
            {"lora_name", optional_text(s->lora_name)},
            {"cache_salt", optional_text(s->cache_salt)},
            {"images", std::move(images)},
            {"group_idx", optional_value(s->group_idx)},
            {"kv_cache_spec_kind", optional_text(s->kv_cache_spec_kind)},
            {"kv_cache_spec_sliding_window", optional_value(s->sliding_window)}};
  }
  if (const auto* r = std::get_if<kv_removed>(&event))
    return {{"type", "BlockRemoved"},
            {"block_hashes", hashes(r->block_hashes)},
            {"medium", optional_text(r->medium)},
            {"group_idx", optional_value(r->group_idx)}};
  return {{"type", "AllBlocksCleared"}};
}

nlohmann::json to_json(const kv_batch& batch) {
  nlohmann::json events = nlohmann::json::array();
  for (const kv_event& event : batch.events) events.push_back(to_json(event));
  nlohmann::json out{{"ts", batch.timestamp}, {"dp_rank", optional_value(batch.dp_rank)}, {"events", std::move(events)}};
  if (batch.unknown_events > 0) out["unknown_events"] = batch.unknown_events;
  if (batch.malformed_events > 0) {
    out["malformed_events"] = batch.malformed_events;
    out["first_error"] = batch.first_error;
  }
  return out;
}

}  // namespace kvr
