#include <utility>  // before Asio under g++ 12

#include "actors/sources/http_poller.hpp"

#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kvr {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// One target's loop: wait, GET, hand the answer over, wait again.
class poll_loop : public std::enable_shared_from_this<poll_loop> {
 public:
  poll_loop(asio::io_context& io, const poll_settings& settings, poll_target target, std::size_t index,
            const http_poller::result_handler& on_result)
      : io_(io), settings_(settings), target_(std::move(target)), index_(index), on_result_(on_result), timer_(io),
        resolver_(io) {}

  void start() { schedule(); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
    resolver_.cancel();
    if (stream_) stream_->cancel();
  }

 private:
  void schedule() {
    timer_.expires_after(settings_.interval);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->stopped_) self->poll();
    });
  }

  void poll() {
    stream_.emplace(io_);
    stream_->expires_after(settings_.timeout);
    resolver_.async_resolve(target_.host, target_.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
      if (ec) return self->failed("cannot resolve: " + ec.message());
      self->stream_->async_connect(results, [self](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return self->failed("connect: " + ec.message());
        self->request_ = {http::verb::get, self->target_.path, 11};
        self->request_.set(http::field::host, self->target_.host + ":" + self->target_.port);
        self->request_.keep_alive(false);
        http::async_write(*self->stream_, self->request_, [self](beast::error_code ec, std::size_t) {
          if (ec) return self->failed("write: " + ec.message());
          self->parser_.emplace();
          self->parser_->body_limit(self->settings_.body_limit);
          http::async_read(*self->stream_, self->buffer_, *self->parser_, [self](beast::error_code ec, std::size_t) {
            if (ec == http::error::body_limit) return self->failed("the answer is larger than the limit");
            if (ec) return self->failed("read: " + ec.message());
            const auto& response = self->parser_->get();
            self->done({.answered = true, .status = response.result_int(), .body = response.body()});
          });
        });
      });
    });
  }

  void failed(std::string why) { done({.error = std::move(why)}); }

  void done(const poll_result& result) {
    if (stopped_) return;
    on_result_(index_, result);
    stream_.reset();
    parser_.reset();
    buffer_.clear();
    schedule();
  }

  asio::io_context& io_;
  const poll_settings& settings_;
  poll_target target_;
  std::size_t index_;
  const http_poller::result_handler& on_result_;
  asio::steady_timer timer_;
  tcp::resolver resolver_;
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  bool stopped_ = false;
};

}  // namespace

struct http_poller::impl {
  poll_settings settings;
  result_handler on_result;
  asio::io_context io{1};
  std::vector<std::shared_ptr<poll_loop>> loops;
};

http_poller::http_poller(poll_settings settings, std::vector<poll_target> targets, result_handler on_result)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = settings;
  impl_->on_result = std::move(on_result);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    impl_->loops.push_back(std::make_shared<poll_loop>(impl_->io, impl_->settings, std::move(targets[i]), i, impl_->on_result));
    impl_->loops.back()->start();
  }
}

http_poller::~http_poller() {
  for (auto& loop : impl_->loops) loop->stop();
}

void http_poller::run_for(std::chrono::milliseconds budget) { impl_->io.run_for(budget); }

}  // namespace kvr
