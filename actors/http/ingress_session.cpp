#include "actors/http/request_exchange.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <expected>

#include <fmt/format.h>

#include "actors/http/http_fields.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/http/request_intake.hpp"
#include "core/common/http_url.hpp"

namespace kvr::ingress {
namespace {

namespace beast = boost::beast;
using error_code = boost::system::error_code;

constexpr std::size_t client_read_size = 16384;

class session;

/// Where an actor's routing decision goes: posted to the session's I/O thread. A job an actor
/// drops unanswered (its worker set was retired meanwhile) is answered too, with an error, so
/// the client is not left waiting and the session ends on its own thread, never on the actor's.
class decision_sink {
 public:
  explicit decision_sink(std::shared_ptr<session> session) : session_(std::move(session)) {}
  decision_sink(const decision_sink&) = delete;
  decision_sink& operator=(const decision_sink&) = delete;
  ~decision_sink();
  void deliver(route_decision decision);

 private:
  std::shared_ptr<session> session_;
};

/// One client connection: reads its requests, answers kvrouter's own routes, and hands each
/// routed request to a `request_exchange` (its upstream side: routing, attempts, legs), whose
/// answer it writes. Lives on one I/O thread; every handler runs there.
///
/// Its shape keeps system calls and allocations per request at what a proxy must do: one read
/// of the client is always pending (it reads the next request and, meanwhile, notices a client
/// that goes away), heads are written by hand in one gather write each, and deadlines are
/// fields the thread sweeps rather than timers re-armed per operation.
class session final : public std::enable_shared_from_this<session>, public timed, private exchange_client {
 public:
  session(http_ingress::impl& server, io_thread& thread, tcp::socket socket)
      : server_(server), thread_(thread), client_(std::move(socket)), exchange_(server, thread, client_, *this) {
    registration_ = thread_.connections.insert(thread_.connections.end(), this);
    server_.probe.connection_opened();
  }
  ~session() override {
    thread_.connections.erase(registration_);
    server_.probe.connection_closed();
  }

  void start() { begin_request(); }

  void on_deadline() override {
    deadline = clock_type::time_point::max();
    switch (state_) {
      case state::reading_request:  // an idle keep-alive connection, or a client too slow
      case state::answering: return close();
      case state::exchanging: return exchange_.on_deadline();
      case state::closed: return;
    }
  }

  void on_drain() override {
    keep_alive_ = false;  // a request being handled is answered, with `Connection: close`
    // Between requests (nothing of the next one read yet): close now.
    if (state_ == state::reading_request && buffer_.size() == 0 && !parser_->got_some()) close();
  }

  [[nodiscard]] auto executor() { return client_.get_executor(); }

  /// The set's actors decided (posted to this thread by the sink).
  void on_decision(const route_decision& decision) { exchange_.on_decision(decision); }

 private:
  enum class state : std::uint8_t { reading_request, exchanging, answering, closed };

  // -- exchange_client -------------------------------------------------------------------------
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }
  void expire_after(std::chrono::seconds timeout) override { deadline = clock_type::now() + timeout; }
  void clear_deadline() override { deadline = clock_type::time_point::max(); }
  bool keeps_connection() const override { return keep_alive_; }
  route_sink decision_sink() override {
    return [answer = std::make_shared<class decision_sink>(shared_from_this())](route_decision decision) {
      answer->deliver(std::move(decision));
    };
  }
  void answer(unsigned status, std::string body) override {
    if (client_gone_) return close_after_client_left();
    send(static_cast<http::status>(status), std::move(body), "application/json");
  }
  void relayed(bool whole) override {
    if (whole && keep_alive_ && !client_gone_) return next_request();
    close();
  }
  void client_left() override { close_after_client_left(); }

  // -- reading requests ----------------------------------------------------------------------
  void begin_request() {
    state_ = state::reading_request;
    continue_sent_ = false;
    framing_checked_ = false;
    parser_.emplace();
    parser_->header_limit(server_.settings.max_header_bytes);
    parser_->body_limit(server_.settings.max_body_bytes);
    parser_->eager(false);  // stop after the header: reserve_body() sizes the body first
    body_reserved_ = false;
    head_bytes_ = 0;
    expire_after(server_.settings.client_timeout);  // the whole request, keep-alive idle time included
    parse_buffered();
  }

