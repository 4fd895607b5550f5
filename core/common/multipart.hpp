#pragma once
/// One field of a `multipart/form-data` body (RFC 7578), read without copying: how the router
/// finds the `model` of an upload such as `/v1/audio/transcriptions` to pick its worker set.
/// Bounded work on untrusted bytes: one forward scan, part headers of at most 8 KiB.

#include <optional>
#include <string_view>

namespace kvr {

/// The boundary of a `Content-Type: multipart/form-data; boundary=...` value (quoted or not);
/// none if the type is another or the boundary is missing or longer than RFC 2046's 70 bytes.
[[nodiscard]] std::optional<std::string_view> multipart_boundary(std::string_view content_type);

/// The value of the first part named `name` (`Content-Disposition: form-data; name="NAME"`);
/// none if there is none or the body is not well formed up to it.
[[nodiscard]] std::optional<std::string_view> multipart_field(std::string_view body, std::string_view boundary,
                                                              std::string_view name);

}  // namespace kvr
