#include <utility>  // before Asio under g++ 12

#include "actors/sources/etcd_source.hpp"

#include "actors/http/http_read_limits.hpp"
#include "core/common/json_parse.hpp"
#include "core/media/base64.hpp"

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

std::string to_base64(std::string_view in) {
  return kvr::base64_encode({reinterpret_cast<const std::uint8_t*>(in.data()), in.size()});
}

std::string from_base64(std::string_view in) {
  auto bytes = kvr::base64_decode(in);
  if (!bytes) throw std::runtime_error("invalid base64 from etcd");
  return {bytes->begin(), bytes->end()};
}

/// The end of the key range holding every key that starts with `prefix`.
std::string range_end_of(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace

struct etcd_source::impl {
  etcd_settings settings;
  std::function<void(const etcd_cards&)> on_change;
  std::string host, port;
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wake;
  tcp::socket* current = nullptr;  ///< the blocking socket, closed by the destructor to unblock
  std::thread thread;

  void run() {
    while (!stopping) {
      try {
        etcd_cards cards;
        const std::uint64_t revision = list(cards);
        on_change(cards);
        watch(revision + 1, cards);
      } catch (const std::exception& e) {
        if (!stopping) std::cerr << "kvrouter: etcd " << settings.url << ": " << e.what() << "; listing again\n";
      }
      std::unique_lock lock(mutex);
      wake.wait_for(lock, settings.retry, [&] { return stopping.load(); });
    }
  }

  /// Connects a socket registered for the destructor to close.
  void connect(asio::io_context& io, tcp::socket& socket) {
    tcp::resolver resolver(io);
    asio::connect(socket, resolver.resolve(host, port));
    std::lock_guard lock(mutex);
    if (stopping) throw std::runtime_error("stopping");
    current = &socket;
  }
  void forget(tcp::socket&) {
    std::lock_guard lock(mutex);
    current = nullptr;
  }

  http::request<http::string_body> post(std::string_view target, const json& body) const {
    http::request<http::string_body> request{http::verb::post, std::string(target), 11};
    request.set(http::field::host, host + ":" + port);
    request.set(http::field::content_type, "application/json");
    request.body() = body.dump();
    request.prepare_payload();
    return request;
  }

  std::uint64_t list(etcd_cards& cards) {
    asio::io_context io;
    tcp::socket socket(io);
    connect(io, socket);
    const json query{{"key", to_base64(settings.prefix)}, {"range_end", to_base64(range_end_of(settings.prefix))}};
    http::write(socket, post("/v3/kv/range", query));
    beast::flat_buffer buffer = bounded_http_read_buffer();
    http::response<http::string_body> response;
    http::read(socket, buffer, response);
    forget(socket);
    if (response.result() != http::status::ok) throw std::runtime_error(fmt::format("range answered {}", response.result_int()));
    const json answer = parse_plain_json(response.body());
    if (!answer.is_object()) throw std::runtime_error("range answered what is not a JSON object (or nests too deep)");
    for (const json& kv : answer.value("kvs", json::array()))
      cards[from_base64(kv.at("key").get<std::string>())] = from_base64(kv.value("value", ""));
    return std::stoull(answer.at("header").at("revision").get<std::string>());
  }

  void watch(std::uint64_t from_revision, etcd_cards& cards) {
    asio::io_context io;
    tcp::socket socket(io);
    connect(io, socket);
    const json create{{"create_request",
                       {{"key", to_base64(settings.prefix)},
                        {"range_end", to_base64(range_end_of(settings.prefix))},
                        {"start_revision", std::to_string(from_revision)}}}};
    http::write(socket, post("/v3/watch", create));
    beast::flat_buffer buffer = bounded_http_read_buffer();
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    http::read_header(socket, buffer, parser);
    if (parser.get().result() != http::status::ok) throw std::runtime_error("watch refused");
    std::string pending;  // the stream is newline-separated JSON objects
    std::array<char, 8192> chunk;
    while (!stopping && !parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      beast::error_code ec;
      http::read_some(socket, buffer, parser, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) throw beast::system_error(ec);
      pending.append(chunk.data(), chunk.size() - parser.get().body().size);
      for (std::size_t newline; (newline = pending.find('\n')) != std::string::npos;) {
        const json message = parse_plain_json(std::string_view(pending).substr(0, newline));
        pending.erase(0, newline + 1);
        if (message.is_discarded() || !message.contains("result")) continue;
        const json& result = message["result"];
        if (result.value("canceled", false) || result.contains("compact_revision"))
          throw std::runtime_error("watch cancelled");
        if (!result.contains("events")) continue;
        for (const json& event : result["events"]) {
          const std::string key = from_base64(event.at("kv").at("key").get<std::string>());
          if (event.value("type", "PUT") == "DELETE") cards.erase(key);
          else cards[key] = from_base64(event.at("kv").value("value", ""));
        }
        on_change(cards);
      }
    }
    forget(socket);
    throw std::runtime_error("watch ended");
  }
};

etcd_source::etcd_source(etcd_settings settings, std::function<void(const etcd_cards&)> on_change)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = std::move(settings);
  impl_->on_change = std::move(on_change);
  std::string_view rest(impl_->settings.url);
  if (!rest.starts_with("http://")) throw std::runtime_error(fmt::format("--etcd must be an http:// URL, got {}", rest));
  rest.remove_prefix(7);
  rest = rest.substr(0, rest.find('/'));
  const auto colon = rest.rfind(':');
  impl_->host = std::string(rest.substr(0, colon));
  impl_->port = colon == std::string_view::npos ? "2379" : std::string(rest.substr(colon + 1));
  impl_->thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "kvr-etcd");
    impl_->run();
  });
}

etcd_source::~etcd_source() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    if (impl_->current != nullptr) {
      beast::error_code ignored;
      impl_->current->shutdown(tcp::socket::shutdown_both, ignored);
    }
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kvr