  /// Feeds what the client sent to the parser; reads more until a request is complete.
  void parse_buffered() {
    error_code ec;
    while (buffer_.size() > 0 && !parser_->is_done()) {
      const bool in_head = !parser_->is_header_done();
      std::size_t used = 0;
      try {
        used = parser_->put(buffer_.data(), ec);
      } catch (const std::exception& e) {  // e.g. a trailer field past Beast's 64 KiB (std::length_error)
        keep_alive_ = false;
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", e.what()), {}});
      }
      buffer_.consume(used);  // only while no read is pending (see watch_client)
      // Beast (1.74) applies its header limit to each put's bytes, not to the head: the fields
      // a put consumed are forgotten by the next one, so a head fed in pieces would never end.
      if (in_head && (head_bytes_ += used) > server_.settings.max_header_bytes) return on_request_error(http::error::header_limit);
      if (ec == http::error::need_more) break;
      if (ec) return on_request_error(ec);
      if (parser_->is_header_done() && !body_reserved_) reserve_body();
    }
    // Body bytes are parsed as they come, so what waits here is a head, a chunk's size line or a
    // trailer, waiting for its end; Beast bounds only the head (http_read_limits.hpp).
    const std::size_t unparsed_limit = std::max<std::size_t>(server_.settings.max_header_bytes, max_unparsed_http_bytes);
    if (!parser_->is_done() && buffer_.size() > unparsed_limit) {
      keep_alive_ = false;
      return send_error({api_errc::invalid_request,
                         fmt::format("malformed HTTP request: a chunk line or trailer longer than {} bytes", unparsed_limit), {}});
    }
    if (parser_->is_header_done() && !framing_checked_) {
      framing_checked_ = true;
      if (const std::string problem = framing_problem(parser_->get()); !problem.empty()) {
        keep_alive_ = false;  // the rest of the stream cannot be delimited: answer, then close
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", problem), {}});
      }
      if (const std::string problem = host_problem(parser_->get()); !problem.empty()) {
        keep_alive_ = false;
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", problem), {}});
      }
    }
    if (parser_->is_done()) return on_request();
    if (parser_->is_header_done() && !continue_sent_ && expects_continue()) send_continue();
    read_client();
  }

  /// With the header read and no body byte yet: a declared body gets its whole buffer now,
  /// with the JSON parser's padding, so that it is never copied into a bigger one.
  void reserve_body() {
    body_reserved_ = true;
    if (const auto length = parser_->content_length(); length && *length <= server_.settings.max_body_bytes)
      parser_->get().body().reserve(static_cast<std::size_t>(*length) + request_parser::padding);
    parser_->eager(true);
  }

  /// A client that sent `Expect: 100-continue` waits for a go-ahead before its body (curl
  /// waits a second for bodies over 1 MiB): the headers passed the limits, so give it.
  [[nodiscard]] bool expects_continue() const {
    const auto& header = parser_->get();
    const auto expect = header.find(http::field::expect);
    return expect != header.end() && beast::iequals(expect->value(), "100-continue") && header.version() >= 11;
  }

  /// Written while the read of the body is pending. The answer cannot overlap it: the client
  /// sends its body only after these bytes, and a socket this idle takes them at once.
  void send_continue() {
    continue_sent_ = true;
    static constexpr std::string_view go_ahead = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(client_, asio::buffer(go_ahead.data(), go_ahead.size()),
                      [self = shared_from_this()](error_code, std::size_t) {});  // a failure shows on the read
  }

  void read_client() {
    if (reading_client_) return;
    reading_client_ = true;
    client_.async_read_some(buffer_.prepare(client_read_size),
                            [self = shared_from_this()](error_code ec, std::size_t n) { self->on_client_read(ec, n); });
  }

  void on_client_read(error_code ec, std::size_t n) {
    reading_client_ = false;
    if (state_ == state::closed) return;
    if (!ec) buffer_.commit(n);
    if (state_ == state::reading_request) {
      if (ec) return close();  // end of stream, reset, or closed by the deadline sweep
      return parse_buffered();
    }
    // Busy with a request: bytes are a pipelined request (kept for later; no longer watching),
    // an error is a client that went away.
    if (ec) client_went_away();
  }

  void on_request_error(error_code ec) {
    keep_alive_ = false;
    if (ec == http::error::body_limit)
      return send_error({api_errc::body_too_large,
                         fmt::format("the request body exceeds {} bytes", server_.settings.max_body_bytes), {}});
    if (ec == http::error::header_limit) return send_error({api_errc::invalid_request, "the request headers are too large", {}});
    send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", ec.message()), {}});
  }

  void on_request() {
    request_ = parser_->release();
    // An absolute-form target is routed, and forwarded, by its path (RFC 9112 §3.2.2).
    if (const std::string_view target(request_.target().data(), request_.target().size()); !target.starts_with('/'))
      if (const auto origin = origin_form_target(target)) request_.target(std::string(*origin));
    keep_alive_ = request_.keep_alive() && !server_.draining.load(std::memory_order_relaxed);
    deadline = clock_type::time_point::max();
    dispatch();
  }

