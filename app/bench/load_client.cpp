#include <utility>  // before Asio under g++ 12

#include "app/bench/load_client.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "actors/http/http_read_limits.hpp"

namespace kvr::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string chat_body(const std::string& model, const loadgen::request_spec& r) {
  return fmt::format(R"({{"model":"{}","stream":true,"max_tokens":{},"ignore_eos":true,"messages":{}}})", model, r.max_tokens,
                     r.messages_json);
}

std::string completion_body(const std::string& model, const loadgen::request_spec& r) {
  if (!r.messages_json.empty()) return chat_body(model, r);
  std::string body = fmt::format(R"({{"model":"{}","stream":true,"max_tokens":{},"ignore_eos":true,"prompt":[)", model, r.max_tokens);
  body.reserve(body.size() + r.prompt.size() * 6 + 4);
  for (std::size_t i = 0; i < r.prompt.size(); ++i) {
    if (i > 0) body += ',';
    body += std::to_string(r.prompt[i]);
  }
  body += "]}";
  return body;
}

class runner;

/// One request on one connection: write, then read the response as it streams.
class exchange : public std::enable_shared_from_this<exchange> {
 public:
  /// `reused`: the connection served an earlier request (the server may have closed it since).
  exchange(runner& owner, std::size_t index, std::unique_ptr<beast::tcp_stream> stream, bool reused)
      : owner_(owner), index_(index), stream_(std::move(stream)), reused_(reused) {}
  void start(std::string request_text);

 private:
  /// A reused connection failed before any byte of the answer: true when the request went out
  /// again on a new one (once per request).
  bool resend_on_new_connection();
  void read();
  void scan_events();
  void finish(bool reusable);

  runner& owner_;
  std::size_t index_;
  std::unique_ptr<beast::tcp_stream> stream_;
  std::string request_text_;
  beast::flat_buffer buffer_ = bounded_http_read_buffer();
  std::optional<http::response_parser<http::string_body>> parser_;
  std::size_t scanned_ = 0;
  clock_type::time_point sent_;
  std::optional<clock_type::time_point> last_event_;
  bool reused_ = false;
};

class runner {
 public:
  runner(const load_settings& settings, const std::vector<loadgen::request_spec>& requests)
      : settings_(settings), requests_(requests), results_(requests.size()) {}

  std::vector<request_result> run(double& wall_seconds) {
    tcp::resolver resolver(io_);
    ports_ = settings_.ports.empty() ? std::vector<std::string>{settings_.port} : settings_.ports;
    for (const std::string& port : ports_) endpoints_.push_back(resolver.resolve(settings_.host, port));
    idle_.resize(ports_.size());
    start_ = clock_type::now();
    if (settings_.concurrency > 0) {
      for (std::size_t i = 0; i < settings_.concurrency; ++i) send_next();
    } else {
      schedule_next();
    }
    progress_timer_.expires_after(std::chrono::milliseconds(250));
    progress_timer_.async_wait([this](beast::error_code ec) { on_progress(ec); });
    io_.run();
    wall_seconds = std::chrono::duration<double>(finished_at_ - start_).count();
    if (show_progress()) std::fputs("\n", stderr);
    results_.resize(sent_);
    return std::move(results_);
  }

  request_result& result(std::size_t index) { return results_[index]; }
  clock_type::time_point start() const { return start_; }
  const load_settings& settings() const { return settings_; }

  /// An exchange ended; `stream` is handed back for reuse when the connection can be kept.
  void done(std::size_t index, std::unique_ptr<beast::tcp_stream> stream) {
    ++completed_;
    finished_at_ = clock_type::now();
    if (stream) idle_[index % ports_.size()].push_back({std::move(stream), finished_at_});
    if (settings_.concurrency > 0) send_next();
    maybe_stop();
  }

 private:
  bool show_progress() const { return settings_.progress && isatty(STDERR_FILENO); }

  bool sending_allowed() const {
    if (sent_ >= requests_.size()) return false;
    return settings_.duration_s <= 0 || std::chrono::duration<double>(clock_type::now() - start_).count() < settings_.duration_s;
  }

  void maybe_stop() {
    if (completed_ == sent_ && !sending_allowed()) {
      arrival_timer_.cancel();
      progress_timer_.cancel();
      for (auto& pool : idle_) pool.clear();
    }
  }

