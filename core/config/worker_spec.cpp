#include "core/config/worker_spec.hpp"

#include <charconv>

#include <fmt/format.h>

#include "core/common/http_url.hpp"

namespace kvr {

std::string_view to_string(worker_role role) {
  switch (role) {
    case worker_role::both: return "both";
    case worker_role::prefill: return "prefill";
    case worker_role::decode: return "decode";
  }
  return "both";
}

std::optional<worker_role> parse_worker_role(std::string_view text) {
  for (worker_role role : {worker_role::both, worker_role::prefill, worker_role::decode})
    if (text == to_string(role)) return role;
  return std::nullopt;
}

std::string worker_name(const worker_spec& spec, std::size_t index) {
  return spec.id.empty() ? fmt::format("w{}", index) : spec.id;
}

std::vector<publisher_spec> expand_publishers(const std::vector<worker_spec>& workers) {
  std::vector<publisher_spec> publishers;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const worker_spec& w = workers[i];
    const std::string name = worker_name(w, i);
    for (std::uint32_t rank = 0; rank < w.dp_size; ++rank) {
      const int offset = static_cast<int>(rank);
      publishers.push_back({.worker = static_cast<std::uint32_t>(i),
                            .name = w.dp_size > 1 ? fmt::format("{}/dp{}", name, rank) : name,
                            .endpoint = endpoint_with_port_offset(w.kv_events, offset),
                            .replay_endpoint = w.replay.empty() ? std::string{} : endpoint_with_port_offset(w.replay, offset),
                            .topic = w.topic});
    }
  }
  return publishers;
}

std::string endpoint_with_port_offset(const std::string& endpoint, int offset) {
  if (offset == 0 || endpoint.empty()) return endpoint;
  const auto colon = endpoint.rfind(':');
  const std::string port = colon == std::string::npos ? std::string() : endpoint.substr(colon + 1);
  if (!endpoint.starts_with("tcp://") || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos)
    return endpoint + "-" + std::to_string(offset);  // ipc://PATH: rank r listens on PATH-r
  return endpoint.substr(0, colon + 1) + std::to_string(std::stoi(port) + offset);
}

std::expected<worker_spec, config_error> parse_worker_spec(std::string_view text, std::vector<deprecated_key>* deprecated) {
  auto fail = [&](std::string why) {
    return std::unexpected(config_error{fmt::format("worker \"{}\": {}", text, why)});
  };
  worker_spec spec;
  std::size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (first) {
      first = false;
      if (!part.starts_with("http://") && !part.starts_with("https://"))
        return fail("must start with the worker's http:// or https:// URL");
      const auto url = parse_http_url(part);
      if (!url) return fail(fmt::format("bad URL: {}", url.error()));
      if (url->target.find('?') != std::string::npos) return fail("a worker URL takes no query string");
      spec.url = std::string(part);
      while (spec.url.ends_with('/')) spec.url.pop_back();
      continue;
    }
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("\"{}\" is not key=value", part));
    std::string_view key = part.substr(0, eq);
    const std::string_view value = part.substr(eq + 1);
    for (auto [old_key, new_key] : {std::pair{"kv", "kv_events"}, std::pair{"dp", "dp_size"}}) {
      if (key != old_key) continue;
      if (deprecated) deprecated->push_back({old_key, new_key});
      key = new_key;
    }
    if (key == "kv_events" || key == "replay") {
      if (!value.starts_with("tcp://") && !value.starts_with("ipc://") && !value.starts_with("inproc://"))
        return fail(fmt::format("{} must be a ZeroMQ endpoint such as tcp://host:5557", key));
      (key == "kv_events" ? spec.kv_events : spec.replay) = std::string(value);
    } else if (key == "dp_size") {
      std::uint32_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || end != value.data() + value.size() || n == 0 || n > 1024)
        return fail("dp_size must be a rank count from 1 to 1024");
      spec.dp_size = n;
    } else if (key == "id") {
      if (value.empty()) return fail("id must not be empty");
      spec.id = std::string(value);
    } else if (key == "topic") {
      spec.topic = std::string(value);
    } else if (key == "role") {
      const auto role = parse_worker_role(value);
      if (!role) return fail(fmt::format("role must be prefill, decode or both (got \"{}\")", value));
      spec.role = *role;
    } else if (key == "bootstrap") {
      std::uint32_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || end != value.data() + value.size() || n == 0 || n > 65535)
        return fail("bootstrap must be a port from 1 to 65535");
      spec.bootstrap_port = static_cast<std::uint16_t>(n);
    } else {
      return fail(fmt::format("unknown key \"{}\" (expected kv_events, replay, dp_size, id, topic, role or bootstrap)", key));
    }
  }
  // A tcp endpoint's port, and the ports its data-parallel ranks add to it, must exist.
  for (const auto& [key, endpoint] : {std::pair{"kv_events", &spec.kv_events}, std::pair{"replay", &spec.replay}}) {
    if (!endpoint->starts_with("tcp://")) continue;
    const auto colon = endpoint->rfind(':');
    const std::string_view port = colon == std::string::npos ? std::string_view() : std::string_view(*endpoint).substr(colon + 1);
    std::uint32_t n = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || n == 0 || n > 65535)
      return fail(fmt::format("{} endpoint {} needs a port from 1 to 65535", key, *endpoint));
    if (n + spec.dp_size - 1 > 65535)
      return fail(fmt::format("{} endpoint {}: its {} ranks would need ports past 65535", key, *endpoint, spec.dp_size));
  }
  return spec;
}

}  // namespace kvr