  // -- kvrouter's own routes -------------------------------------------------------------------
  void dispatch() {
    const std::string_view target(request_.target().data(), request_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = request_.method() == http::verb::get;
    const bool post = request_.method() == http::verb::post;
    const auto authorization = request_.find(http::field::authorization);
    if (auto refused = server_.keys->check(api_key_guard::classify(path),
                                           authorization == request_.end() ? std::string_view{}
                                                                           : std::string_view(authorization->value().data(),
                                                                                              authorization->value().size())))
      return send_error(*refused);
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (!post) return send_error({api_errc::method_not_allowed, "use POST", {}});
      return route(read_completion(server_, thread_, request_,
                                   path == "/v1/chat/completions" ? api_endpoint::chat_completions : api_endpoint::completions));
    }
    if (path == "/v1/router/faults" && server_.settings.fault_injection) {
      if (!post) return send_error({api_errc::method_not_allowed, "use POST", {}});
      return send_local(answer_fault(server_, request_.body()));
    }
    if (!is_own_route(path)) return route(read_passthrough(server_, thread_, request_, path));
    if (!get) return send_error({api_errc::method_not_allowed, "use GET", {}});
    send_local(answer_own_route(server_, path, target));
  }

  // -- routed requests -----------------------------------------------------------------------
  void route(intake read) {
    if (!read) return send_local(std::move(read.error()));
    if (auto refused = exchange_.begin(std::move(read->table), *read->set, std::move(read->request), request_))
      return send_error(*refused);
    state_ = state::exchanging;
    watch_client();
    exchange_.route();
  }

  /// While a request is routed and proxied, the pending read of the client notices it going
  /// away (end of stream or reset) and cancels the upstream request at once. Only started with
  /// nothing buffered: the buffer must not move under a pending read, and bytes already there
  /// are a pipelined request, so the client is still there.
  void watch_client() {
    if (buffer_.size() == 0) read_client();
  }

  void client_went_away() {
    client_gone_ = true;
    if (state_ == state::exchanging) exchange_.client_went_away();
  }

  void close_after_client_left() {
    server_.probe.client_disconnected();
    close();
  }

  // -- answering directly ----------------------------------------------------------------------
  void send_error(const api_error& error) {
    send(static_cast<http::status>(http_status(error.code)), error_body(error), "application/json");
  }

  void send_local(local_answer answer) { send(static_cast<http::status>(answer.status), std::move(answer.body), answer.content_type); }

  void send(http::status status, std::string body, std::string_view content_type) {
    state_ = state::answering;
    const auto reason = http::obsolete_reason(status);
    // A 429 (the set's queue or in-flight bound is full) says when to come back.
    head_ = fmt::format("HTTP/1.1 {} {}\r\nServer: kvrouter\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n",
                        static_cast<unsigned>(status), std::string_view(reason.data(), reason.size()), content_type,
                        body.size(), status == http::status::too_many_requests ? "Retry-After: 1\r\n" : "",
                        keep_alive_ ? "" : "Connection: close\r\n");
    local_body_ = std::move(body);
    server_.probe.responded(static_cast<unsigned>(status));
    expire_after(server_.settings.client_timeout);
    const std::array<asio::const_buffer, 2> out{asio::buffer(head_), asio::buffer(local_body_)};
    asio::async_write(client_, out, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec || !self->keep_alive_ || self->client_gone_) return self->close();
      self->next_request();
    });
  }

  void next_request() {
    exchange_.reset();
    client_gone_ = false;
    begin_request();
  }

  void close() {
    state_ = state::closed;
    deadline = clock_type::time_point::max();
    error_code ignored;
    client_.shutdown(tcp::socket::shutdown_both, ignored);
    client_.close(ignored);
  }

  http_ingress::impl& server_;
  io_thread& thread_;
  std::list<timed*>::iterator registration_;
  tcp::socket client_;
  beast::flat_buffer buffer_;
  bool reading_client_ = false;
  bool continue_sent_ = false;    ///< `100 Continue` went out for the request being read
  bool framing_checked_ = false;  ///< the request's framing fields were checked (once its head is read)
  bool body_reserved_ = false;    ///< reserve_body() ran for the request being read
  std::size_t head_bytes_ = 0;    ///< bytes of the request's head the parser consumed so far
  bool keep_alive_ = true;
  bool client_gone_ = false;  ///< the client left while its request was routed or proxied
  state state_ = state::reading_request;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::string head_;        ///< a local answer's head
  std::string local_body_;  ///< a local answer's body
  request_exchange exchange_;
};

void decision_sink::deliver(route_decision decision) {
  auto executor = session_->executor();
  asio::post(executor, [session = std::move(session_), decision = std::move(decision)]() mutable {
    session->on_decision(std::move(decision));
  });
}

decision_sink::~decision_sink() {
  if (!session_) return;  // delivered
  route_decision dropped;
  dropped.failure = route_failure::set_retired;
  deliver(std::move(dropped));
}

}  // namespace

void serve_connection(http_ingress::impl& server, io_thread& thread, tcp::socket socket) {
  std::make_shared<session>(server, thread, std::move(socket))->start();
}

}  // namespace kvr::ingress
