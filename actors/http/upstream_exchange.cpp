#include "actors/http/upstream_exchange.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <fmt/format.h>

#include "actors/http/bounded_head_read.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/tls/worker_tls.hpp"

namespace kvr::ingress {

namespace http = boost::beast::http;
using error_code = boost::system::error_code;

upstream_exchange::upstream_exchange(http_ingress::impl& server, io_thread& thread) : server_(server), thread_(thread) {
  registration_ = thread_.connections.insert(thread_.connections.end(), this);
}

upstream_exchange::~upstream_exchange() { thread_.connections.erase(registration_); }

void upstream_exchange::start(const worker_target& worker, std::string head, std::string body, std::chrono::seconds timeout,
                              std::shared_ptr<void> keep, done_handler done) {
  deadline = clock_type::now() + timeout;
  worker_ = &worker;
  head_ = std::move(head);
  body_ = std::move(body);
  keep_ = std::move(keep);
  done_ = std::move(done);
  running_ = true;
  cut_ = cut_reason::none;
  connect(true);
}

void upstream_exchange::cancel() {
  done_ = nullptr;
  cut(cut_reason::cancelled);
}

void upstream_exchange::cut(cut_reason why) {
  if (!running_ || cut_ != cut_reason::none) return;
  cut_ = why;
  if (upstream_) upstream_->socket().close();  // the pending operation fails now
}

void upstream_exchange::connect(bool pooled) {
  upstream_ = pooled ? thread_.take_idle(worker_->url) : nullptr;
  pooled_ = upstream_ != nullptr;
  if (upstream_) return write();
  if (worker_->tls) {
    upstream_ = std::make_unique<upstream_connection>(thread_.io, *server_.worker_tls);
    if (!name_tls_server(upstream_->secure->native_handle(), worker_->host))
      return finish({outcome::kind::worker_failed, 0, {}, "TLS: cannot name the server " + worker_->host});
  } else {
    upstream_ = std::make_unique<upstream_connection>(thread_.io);
  }
  const auto endpoints = server_.endpoints_of(*worker_);
  if (endpoints.empty()) return finish({outcome::kind::worker_failed, 0, {}, "the worker's address could not be resolved"});
  auto before_each_address = [this](const error_code&, const tcp::endpoint&) { return cut_ == cut_reason::none; };
  asio::async_connect(upstream_->socket(), endpoints, before_each_address, [this, self = self(), keep = keep_.lock()](error_code ec, const tcp::endpoint&) {
    if (ec) return fail(ec, "cannot connect");
    error_code ignored;
    upstream_->socket().set_option(tcp::no_delay(true), ignored);
    if (!upstream_->secure) return write();
    upstream_->secure->async_handshake(asio::ssl::stream_base::client, [this, self, keep](error_code handshake_ec) {
      if (handshake_ec) return fail(handshake_ec, "TLS handshake");
      write();
    });
  });
}

void upstream_exchange::write() {
  const std::array<asio::const_buffer, 2> request{asio::buffer(head_), asio::buffer(body_)};
  upstream_->on_stream([&](auto& stream) {
    asio::async_write(stream, request, [this, self = self(), keep = keep_.lock()](error_code ec, std::size_t) {
      if (ec) return fail(ec, "write");
      read();
    });
  });
}

void upstream_exchange::read() {
  parser_.emplace();
  parser_->body_limit(max_answer_bytes);
  upstream_->on_stream([&](auto& stream) {
    async_read_bounded(stream, upstream_->buffer, *parser_, max_answer_head_bytes, [this, self = self(), keep = keep_.lock()](error_code ec, std::size_t) {
      if (ec == http::error::body_limit)
        return finish({outcome::kind::worker_failed, 0, {},
                       fmt::format("the answer exceeds {} bytes", max_answer_bytes)});
      if (ec) return fail(ec, "read");
      auto& answer = parser_->get();
      outcome result{outcome::kind::answered, answer.result_int(), std::move(answer.body()), {}};
      if (parser_->keep_alive() && cut_ == cut_reason::none) thread_.give_back(worker_->url, std::move(upstream_));
      finish(std::move(result));
    });
  });
}

/// A pooled connection the worker had closed is retried once, fresh and unblamed.
void upstream_exchange::fail(const error_code& ec, std::string_view what) {
  if (cut_ == cut_reason::deadline) return finish({outcome::kind::timed_out, 0, {}, "timed out"});
  if (cut_ == cut_reason::cancelled) return finish({});  // nobody waits for it
  if (pooled_) {
    server_.probe.stale_connection_retried();
    upstream_.reset();
    return connect(false);
  }
  const std::string detail = what == "TLS handshake" && upstream_ && upstream_->secure
                                 ? fmt::format("TLS handshake: {}", tls_failure(ec, upstream_->secure->native_handle()))
                                 : fmt::format("{}: {}", what, ec.message());
  finish({outcome::kind::worker_failed, 0, {}, detail});
}

void upstream_exchange::finish(outcome result) {
  if (!running_) return;
  running_ = false;
  deadline = clock_type::time_point::max();
  upstream_.reset();
  parser_.reset();
  if (auto done = std::exchange(done_, nullptr)) done(std::move(result));
}

}  // namespace kvr::ingress
