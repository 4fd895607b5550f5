#pragma once
/// Who may use which route: `--api-key` / `--api-key-file` keys for the API, `--admin-api-key`
/// keys (else the API keys) for /metrics and /v1/router/*; /health, /ready and the status
/// page's HTML (which holds no data) are open. The key file is re-read when it changes, so keys
/// rotate without a restart; a file that fails to read keeps the keys in force. Keys are never
/// logged.

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "actors/http/ingress_settings.hpp"
#include "core/common/api_keys.hpp"
#include "core/prompt/openai.hpp"

namespace kvr {

class api_key_guard {
 public:
  enum class route_class : std::uint8_t { open, api, admin };

  /// Throws std::runtime_error when `--api-key-file` cannot be read at start-up.
  explicit api_key_guard(const ingress_settings& settings);

  [[nodiscard]] static route_class classify(std::string_view path);

  /// Nothing when a request to a `route` with this `Authorization` value (empty: none) may
  /// proceed, else the 401 to answer.
  [[nodiscard]] std::optional<api_error> check(route_class route, std::string_view authorization) const;

  /// Re-reads the key file when its modification time or size changed (called every second).
  void reload_if_changed();

 private:
  struct keys {
    api_key_set api;
    bool api_required = false;
    api_key_set admin;
    bool admin_required = false;
  };
  [[nodiscard]] std::shared_ptr<const keys> current() const;
  void install(const api_key_set& from_file);

  std::vector<std::string> flag_keys_;
  std::vector<std::string> admin_flag_keys_;
  std::string file_;
  /// No key of any kind was given: every route is open, and checks touch no lock.
  bool off_ = true;
  std::filesystem::file_time_type file_time_{};
  std::uintmax_t file_size_ = 0;
  mutable std::mutex mutex_;
  std::shared_ptr<const keys> keys_;
};

}  // namespace kvr
