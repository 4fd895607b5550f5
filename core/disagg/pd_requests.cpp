#include "core/disagg/pd_requests.hpp"

#include <array>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/disagg/json_members.hpp"

namespace kvr {
namespace {

/// What vLLM's proxy puts on the prefill leg: decode elsewhere, nothing known yet of where.
constexpr std::string_view remote_decode_params =
    R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null})";

}  // namespace

std::expected<std::string, std::string> vllm_prefill_body(std::string_view body) {
  const std::array<member_edit, 6> edits{{{"kv_transfer_params", remote_decode_params},
                                          {"stream", "false"},
                                          {"max_tokens", "1"},
                                          {"stream_options", std::nullopt},
                                          {"min_tokens", std::nullopt},
                                          {"max_completion_tokens", "1", true}}};
  return edit_members(body, edits);
}

std::expected<std::string, std::string> vllm_decode_body(std::string_view body, std::string_view params) {
  const std::array<member_edit, 1> edits{{{"kv_transfer_params", params}}};
  return edit_members(body, edits);
}

std::string_view describe(transfer_params_error error) {
  switch (error) {
    case transfer_params_error::not_json: return "the prefill answer is not a JSON object";
    case transfer_params_error::missing: return "the prefill answer has no kv_transfer_params";
    case transfer_params_error::not_an_object: return "the prefill answer's kv_transfer_params is not an object";
  }
  return "bad kv_transfer_params";
}

std::expected<std::string, transfer_params_error> kv_transfer_params_of(std::string_view answer) {
  const auto parsed = parse_plain_json(answer);
  if (!parsed.is_object()) return std::unexpected(transfer_params_error::not_json);
  const auto it = parsed.find("kv_transfer_params");
  if (it == parsed.end() || it->is_null()) return std::unexpected(transfer_params_error::missing);
  if (!it->is_object()) return std::unexpected(transfer_params_error::not_an_object);
  return it->dump();  // re-serialized: what goes to the decode worker is valid JSON, whatever came
}

std::size_t prompts_in(std::string_view body) {
  for (std::string_view key : {"text", "input_ids"}) {
    const auto raw = member_value(body, key);
    if (!raw || raw->empty() || raw->front() != '[') continue;
    const auto parsed = parse_plain_json(*raw);
    if (!parsed.is_array() || parsed.empty()) return 1;
    // A list of ids is one prompt; a list of lists (or of texts) is a batch.
    return key == "input_ids" && !parsed.front().is_array() ? 1 : parsed.size();
  }
  return 1;
}

std::expected<std::string, std::string> sglang_body(std::string_view body, std::string_view bootstrap_host,
                                                    std::uint16_t bootstrap_port, std::span<const std::uint64_t> rooms) {
  if (rooms.empty()) return std::unexpected("no bootstrap room");
  const std::string host = nlohmann::json(std::string(bootstrap_host)).dump();
  std::string port = std::to_string(bootstrap_port);
  std::string room;
  if (rooms.size() == 1) {
    room = std::to_string(rooms.front());
  } else {  // a batch: one host, port and room per prompt
    std::string hosts = "[", ports = "[";
    room = "[";
    for (std::size_t i = 0; i < rooms.size(); ++i) {
      const std::string_view comma = i == 0 ? "" : ",";
      hosts += fmt::format("{}{}", comma, host);
      ports += fmt::format("{}{}", comma, bootstrap_port);
      room += fmt::format("{}{}", comma, rooms[i]);
    }
    hosts += ']';
    ports += ']';
    room += ']';
    const std::array<member_edit, 3> edits{{{"bootstrap_host", hosts}, {"bootstrap_port", ports}, {"bootstrap_room", room}}};
    return edit_members(body, edits);
  }
  const std::array<member_edit, 3> edits{{{"bootstrap_host", host}, {"bootstrap_port", port}, {"bootstrap_room", room}}};
  return edit_members(body, edits);
}

bool asks_for_several_choices(std::string_view body) {
  for (std::string_view key : {"n", "best_of"}) {
    const auto raw = member_value(body, key);
    if (!raw) continue;
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(raw->data(), raw->data() + raw->size(), n);
    if (ec == std::errc{} && end == raw->data() + raw->size() && n > 1) return true;
  }
  return false;
}

}  // namespace kvr
