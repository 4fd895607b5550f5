#include <utility>  // before Asio under g++ 12

#include "actors/sources/http_poller.hpp"

#include <algorithm>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "actors/http/bounded_head_read.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/tls/worker_tls.hpp"

namespace kvr {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// One target's loop: wait, GET, hand the answer over, wait again.
class poll_loop : public std::enable_shared_from_this<poll_loop> {
 public:
  poll_loop(asio::io_context& io, const poll_settings& settings, asio::ssl::context* tls, poll_target target,
            std::size_t index, const http_poller::result_handler& on_result)
      : io_(io), settings_(settings), tls_(tls), target_(std::move(target)), index_(index), on_result_(on_result),
        timer_(io), resolver_(io) {}

  void start() { schedule(); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
    resolver_.cancel();
    if (stream_) stream_->cancel();
    if (secure_) beast::get_lowest_layer(*secure_).cancel();
  }

 private:
  void schedule() {
    timer_.expires_after(settings_.interval);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->stopped_) self->poll();
    });
  }

  /// The TCP layer under either kind of stream (timeouts, connect).
  beast::tcp_stream& tcp_layer() { return secure_ ? beast::get_lowest_layer(*secure_) : *stream_; }

  void poll() {
    if (target_.tls) {
      secure_.emplace(io_, *tls_);
      if (!name_tls_server(secure_->native_handle(), target_.host)) return failed("TLS: cannot name the server " + target_.host);
    } else {
      stream_.emplace(io_);
    }
    tcp_layer().expires_after(settings_.timeout);
    resolver_.async_resolve(target_.host, target_.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
      if (ec) return self->failed("cannot resolve: " + ec.message());
      self->tcp_layer().async_connect(results, [self](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return self->failed("connect: " + ec.message());
        if (!self->secure_) return self->send();
        self->secure_->async_handshake(asio::ssl::stream_base::client, [self](beast::error_code ec) {
          if (ec) return self->failed("TLS handshake: " + tls_failure(ec, self->secure_->native_handle()));
          self->send();
        });
      });
    });
  }

  void send() {
    request_ = {http::verb::get, target_.path, 11};
    request_.set(http::field::host, target_.host + ":" + target_.port);
    request_.keep_alive(false);
    if (secure_) return exchange(*secure_);
    exchange(*stream_);
  }

  template <class Stream>
  void exchange(Stream& stream) {
    http::async_write(stream, request_, [self = shared_from_this(), &stream](beast::error_code ec, std::size_t) {
      if (ec) return self->failed("write: " + ec.message());
      self->parser_.emplace();
      self->parser_->body_limit(self->settings_.body_limit);
      async_read_bounded(stream, self->buffer_, *self->parser_, max_answer_head_bytes, [self](beast::error_code ec, std::size_t) {
        if (ec == http::error::body_limit) return self->failed("the answer is larger than the limit");
        if (ec) return self->failed("read: " + ec.message());
        const auto& response = self->parser_->get();
        self->done({.answered = true, .status = response.result_int(), .body = response.body()});
      });
    });
  }

  void failed(std::string why) { done({.error = std::move(why)}); }

  void done(const poll_result& result) {
    if (stopped_) return;
    on_result_(index_, result);
    stream_.reset();
    secure_.reset();
    parser_.reset();
    buffer_.clear();
    schedule();
  }

  asio::io_context& io_;
  const poll_settings& settings_;
  asio::ssl::context* tls_;  ///< the poller's, for https:// targets (null when none is)
  poll_target target_;
  std::size_t index_;
  const http_poller::result_handler& on_result_;
  asio::steady_timer timer_;
  tcp::resolver resolver_;
  std::optional<beast::tcp_stream> stream_;                      ///< http://
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure_;  ///< https://
  beast::flat_buffer buffer_ = bounded_http_read_buffer();
  http::request<http::empty_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  bool stopped_ = false;
};

}  // namespace

struct http_poller::impl {
  poll_settings settings;
  result_handler on_result;
  asio::io_context io{1};
  std::shared_ptr<asio::ssl::context> tls;  ///< made when a target is https://
  std::vector<std::shared_ptr<poll_loop>> loops;
};

http_poller::http_poller(poll_settings settings, std::vector<poll_target> targets, result_handler on_result)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = settings;
  impl_->on_result = std::move(on_result);
  if (std::any_of(targets.begin(), targets.end(), [](const poll_target& t) { return t.tls; }))
    impl_->tls = make_worker_tls_context(impl_->settings.ca_file);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    impl_->loops.push_back(std::make_shared<poll_loop>(impl_->io, impl_->settings, impl_->tls.get(), std::move(targets[i]), i,
                                                       impl_->on_result));
    impl_->loops.back()->start();
  }
}

http_poller::~http_poller() {
  for (auto& loop : impl_->loops) loop->stop();
}

void http_poller::run_for(std::chrono::milliseconds budget) { impl_->io.run_for(budget); }

}  // namespace kvr
