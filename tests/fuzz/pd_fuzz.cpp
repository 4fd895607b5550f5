// libFuzzer target: arbitrary bytes as a disaggregated request's client body and as a prefill
// worker's answer. Every rewrite of a body that is one JSON object must be one JSON object
// again, with the edited fields as set and every other member as it was; a body that is not one
// must be refused, never half-edited; transfer params taken from an answer must be an object.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/json_shape.hpp"
#include "core/disagg/json_members.hpp"
#include "core/disagg/pd_requests.hpp"

using json = nlohmann::json;

namespace {

json parsed_object(std::string_view text) {
  if (!kvr::scan_json_shape(text, 256)) return json(nullptr);
  json value = json::parse(text, nullptr, false);
  return value.is_object() ? value : json(nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const json original = parsed_object(text);

  const auto prefill = kvr::vllm_prefill_body(text);
  const auto decode = kvr::vllm_decode_body(text, R"({"remote_host":"h","remote_port":1})");
  const std::array<std::uint64_t, 2> rooms{{1, 2}};
  const auto sglang = kvr::sglang_body(text, "h", 8998, std::span(rooms).first(kvr::prompts_in(text) > 1 ? 2 : 1));
  if (!original.is_object()) {
    // Refusing is allowed (and expected for most non-objects); an edit that succeeds must still
    // produce JSON the decode worker can read, if the input was valid JSON at all.
    if (prefill && !json::accept(*prefill) && json::accept(text)) std::abort();
    return 0;
  }
  if (!prefill || !decode || !sglang) std::abort();  // a valid object is always editable
  const json p = json::parse(*prefill, nullptr, false), d = json::parse(*decode, nullptr, false);
  if (!p.is_object() || !d.is_object() || !json::accept(*sglang)) std::abort();
  if (p["stream"] != false || p["max_tokens"] != 1 || p.contains("stream_options") || p.contains("min_tokens")) std::abort();
  if (!p["kv_transfer_params"].is_object() || d["kv_transfer_params"]["remote_port"] != 1) std::abort();
  for (const auto& [key, value] : original.items()) {
    if (key == "kv_transfer_params" || key == "stream" || key == "max_tokens" || key == "max_completion_tokens" ||
        key == "stream_options" || key == "min_tokens")
      continue;
    if (p[key] != value || d[key] != value) std::abort();  // untouched members keep their values
  }

  if (const auto params = kvr::kv_transfer_params_of(text); params && !json::parse(*params, nullptr, false).is_object())
    std::abort();
  return 0;
}
