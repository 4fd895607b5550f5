#include "actors/http/api_key_guard.hpp"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace kvr {
namespace {

std::expected<api_key_set, std::string> read_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected(fmt::format("cannot read the API key file {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto keys = api_key_set::from_lines(text.str());
  if (!keys) return std::unexpected(fmt::format("the API key file {}: {}", path, keys.error()));
  return keys;
}

}  // namespace

api_key_guard::api_key_guard(const ingress_settings& settings)
    : flag_keys_(settings.api_keys),
      admin_flag_keys_(settings.admin_api_keys),
      file_(settings.api_key_file),
      off_(flag_keys_.empty() && admin_flag_keys_.empty() && file_.empty()) {
  api_key_set from_file;
  if (!file_.empty()) {
    std::error_code ec;
    file_time_ = std::filesystem::last_write_time(file_, ec);
    file_size_ = std::filesystem::file_size(file_, ec);
    auto read = read_key_file(file_);
    if (!read) throw std::runtime_error(read.error());
    from_file = std::move(*read);
  }
  install(from_file);
}

void api_key_guard::install(const api_key_set& from_file) {
  auto next = std::make_shared<keys>();
  next->api = api_key_set(flag_keys_);
  next->api.add(from_file);
  next->api_required = !flag_keys_.empty() || !file_.empty();
  next->admin = admin_flag_keys_.empty() ? next->api : api_key_set(admin_flag_keys_);
  next->admin_required = !admin_flag_keys_.empty() || next->api_required;
  if (next->api_required && next->api.empty())
    std::cerr << fmt::format("kvrouter: warning: the API key file {} holds no key: every API request is refused\n", file_);
  std::lock_guard lock(mutex_);
  keys_ = std::move(next);
}

std::shared_ptr<const api_key_guard::keys> api_key_guard::current() const {
  std::lock_guard lock(mutex_);
  return keys_;
}

api_key_guard::route_class api_key_guard::classify(std::string_view path) {
  if (path == "/health" || path == "/ready" || path == "/" || path == "/dashboard") return route_class::open;
  if (path == "/metrics" || path.starts_with("/v1/router/")) return route_class::admin;
  return route_class::api;
}

std::optional<api_error> api_key_guard::check(route_class route, std::string_view authorization) const {
  if (off_ || route == route_class::open) return std::nullopt;
  const auto keys = current();
  const bool admin = route == route_class::admin;
  if (!(admin ? keys->admin_required : keys->api_required)) return std::nullopt;
  const std::string_view key = bearer_token(authorization);
  if (key.empty())
    return api_error{api_errc::invalid_api_key,
                     "this router needs an API key: send it as `Authorization: Bearer KEY`", {}};
  if (!(admin ? keys->admin : keys->api).accepts(key))
    return api_error{api_errc::invalid_api_key,
                     admin ? "the API key is not one this router's admin routes accept" : "the API key is not one this router accepts",
                     {}};
  return std::nullopt;
}

void api_key_guard::reload_if_changed() {
  if (file_.empty()) return;
  std::error_code time_error, size_error;
  const auto time = std::filesystem::last_write_time(file_, time_error);
  const auto size = std::filesystem::file_size(file_, size_error);
  if (time_error || size_error || (time == file_time_ && size == file_size_)) return;
  file_time_ = time;
  file_size_ = size;
  auto read = read_key_file(file_);
  if (!read) {
    std::cerr << fmt::format("kvrouter: {}; the keys in force stay\n", read.error());
    return;
  }
  std::cerr << fmt::format("kvrouter: API keys reloaded from {} ({} key(s))\n", file_, read->size());
  install(*read);
}

}  // namespace kvr
