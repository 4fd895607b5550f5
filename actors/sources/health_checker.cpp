#include <utility>  // before Asio under g++ 12

#include "actors/sources/health_checker.hpp"


#include <iostream>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace kvr {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// One worker's probe loop: wait, probe, count, report transitions.
class prober : public std::enable_shared_from_this<prober> {
 public:
  prober(asio::io_context& io, const health_settings& settings, scorer_actor scorer, health_target target)
      : io_(io), settings_(settings), scorer_(std::move(scorer)), target_(std::move(target)), timer_(io), resolver_(io) {}

  void start() { schedule(); }
  void stop() {
    timer_.cancel();
    if (stream_) stream_->cancel();
  }

 private:
  void schedule() {
    timer_.expires_after(settings_.interval);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->probe();
    });
  }

  void probe() {
    stream_.emplace(io_);
    stream_->expires_after(settings_.timeout);
    resolver_.async_resolve(target_.host, target_.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
      if (ec) return self->done(false, "cannot resolve: " + ec.message());
      self->stream_->async_connect(results, [self](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return self->done(false, "connect: " + ec.message());
        self->request_ = {http::verb::get, self->target_.path, 11};
        self->request_.set(http::field::host, self->target_.host + ":" + self->target_.port);
        self->request_.keep_alive(false);
        http::async_write(*self->stream_, self->request_, [self](beast::error_code ec, std::size_t) {
          if (ec) return self->done(false, "write: " + ec.message());
          self->response_ = {};
          http::async_read(*self->stream_, self->buffer_, self->response_, [self](beast::error_code ec, std::size_t) {
            if (ec) return self->done(false, "read: " + ec.message());
            const unsigned status = self->response_.result_int();
            self->done(status == 200, fmt::format("HTTP {}", status));
          });
        });
      });
    });
  }

  /// `why`: what the probe saw (an error, or the status).
  void done(bool healthy, const std::string& why) {
    stream_.reset();
    buffer_.clear();
    if (healthy) {
      failures_ = 0;
      if (down_ && ++successes_ >= settings_.successes) report(true, why);
    } else {
      successes_ = 0;
      if (!down_ && ++failures_ >= settings_.failures) report(false, why);
    }
    schedule();
  }

  /// One log line per transition, with what the last probe saw.
  void report(bool up, const std::string& why) {
    std::cerr << (up ? fmt::format("kvrouter: {} is up again: GET {} answered 200 ({} good probe(s) in a row)\n",
                                   target_.label, target_.path, successes_)
                     : fmt::format("kvrouter: {} is down: GET {}: {} ({} failed probe(s) in a row)\n", target_.label,
                                   target_.path, why, failures_));
    down_ = !up;
    failures_ = successes_ = 0;
    caf::anon_send(scorer_, worker_health_atom_v, target_.worker, up);
  }

  asio::io_context& io_;
  const health_settings& settings_;
  scorer_actor scorer_;
  health_target target_;
  asio::steady_timer timer_;
  tcp::resolver resolver_;
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> response_;
  bool down_ = false;  ///< as last reported (workers start up)
  std::uint32_t failures_ = 0;
  std::uint32_t successes_ = 0;
};

}  // namespace

struct health_checker::impl {
  health_settings settings;
  asio::io_context io{1};
  std::vector<std::shared_ptr<prober>> probers;
};

health_checker::health_checker(health_settings settings, scorer_actor scorer, std::vector<health_target> targets)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = settings;
  for (health_target& target : targets) {
    impl_->probers.push_back(std::make_shared<prober>(impl_->io, impl_->settings, scorer, std::move(target)));
    impl_->probers.back()->start();
  }
}

health_checker::~health_checker() {
  for (auto& p : impl_->probers) p->stop();
}

void health_checker::poll_for(std::chrono::milliseconds budget) { impl_->io.run_for(budget); }

}  // namespace kvr
