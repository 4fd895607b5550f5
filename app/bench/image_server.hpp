#pragma once
/// The images of kvrouter-bench's image workload, served over HTTP on loopback (with Range
/// support, as image hosts and CDNs answer), so that image URLs cost the router what real ones
/// do: a range request per image it has not seen, none for the ones it has cached.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvr::bench {

class image_server {
 public:
  /// Serves `/img/K.png` for each of `images`, on 127.0.0.1 (any free port), on its own thread.
  explicit image_server(std::vector<std::vector<std::uint8_t>> images);
  ~image_server();
  [[nodiscard]] std::string url(std::size_t k) const;
  [[nodiscard]] std::uint64_t requests() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr::bench
