// libFuzzer target: arbitrary bytes as a config file (cards, router knobs, multimodal rules),
// as a worker spec and as a URL. Each returns a value or an error naming what is wrong.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/http_url.hpp"
#include "core/common/json_shape.hpp"
#include "core/config/router_file.hpp"
#include "core/config/worker_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto file = kvr::parse_router_file(text)) (void)kvr::explain(*file).dump();
  (void)kvr::parse_worker_spec(text);
  if (auto url = kvr::parse_http_url(text)) (void)kvr::authority_of(*url);
  (void)kvr::scan_json_shape(text);
  return 0;
}