  void schedule_next() {
    if (!sending_allowed()) return maybe_stop();
    const auto due = start_ + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double>(requests_[sent_].arrival_s));
    arrival_timer_.expires_at(due);
    arrival_timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      // Send everything due by now (a burst keeps its arrival times), then wait for the next.
      while (sending_allowed() &&
             start_ + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(requests_[sent_].arrival_s)) <=
                 clock_type::now())
        send_next();
      schedule_next();
    });
  }

  void send_next() {
    if (!sending_allowed()) return maybe_stop();
    const std::size_t index = sent_++;
    const std::size_t replica = index % ports_.size();
    std::string body = completion_body(settings_.model, requests_[index]);
    const char* path = requests_[index].messages_json.empty() ? "/v1/completions" : "/v1/chat/completions";
    std::string text = fmt::format("POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\n"
                                   "Content-Length: {}\r\n\r\n{}",
                                   path, settings_.host, ports_[replica], body.size(), body);
    // A connection idle for long may be closed by the server (kvrouter's --client-timeout-secs,
    // default 60) just as a request goes out on it: such ones are dropped, not reused.
    const auto now = clock_type::now();
    auto& idle = idle_[replica];
    std::erase_if(idle, [now](const idle_connection& c) { return now - c.since > max_idle; });
    if (!idle.empty()) {
      auto stream = std::move(idle.back().stream);
      idle.pop_back();
      std::make_shared<exchange>(*this, index, std::move(stream), true)->start(std::move(text));
      return;
    }
    send_on_new_connection(index, std::move(text));
  }

 public:
  /// Sends request `index` (its HTTP text) on a connection of its own.
  void send_on_new_connection(std::size_t index, std::string text) {
    const std::size_t replica = index % ports_.size();
    auto stream = std::make_unique<beast::tcp_stream>(io_);
    auto* raw = stream.get();
    raw->async_connect(endpoints_[replica], [this, index, stream = std::move(stream), text = std::move(text)](
                                       beast::error_code ec, const tcp::endpoint&) mutable {
      if (ec) {
        results_[index].error = "connect: " + ec.message();
        return done(index, nullptr);
      }
      stream->socket().set_option(tcp::no_delay(true));
      std::make_shared<exchange>(*this, index, std::move(stream), false)->start(std::move(text));
    });
  }

 private:
  void on_progress(beast::error_code ec) {
    if (ec) return;
    if (show_progress()) {
      const double elapsed = std::chrono::duration<double>(clock_type::now() - start_).count();
      const std::size_t total = requests_.size();
      const int width = 30;
      const int filled = total == 0 ? width : static_cast<int>(width * completed_ / total);
      std::size_t errors = 0;
      for (std::size_t i = 0; i < sent_; ++i) errors += !results_[i].error.empty();
      std::fprintf(stderr, "\r%s [%s%s] %zu/%zu done, %zu in flight, %.0f req/s, %zu errors   ", settings_.label.c_str(),
                   std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - filled), '.').c_str(), completed_, total,
                   sent_ - completed_, elapsed > 0 ? completed_ / elapsed : 0.0, errors);
    }
    progress_timer_.expires_after(std::chrono::milliseconds(250));
    progress_timer_.async_wait([this](beast::error_code e) { on_progress(e); });
  }

  const load_settings& settings_;
  const std::vector<loadgen::request_spec>& requests_;
  std::vector<request_result> results_;
  asio::io_context io_;
  std::vector<std::string> ports_;
  std::vector<tcp::resolver::results_type> endpoints_;  ///< per port
  asio::steady_timer arrival_timer_{io_};
  asio::steady_timer progress_timer_{io_};
  struct idle_connection {
    std::unique_ptr<beast::tcp_stream> stream;
    clock_type::time_point since;
  };
  static constexpr std::chrono::seconds max_idle{20};
  std::vector<std::vector<idle_connection>> idle_;  ///< per port
  clock_type::time_point start_;
  clock_type::time_point finished_at_;
  std::size_t sent_ = 0;
  std::size_t completed_ = 0;
};

void exchange::start(std::string request_text) {
  request_text_ = std::move(request_text);
  parser_.emplace();
  parser_->body_limit(1u << 30);
  sent_ = clock_type::now();
  stream_->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(owner_.settings().request_timeout_s)));
  asio::async_write(stream_->socket(), asio::buffer(request_text_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) {
      if (self->resend_on_new_connection()) return;
      self->owner_.result(self->index_).error = "write: " + ec.message();
      return self->finish(false);
    }
    self->read();
  });
}

void exchange::read() {
  http::async_read_some(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) {
      if (!self->parser_->got_some() && self->resend_on_new_connection()) return;
      self->owner_.result(self->index_).error = "read: " + ec.message();
      return self->finish(false);
    }
    if (self->parser_->is_header_done()) self->scan_events();
    if (self->parser_->is_done()) return self->finish(self->parser_->keep_alive());
    self->read();
  });
}

/// The request's TTFT and latency then count from its second sending: the first one went out on
/// a connection that was already gone.
bool exchange::resend_on_new_connection() {
  request_result& r = owner_.result(index_);
  if (!reused_ || r.resent) return false;
  r.resent = true;
  beast::error_code ignored;
  stream_->socket().close(ignored);
  owner_.send_on_new_connection(index_, std::move(request_text_));
  return true;
}

/// Each complete `data: ...` event with content is one output chunk: the first sets the time to
/// first token, the following ones the inter-token latencies.
void exchange::scan_events() {
  const std::string& body = parser_->get().body();
  const auto now = clock_type::now();
  request_result& r = owner_.result(index_);
  while (true) {
    const std::size_t end = body.find("\n\n", scanned_);
    if (end == std::string::npos) return;
    const std::string_view event(body.data() + scanned_, end - scanned_);
    scanned_ = end + 2;
    if (!event.starts_with("data: ") || event == "data: [DONE]" || parser_->get().result_int() != 200) continue;
    if (event.find("\"choices\":[]") != std::string_view::npos) continue;  // a usage-only chunk
    if (r.output_chunks++ == 0) r.ttft_ms = ms_between(sent_, now);
    else r.itl_ms.push_back(ms_between(*last_event_, now));
    last_event_ = now;
  }
}

void exchange::finish(bool reusable) {
  request_result& r = owner_.result(index_);
  r.latency_ms = ms_between(sent_, clock_type::now());
  if (parser_ && parser_->is_header_done()) r.status = static_cast<int>(parser_->get().result_int());
  if (r.error.empty() && r.status != 200) r.error = fmt::format("HTTP {}: {}", r.status, parser_->get().body().substr(0, 200));
  if (r.error.empty() && r.output_chunks == 0) r.error = "no output";
  r.ok = r.error.empty();
  owner_.done(index_, reusable && r.ok ? std::move(stream_) : nullptr);
}

}  // namespace

std::vector<request_result> run_load(const load_settings& settings, const std::vector<loadgen::request_spec>& requests,
                                     double& wall_seconds) {
  runner r(settings, requests);
  return r.run(wall_seconds);
}

}  // namespace kvr::bench
