#pragma once
/// Worker-set cards from etcd v3, through its JSON gateway over HTTP: lists the keys under a
/// prefix, then watches the prefix from the listed revision; after any error (etcd restarted,
/// watch compacted or cancelled) it lists again. Each key holds one card's JSON; a deleted key
/// (explicitly, or when its lease expired) removes the card.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace kvr {

struct etcd_settings {
  std::string url = "http://127.0.0.1:2379";  ///< the gateway, http://host:port
  std::string prefix = "/kvrouter/";
  std::chrono::milliseconds retry{1000};     ///< wait before listing again after an error
};

/// Card JSON by etcd key: the whole prefix as it stands (also in messages/type_ids.hpp).
using etcd_cards = std::map<std::string, std::string>;

class etcd_source {
 public:
  /// Starts the thread; `on_change` runs on it with every new state of the prefix.
  etcd_source(etcd_settings settings, std::function<void(const etcd_cards&)> on_change);
  ~etcd_source();
  etcd_source(const etcd_source&) = delete;
  etcd_source& operator=(const etcd_source&) = delete;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
