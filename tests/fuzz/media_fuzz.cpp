// libFuzzer target: arbitrary bytes as an image file's prefix and as a data: URI. Whatever the
// bytes, the header readers return dimensions or an error; ASan and UBSan catch the rest.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/media/media.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  for (bool complete : {false, true})
    if (auto dims = kvr::image_dimensions(bytes, complete)) (void)kvr::placeholder_tokens(kvr::multimodal_card{}, *dims);
  (void)kvr::decode_data_uri(std::string_view(reinterpret_cast<const char*>(data), size), 4096);
  return 0;
}
