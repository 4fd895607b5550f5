#include <utility>  // before Asio under g++ 12

#include "app/mocker/kv_transfer.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/http/http_read_limits.hpp"
#include "core/common/json_parse.hpp"

namespace kvr::mocker {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string kv_leases::add(std::vector<std::uint64_t> hashes) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  expire(now);
  std::string id = fmt::format("xfer-{}", next_++);
  leases_[id] = {std::move(hashes), now + lease_};
  return id;
}

std::optional<std::vector<std::uint64_t>> kv_leases::take(const std::string& id) {
  std::lock_guard lock(mutex_);
  expire(std::chrono::steady_clock::now());
  const auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  auto hashes = std::move(it->second.hashes);
  leases_.erase(it);
  return hashes;
}

std::size_t kv_leases::live() {
  std::lock_guard lock(mutex_);
  expire(std::chrono::steady_clock::now());
  return leases_.size();
}

void kv_leases::expire(std::chrono::steady_clock::time_point now) {
  std::erase_if(leases_, [now](const auto& entry) { return entry.second.until <= now; });
}

namespace {

struct pull_state {
  explicit pull_state(asio::any_io_executor executor) : socket(executor), timer(executor) {}
  tcp::socket socket;
  asio::steady_timer timer;
  http::request<http::empty_body> request;
  http::response<http::string_body> response;
  beast::flat_buffer buffer = bounded_http_read_buffer();
  std::function<void(pull_result)> done;
  bool finished = false;

  void finish(pull_result result) {
    if (finished) return;
    finished = true;
    timer.cancel();
    beast::error_code ignored;
    socket.close(ignored);
    done(std::move(result));
  }
};

}  // namespace

void pull_kv(asio::any_io_executor executor, const std::string& host, std::uint16_t port, const std::string& path,
             std::chrono::seconds timeout, std::function<void(pull_result)> done) {
  auto state = std::make_shared<pull_state>(executor);
  state->done = std::move(done);
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return state->finish({false, {}, fmt::format("remote_host {} is not an IP address", host)});
  state->request = {http::verb::get, path, 11};
  state->request.set(http::field::host, fmt::format("{}:{}", host, port));
  state->timer.expires_after(timeout);
  state->timer.async_wait([state](beast::error_code wait_ec) {
    if (!wait_ec) state->finish({false, {}, "the transfer timed out"});
  });
  state->socket.async_connect({address, port}, [state](beast::error_code connect_ec) {
    if (connect_ec) return state->finish({false, {}, "connect: " + connect_ec.message()});
    http::async_write(state->socket, state->request, [state](beast::error_code write_ec, std::size_t) {
      if (write_ec) return state->finish({false, {}, "write: " + write_ec.message()});
      http::async_read(state->socket, state->buffer, state->response, [state](beast::error_code read_ec, std::size_t) {
        if (read_ec) return state->finish({false, {}, "read: " + read_ec.message()});
        if (state->response.result_int() != 200)
          return state->finish({false, {}, fmt::format("the prefill worker answered {}", state->response.result_int())});
        const auto body = parse_plain_json(state->response.body());
        pull_result result{true, {}, {}};
        if (!body.is_object() || !body.contains("hashes") || !body["hashes"].is_array())
          return state->finish({false, {}, "the transfer answer has no hashes"});
        for (const auto& h : body["hashes"]) {
          if (!h.is_number_unsigned()) return state->finish({false, {}, "a transferred hash is not an integer"});
          result.hashes.push_back(h.get<std::uint64_t>());
        }
        state->finish(std::move(result));
      });
    });
  });
}

}  // namespace kvr::mocker
